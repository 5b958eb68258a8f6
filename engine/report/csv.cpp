// CSV export: RFC 4180, locale-independent numbers, atomic writes.
#include "report/csv.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace engine {

namespace fs = std::filesystem;

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // std::to_chars: shortest representation that round-trips, never locale-dependent.
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

namespace {

std::string num(double v) { return csv_number(v); }
std::string num(std::int64_t v) { return std::to_string(v); }
std::string num(int v) { return std::to_string(v); }
std::string flag(bool b) { return b ? "1" : "0"; }

class Row {
 public:
  Row& operator<<(const std::string& s) {
    if (!m_first) m_line += ',';
    m_line += csv_field(s);
    m_first = false;
    return *this;
  }
  std::string line() const { return m_line + "\r\n"; }

 private:
  std::string m_line;
  bool m_first = true;
};

// Writes `content` to dir/name through a temporary file and a rename.
void write_atomically(const fs::path& dir, const std::string& name, const std::string& content) {
  const fs::path final_path = dir / name;
  const fs::path tmp = dir / ("." + name + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(tmp.string() + ": cannot create file");
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw std::runtime_error(final_path.string() + ": write failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(final_path.string() + ": cannot rename into place: " + ec.message());
  }
}

}  // namespace

const std::string& csv_header(CsvFile f) {
  static const std::string headers[] = {
      "run_id,run,recipe,step,epoch,loss,loss_scale,overflow,skipped,grad_norm,lr,mem_weights,mem_master,mem_grads,"
      "mem_optimizer,mem_activations,mem_workspace,mem_total,mem_emulation,rss,wall_ms,samples_per_second,"
      "train_accuracy\r\n",
      "run_id,run,recipe,step,epoch,val_loss,val_accuracy\r\n",
      "run_id,run,recipe,step,kind,layer,tensor,count,value\r\n",
      "run_id,run,recipe,step,layer,format,zeros,total,underflow_unscaled,subnormal_unscaled,overflow_unscaled,"
      "underflow_scaled,subnormal_scaled,overflow_scaled,shadow,output_error,grad_error,grad_bias,log2_lo,histogram\r\n",
      "run_id,run,recipe,model,dataset,backend,steps,final_loss,val_loss,val_accuracy,overflow_steps,"
      "skipped_steps,final_loss_scale,peak_memory_bytes,wall_seconds,samples_per_second\r\n"};
  return headers[static_cast<int>(f)];
}

const char* csv_file_name(CsvFile f) {
  static const char* names[] = {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv"};
  return names[static_cast<int>(f)];
}

namespace {
Row lead(const CsvRun& r) {
  Row row;
  row << num(r.run_id) << r.name << r.recipe;
  return row;
}
}  // namespace

std::string csv_row(const CsvRun& r, const StepMetrics& m) {
  Row row = lead(r);
  row << num(m.step) << num(m.epoch) << num(m.loss) << num(m.loss_scale) << flag(m.overflow) << flag(m.skipped)
      << num(m.grad_norm) << num(m.lr) << num(m.mem.weights) << num(m.mem.master) << num(m.mem.grads)
      << num(m.mem.optimizer) << num(m.mem.activations) << num(m.mem.workspace) << num(m.mem.total())
      << num(m.mem.emulation) << num(m.rss) << num(m.wall_ms) << num(m.samples_per_second)
      << num(m.train_accuracy);
  return row.line();
}

std::string csv_row(const CsvRun& r, const EvalMetrics& e) {
  Row row = lead(r);
  row << num(e.step) << num(e.epoch) << num(e.val_loss) << num(e.val_accuracy);
  return row.line();
}

std::string csv_row(const CsvRun& r, const Event& e) {
  Row row = lead(r);
  std::string tensor = e.tensor;
  if (e.kind == EventKind::PrecisionChange) tensor = precision_text(e.precision);
  row << num(e.step) << event_kind_name(e.kind) << e.layer << tensor << num(e.count) << num(e.value);
  return row.line();
}

std::string csv_row(const CsvRun& r, const GradStats& g) {
  Row row = lead(r);
  row << num(g.step) << g.layer << g.format << num(g.zeros) << num(g.total) << num(g.underflow_unscaled)
      << num(g.subnormal_unscaled) << num(g.overflow_unscaled) << num(g.underflow_scaled) << num(g.subnormal_scaled)
      << num(g.overflow_scaled) << flag(g.shadow) << num(g.output_error) << num(g.grad_error) << num(g.grad_bias) << num(g.log2_lo)
      << histogram_text(g.histogram);
  return row.line();
}

std::string csv_row(const CsvRun& r, const RunSummary& s) {
  Row row = lead(r);
  row << s.model << s.dataset << s.backend << num(s.steps) << num(s.final_loss) << num(s.val_loss)
      << num(s.val_accuracy) << num(s.overflow_steps) << num(s.skipped_steps) << num(s.final_loss_scale)
      << num(s.peak_memory_bytes) << num(s.wall_seconds) << num(s.samples_per_second);
  return row.line();
}

std::string histogram_text(const std::vector<std::int64_t>& counts) {
  std::string s;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(counts[i]);
  }
  return s;
}

std::string precision_text(const LayerPrecision& p) {
  return std::string(format_key(p.compute)) + "/" + format_key(p.storage) + "/" + format_key(p.accumulate) + "/" +
         format_key(p.grad);
}

void export_runs(const std::string& dir_s, const std::vector<RunExport>& runs) {
  const fs::path dir(dir_s);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw std::runtime_error(dir_s + ": cannot create output folder");

  // Build every file in memory first: nothing is renamed into place until
  // all contents exist.
  std::string steps = csv_header(CsvFile::Steps), evals = csv_header(CsvFile::Evals),
              events = csv_header(CsvFile::Events), grads = csv_header(CsvFile::Grads),
              summary = csv_header(CsvFile::Summary);
  for (const RunExport& r : runs) {
    const CsvRun who{r.run_id, r.name.empty() ? r.recipe : r.name, r.recipe};
    const RunHistory& h = r.history;
    for (const StepMetrics& m : h.steps) steps += csv_row(who, m);
    for (const EvalMetrics& e : h.evals) evals += csv_row(who, e);
    for (const Event& e : h.events) events += csv_row(who, e);
    for (const GradStats& g : h.grads) grads += csv_row(who, g);
    summary += csv_row(who, r.summary);
  }
  std::string config;
  if (!runs.empty()) {
    RunConfig c = runs.front().config;
    if (runs.size() > 1) {
      c.compare.clear();
      for (const RunExport& r : runs) c.compare.push_back(r.config.recipe);
    }
    config = to_json(c);
  }
  write_atomically(dir, "steps.csv", steps);
  write_atomically(dir, "evals.csv", evals);
  write_atomically(dir, "events.csv", events);
  write_atomically(dir, "grads.csv", grads);
  write_atomically(dir, "summary.csv", summary);
  if (!config.empty()) write_atomically(dir, "config.json", config);
}

void write_file_atomically(const std::string& dir, const std::string& name, const std::string& content) {
  write_atomically(fs::path(dir), name, content);
}

int CsvTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_csv(ss.str(), path);
}

CsvTable parse_csv(const std::string& text, const std::string& path) {
  CsvTable t;
  std::vector<std::string> rec;
  std::string field;
  bool quoted = false, any = false;
  auto end_record = [&] {
    rec.push_back(field);
    field.clear();
    if (t.header.empty()) t.header = rec;
    else t.rows.push_back(rec);
    rec.clear();
    any = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      rec.push_back(field);
      field.clear();
      any = true;
    } else if (c == '\r') {
      // part of CRLF
    } else if (c == '\n') {
      end_record();
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) throw std::runtime_error(path + ": unterminated quoted field");
  if (any || !field.empty()) end_record();
  return t;
}

}  // namespace engine
