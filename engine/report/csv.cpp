// CSV export: RFC 4180, locale-independent numbers, atomic writes.
#include "report/csv.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <type_traits>

#include "report/text_samples.h"

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

// ------------------------------------------------------------ the columns
//
// One table per file: each column's name, how a record writes it and how a
// row is read back into a record (the journal reopens run folders with it).
// The header, the rows and the reader all come from these tables, so a
// column added here is written and read back by name with no other edit.

namespace {

template <class T>
struct Column {
  const char* name;
  std::string (*write)(const T&);
  void (*read)(T&, const CsvRow&);  // null: written only (derived on reading)
};

// The text of a value as the files hold it.
template <class V>
std::string cell(const V& v) {
  if constexpr (std::is_same_v<V, bool>) return flag(v);
  else if constexpr (std::is_same_v<V, std::string>) return v;
  else if constexpr (std::is_integral_v<V>) return num(static_cast<std::int64_t>(v));
  else return num(static_cast<double>(v));
}
// A value read back from the column `name` of row `c`.
template <class V>
void uncell(V& v, const CsvRow& c, const char* name) {
  if constexpr (std::is_same_v<V, bool>) v = c.b(name);
  else if constexpr (std::is_same_v<V, std::string>) v = c.at(name);
  else if constexpr (std::is_integral_v<V>) v = static_cast<V>(c.i(name));
  else v = static_cast<V>(c.d(name));
}

// Bits per token and perplexity: derived from the loss, written for a text
// run's rows and empty for the others; reading back marks the record as a
// text run's when the cell holds a number (files from before these columns
// have none, and read as not text).
template <class T>
Column<T> bits_column() {
  return {"val_bits_per_token", [](const T& r) { return r.per_token ? num(r.val_bits_per_token()) : std::string(); },
          [](T& r, const CsvRow& c) {
            if (c.table.column("val_bits_per_token") < 0) return;  // a file from before the column
            r.per_token = !c.at("val_bits_per_token").empty();
            if (r.per_token) (void)c.d("val_bits_per_token");  // a number, or the row is refused
          }};
}
template <class T>
Column<T> perplexity_column() {
  return {"val_perplexity", [](const T& r) { return r.per_token ? num(r.val_perplexity()) : std::string(); },
          nullptr};
}

// A column that is one member, written and read as it is.
#define PL_COLUMN(T, NAME, MEMBER)                                        \
  Column<T> {                                                             \
    NAME, [](const T& r) { return cell(r.MEMBER); },                      \
        [](T& r, const CsvRow& c) { uncell(r.MEMBER, c, NAME); }          \
  }

const Column<StepMetrics> kStepColumns[] = {
    PL_COLUMN(StepMetrics, "step", step),
    PL_COLUMN(StepMetrics, "epoch", epoch),
    PL_COLUMN(StepMetrics, "loss", loss),
    PL_COLUMN(StepMetrics, "loss_scale", loss_scale),
    PL_COLUMN(StepMetrics, "overflow", overflow),
    PL_COLUMN(StepMetrics, "skipped", skipped),
    PL_COLUMN(StepMetrics, "grad_norm", grad_norm),
    PL_COLUMN(StepMetrics, "lr", lr),
    PL_COLUMN(StepMetrics, "mem_weights", mem.weights),
    PL_COLUMN(StepMetrics, "mem_master", mem.master),
    PL_COLUMN(StepMetrics, "mem_grads", mem.grads),
    PL_COLUMN(StepMetrics, "mem_optimizer", mem.optimizer),
    PL_COLUMN(StepMetrics, "mem_activations", mem.activations),
    PL_COLUMN(StepMetrics, "mem_workspace", mem.workspace),
    {"mem_total", [](const StepMetrics& m) { return num(m.mem.total()); }, nullptr},
    PL_COLUMN(StepMetrics, "mem_emulation", mem.emulation),
    PL_COLUMN(StepMetrics, "rss", rss),
    PL_COLUMN(StepMetrics, "wall_ms", wall_ms),
    PL_COLUMN(StepMetrics, "samples_per_second", samples_per_second),
    PL_COLUMN(StepMetrics, "train_accuracy", train_accuracy),
    // A gpt's z-loss term (mean log^2 Z; 0 without --z-loss), apart from
    // `loss`, the cross-entropy. Files from before the column read as 0.
    {"z_term", [](const StepMetrics& m) { return cell(m.z_term); },
     [](StepMetrics& m, const CsvRow& c) {
       if (c.table.column("z_term") >= 0) uncell(m.z_term, c, "z_term");
     }},
    // The backend allocator's live bytes (StepMetrics::device_allocated; 0
    // on the CPU backend). Files from before the column read as 0.
    {"device_allocated", [](const StepMetrics& m) { return cell(m.device_allocated); },
     [](StepMetrics& m, const CsvRow& c) {
       if (c.table.column("device_allocated") >= 0) uncell(m.device_allocated, c, "device_allocated");
     }},
};

const Column<EvalMetrics> kEvalColumns[] = {
    PL_COLUMN(EvalMetrics, "step", step),
    PL_COLUMN(EvalMetrics, "epoch", epoch),
    PL_COLUMN(EvalMetrics, "val_loss", val_loss),
    PL_COLUMN(EvalMetrics, "val_accuracy", val_accuracy),
    bits_column<EvalMetrics>(),
    perplexity_column<EvalMetrics>(),
};

const Column<Event> kEventColumns[] = {
    PL_COLUMN(Event, "step", step),
    {"kind", [](const Event& e) { return std::string(event_kind_name(e.kind)); },
     [](Event& e, const CsvRow& c) {
       const auto kind = parse_event_kind(c.at("kind"));
       if (!kind) c.fail("unknown event kind '" + c.at("kind") + "'");
       e.kind = *kind;
     }},
    PL_COLUMN(Event, "layer", layer),
    // A precision change's tensor is the new precision, compute/storage/accumulate/grad.
    {"tensor",
     [](const Event& e) { return e.kind == EventKind::PrecisionChange ? precision_text(e.precision) : e.tensor; },
     [](Event& e, const CsvRow& c) {
       e.tensor = c.at("tensor");
       if (e.kind != EventKind::PrecisionChange) return;
       std::stringstream ss(e.tensor);
       std::string part;
       Format* fields[] = {&e.precision.compute, &e.precision.storage, &e.precision.accumulate, &e.precision.grad};
       for (Format* f : fields) {
         if (!std::getline(ss, part, '/')) c.fail("bad precision '" + e.tensor + "'");
         const auto fmt = parse_format(part);
         if (!fmt) c.fail("bad precision '" + e.tensor + "'");
         *f = *fmt;
       }
       e.tensor.clear();
     }},
    PL_COLUMN(Event, "count", count),
    PL_COLUMN(Event, "value", value),
};

const Column<GradStats> kGradColumns[] = {
    PL_COLUMN(GradStats, "step", step),
    PL_COLUMN(GradStats, "layer", layer),
    PL_COLUMN(GradStats, "format", format),
    PL_COLUMN(GradStats, "zeros", zeros),
    PL_COLUMN(GradStats, "total", total),
    PL_COLUMN(GradStats, "underflow_unscaled", underflow_unscaled),
    PL_COLUMN(GradStats, "subnormal_unscaled", subnormal_unscaled),
    PL_COLUMN(GradStats, "overflow_unscaled", overflow_unscaled),
    PL_COLUMN(GradStats, "underflow_scaled", underflow_scaled),
    PL_COLUMN(GradStats, "subnormal_scaled", subnormal_scaled),
    PL_COLUMN(GradStats, "overflow_scaled", overflow_scaled),
    PL_COLUMN(GradStats, "shadow", shadow),
    PL_COLUMN(GradStats, "output_error", output_error),
    PL_COLUMN(GradStats, "grad_error", grad_error),
    PL_COLUMN(GradStats, "grad_bias", grad_bias),
    {"log2_lo", [](const GradStats& g) { return num(g.log2_lo); },
     [](GradStats& g, const CsvRow& c) {
       g.log2_lo = static_cast<int>(std::clamp<std::int64_t>(c.i("log2_lo"), -1100, 1100));
     }},
    {"histogram", [](const GradStats& g) { return histogram_text(g.histogram); },
     [](GradStats& g, const CsvRow& c) {
       std::stringstream hs(c.at("histogram"));
       g.histogram.clear();
       for (std::string count; hs >> count;) {
         char* end = nullptr;
         const long long v = std::strtoll(count.c_str(), &end, 10);
         if (*end != '\0' || v < 0 || g.histogram.size() >= 4096) c.fail("bad histogram '" + c.at("histogram") + "'");
         g.histogram.push_back(v);
       }
     }},
};

// The summary's recipe is the lead column's; the reader takes it from there.
const Column<RunSummary> kSummaryColumns[] = {
    PL_COLUMN(RunSummary, "model", model),
    PL_COLUMN(RunSummary, "dataset", dataset),
    PL_COLUMN(RunSummary, "backend", backend),
    PL_COLUMN(RunSummary, "steps", steps),
    PL_COLUMN(RunSummary, "final_loss", final_loss),
    PL_COLUMN(RunSummary, "val_loss", val_loss),
    PL_COLUMN(RunSummary, "val_accuracy", val_accuracy),
    bits_column<RunSummary>(),
    perplexity_column<RunSummary>(),
    PL_COLUMN(RunSummary, "overflow_steps", overflow_steps),
    PL_COLUMN(RunSummary, "skipped_steps", skipped_steps),
    PL_COLUMN(RunSummary, "final_loss_scale", final_loss_scale),
    PL_COLUMN(RunSummary, "peak_memory_bytes", peak_memory_bytes),
    PL_COLUMN(RunSummary, "wall_seconds", wall_seconds),
    PL_COLUMN(RunSummary, "samples_per_second", samples_per_second),
};

#undef PL_COLUMN

// Every file starts with the run: its id, its name and its recipe.
template <class T, std::size_t N>
std::string header_of(const Column<T> (&columns)[N]) {
  std::string h = "run_id,run,recipe";
  for (const Column<T>& c : columns) h += std::string(",") + c.name;
  return h + "\r\n";
}

template <class T, std::size_t N>
std::string row_of(const Column<T> (&columns)[N], const CsvRun& r, const T& record) {
  Row row;
  row << num(r.run_id) << r.name << r.recipe;
  for (const Column<T>& c : columns) row << c.write(record);
  return row.line();
}

template <class T, std::size_t N>
void read_row(const Column<T> (&columns)[N], const CsvRow& row, T& record) {
  for (const Column<T>& c : columns)
    if (c.read) c.read(record, row);
}

}  // namespace

const std::string& csv_header(CsvFile f) {
  static const std::string headers[] = {header_of(kStepColumns), header_of(kEvalColumns), header_of(kEventColumns),
                                        header_of(kGradColumns), header_of(kSummaryColumns)};
  return headers[static_cast<int>(f)];
}

const char* csv_file_name(CsvFile f) {
  static const char* names[] = {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv"};
  return names[static_cast<int>(f)];
}

std::string csv_row(const CsvRun& r, const StepMetrics& m) { return row_of(kStepColumns, r, m); }
std::string csv_row(const CsvRun& r, const EvalMetrics& e) { return row_of(kEvalColumns, r, e); }
std::string csv_row(const CsvRun& r, const Event& e) { return row_of(kEventColumns, r, e); }
std::string csv_row(const CsvRun& r, const GradStats& g) { return row_of(kGradColumns, r, g); }
std::string csv_row(const CsvRun& r, const RunSummary& s) { return row_of(kSummaryColumns, r, s); }

void csv_read(const CsvRow& row, StepMetrics& m) { read_row(kStepColumns, row, m); }
void csv_read(const CsvRow& row, EvalMetrics& e) { read_row(kEvalColumns, row, e); }
void csv_read(const CsvRow& row, Event& e) { read_row(kEventColumns, row, e); }
void csv_read(const CsvRow& row, GradStats& g) { read_row(kGradColumns, row, g); }
void csv_read(const CsvRow& row, RunSummary& s) {
  s.recipe = row.at("recipe");
  read_row(kSummaryColumns, row, s);
}

// ------------------------------------------------------------ reading rows

void CsvRow::fail(const std::string& what) const {
  throw std::runtime_error(origin + ":" + std::to_string(row + 2) + ": " + what);
}

const std::string& CsvRow::at(const char* name) const {
  const int c = table.column(name);
  if (c < 0) throw std::runtime_error(origin + ": no column '" + name + "'");
  const auto& r = table.rows[row];
  if (static_cast<std::size_t>(c) >= r.size())
    fail("expected " + std::to_string(table.header.size()) + " fields, got " + std::to_string(r.size()));
  return r[static_cast<std::size_t>(c)];
}

double CsvRow::d(const char* name) const {
  const std::string& s = at(name);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') fail(std::string("'") + name + "' is not a number: '" + s + "'");
  return v;
}

std::int64_t CsvRow::i(const char* name) const {
  const double v = d(name);
  if (!(std::fabs(v) < 9e18) || v != std::floor(v)) fail(std::string("'") + name + "' is not an integer");
  return static_cast<std::int64_t>(v);
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
  std::string samples;  // samples.jsonl: what the text runs wrote at their evaluations
  for (const RunExport& r : runs) {
    const CsvRun who{r.run_id, r.name.empty() ? r.recipe : r.name, r.recipe};
    const RunHistory& h = r.history;
    for (const StepMetrics& m : h.steps) steps += csv_row(who, m);
    for (const EvalMetrics& e : h.evals) evals += csv_row(who, e);
    for (const Event& e : h.events) events += csv_row(who, e);
    for (const GradStats& g : h.grads) grads += csv_row(who, g);
    summary += csv_row(who, r.summary);
    for (const TextSample& t : h.texts) {
      TextSample line = t;
      line.run_id = r.run_id;  // the export's numbering, as in its CSV files
      samples += text_sample_line(line, who.name);
    }
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
  if (!samples.empty()) write_atomically(dir, "samples.jsonl", samples);
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
