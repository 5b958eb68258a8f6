// Journal: the run folder written as the runs go, and read back.
#include "journal/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "data/text.h"
#include "journal/initial_state.h"
#include "train/run.h"
#include "journal/weights.h"
#include "report/text_samples.h"

namespace engine {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const CsvFile kAppended[4] = {CsvFile::Steps, CsvFile::Evals, CsvFile::Events, CsvFile::Grads};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(p.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether some process holds the folder's lock (flock is released by the
// kernel when the writer dies, however it dies).
bool lock_held(const fs::path& dir) {
  const int fd = ::open((dir / ".lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

}  // namespace

struct Journal::RunState {
  CsvRun who;
  std::string status = "pending";
  std::string message;
  std::int64_t steps = 0;
  std::int64_t total_steps = 0;
  bool has_summary = false;
  RunSummary summary;
};

Journal::Journal(const std::string& dir, std::vector<JournalRun> runs) : m_dir(dir), m_runs(std::move(runs)) {
  std::error_code ec;
  fs::create_directories(m_dir, ec);
  if (ec || !fs::is_directory(m_dir)) throw std::runtime_error(m_dir + ": cannot create the run folder");
  m_lock = ::open((fs::path(m_dir) / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (m_lock < 0) throw std::runtime_error(m_dir + ": cannot write in the run folder");
  if (::flock(m_lock, LOCK_EX | LOCK_NB) != 0) {
    ::close(m_lock);
    m_lock = -1;
    throw std::runtime_error(m_dir + ": another process is writing this run folder");
  }
  // A folder written before keeps no weights of runs this one does not have.
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(m_dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("weights-", 0) == 0 && f.size() > 12 && f.compare(f.size() - 4, 4, ".bin") == 0) stale.push_back(e.path());
  }
  for (const fs::path& p : stale) fs::remove(p, ec);
  fs::remove(fs::path(m_dir) / "samples.jsonl", ec);  // opened when a run writes a sample
  // Starting configs: config.json as a --config file takes it, runs.json with every run.
  json runs_json = json::array();
  for (std::size_t i = 0; i < m_runs.size(); ++i) {
    RunState st;
    st.who = {static_cast<int>(i), m_runs[i].name, m_runs[i].config.recipe};
    m_state.push_back(st);
    runs_json.push_back({{"run_id", i}, {"name", m_runs[i].name}, {"config", json::parse(to_json(m_runs[i].config))}});
  }
  if (!m_runs.empty()) {
    RunConfig first = m_runs.front().config;
    if (m_runs.size() > 1) {
      first.compare.clear();
      for (const JournalRun& r : m_runs) first.compare.push_back(r.config.recipe);
    }
    write_file_atomically(m_dir, "config.json", to_json(first));
  }
  write_file_atomically(m_dir, "runs.json", json({{"runs", runs_json}}).dump(2) + "\n");
  for (int f = 0; f < 4; ++f) {
    const fs::path p = fs::path(m_dir) / csv_file_name(kAppended[f]);
    m_files[f] = std::fopen(p.c_str(), "wb");
    if (!m_files[f]) throw std::runtime_error(p.string() + ": cannot create file");
    std::fputs(csv_header(kAppended[f]).c_str(), m_files[f]);
  }
  m_commands = std::fopen((fs::path(m_dir) / "commands.jsonl").c_str(), "wb");
  if (!m_commands) throw std::runtime_error(m_dir + "/commands.jsonl: cannot create file");
  // No summary until the runs end: an interrupted folder has only the header.
  write_file_atomically(m_dir, "summary.csv", csv_header(CsvFile::Summary));
  flush();
  write_status();
  m_last_flush_ms = now_ms();
}

Journal::~Journal() {
  flush();
  for (std::FILE*& f : m_files)
    if (f) std::fclose(f), f = nullptr;
  if (m_commands) std::fclose(m_commands);
  if (m_samples) std::fclose(m_samples);
  if (m_lock >= 0) ::close(m_lock);  // releases the flock
}

void Journal::flush() {
  for (std::FILE* f : m_files)
    if (f) std::fflush(f);
  if (m_commands) std::fflush(m_commands);
  if (m_samples) std::fflush(m_samples);
  m_dirty = false;
}

void Journal::write_status() {
  json runs = json::array();
  bool live = false, failed = false, stopped = false;
  for (const RunState& s : m_state) {
    runs.push_back({{"run_id", s.who.run_id},
                    {"name", s.who.name},
                    {"recipe", s.who.recipe},
                    {"status", s.status},
                    {"message", s.message},
                    {"steps", s.steps},
                    {"total_steps", s.total_steps}});
    live = live || s.status == "pending" || s.status == "running" || s.status == "paused";
    failed = failed || s.status == "failed";
    stopped = stopped || s.status == "stopped";
  }
  const char* status = live ? "running" : failed ? "failed" : stopped ? "stopped" : "finished";
  json j = {{"status", status}, {"pid", static_cast<long>(::getpid())}, {"runs", runs}};
  // A failed folder says why at the top (the first failed run's reason).
  if (failed && !live)
    for (const RunState& s : m_state)
      if (s.status == "failed" && !s.message.empty()) {
        j["message"] = s.message;
        break;
      }
  write_file_atomically(m_dir, "status.json", j.dump(2) + "\n");
}

void Journal::record(const Record& r) {
  auto append = [&](int file, int run_id, const std::string& row) {
    if (run_id < 0 || static_cast<std::size_t>(run_id) >= m_state.size()) return;
    std::fputs(row.c_str(), m_files[file]);
    m_dirty = true;
    m_rows_written = true;
  };
  if (const auto* m = std::get_if<StepMetrics>(&r)) {
    if (m->run_id >= 0 && static_cast<std::size_t>(m->run_id) < m_state.size()) {
      append(0, m->run_id, csv_row(m_state[m->run_id].who, *m));
      m_state[m->run_id].steps = m->step;
    }
  } else if (const auto* e = std::get_if<EvalMetrics>(&r)) {
    if (e->run_id >= 0 && static_cast<std::size_t>(e->run_id) < m_state.size())
      append(1, e->run_id, csv_row(m_state[e->run_id].who, *e));
  } else if (const auto* ev = std::get_if<Event>(&r)) {
    if (ev->run_id >= 0 && static_cast<std::size_t>(ev->run_id) < m_state.size())
      append(2, ev->run_id, csv_row(m_state[ev->run_id].who, *ev));
  } else if (const auto* g = std::get_if<GradStats>(&r)) {
    if (g->run_id >= 0 && static_cast<std::size_t>(g->run_id) < m_state.size())
      append(3, g->run_id, csv_row(m_state[g->run_id].who, *g));
  } else if (const auto* s = std::get_if<RunSummary>(&r)) {
    if (s->run_id >= 0 && static_cast<std::size_t>(s->run_id) < m_state.size()) {
      m_state[s->run_id].has_summary = true;
      m_state[s->run_id].summary = *s;
    }
  } else if (const auto* t = std::get_if<TextSample>(&r)) {
    if (t->run_id >= 0 && static_cast<std::size_t>(t->run_id) < m_state.size()) {
      if (!m_samples) {
        const fs::path p = fs::path(m_dir) / "samples.jsonl";
        m_samples = std::fopen(p.c_str(), "wb");
        if (!m_samples) throw std::runtime_error(p.string() + ": cannot create file");
      }
      std::fputs(text_sample_line(*t, m_state[t->run_id].who.name).c_str(), m_samples);
      m_dirty = true;
      m_rows_written = true;
    }
  } else if (const auto* st = std::get_if<RunStatus>(&r)) {
    if (st->run_id >= 0 && static_cast<std::size_t>(st->run_id) < m_state.size()) {
      RunState& s = m_state[st->run_id];
      s.status = run_state_name(st->state);
      if (!st->message.empty()) s.message = st->message;
      if (st->total_steps > 0) s.total_steps = st->total_steps;
      flush();
      write_status();
    }
  }
}

void Journal::command(int run_id, std::int64_t after_step, const LiveChange& c) {
  if (!m_commands) return;
  m_rows_written = true;
  std::fputs((live_change_json(run_id, after_step, c) + "\n").c_str(), m_commands);
  std::fflush(m_commands);
}

void Journal::tick() {
  const std::int64_t t = now_ms();
  if (t - m_last_flush_ms < 1000) return;
  m_last_flush_ms = t;
  if (!m_dirty) return;
  flush();
  write_status();  // the steps count moves on
}

void Journal::final_weights(int run_id, Model& model, std::int64_t steps) {
  if (run_id < 0 || static_cast<std::size_t>(run_id) >= m_state.size()) return;
  write_weights(m_dir, weights_file_name(run_id), capture_weights(model, steps));
}

void Journal::initial_state(int run_id, Run& run) {
  if (run_id < 0 || static_cast<std::size_t>(run_id) >= m_state.size()) return;
  const RunConfig& c = run.config();
  write_initial_state(m_dir, run_id, capture_weights(run.model(), 0), run.train_samples(),
                      static_cast<std::size_t>(c.batch), c.seed, run.total_steps(),
                      is_text_spec(c.dataset) ? "A text set's sample i is the window of tokens starting at token i "
                                                "(its labels: the tokens one further on)."
                                              : "");
}

void Journal::finish() {
  flush();
  // Runs that all failed before their first record (a data set that did
  // not load): the folder keeps what was asked (config.json, runs.json)
  // and status.json saying why, and no result files that only look like
  // results.
  bool started = m_rows_written;
  for (const RunState& s : m_state) started = started || s.status != "failed" || s.steps > 0 || s.has_summary;
  if (!started && !m_state.empty()) {
    for (std::FILE*& f : m_files)
      if (f) std::fclose(f), f = nullptr;
    std::fclose(m_commands);
    m_commands = nullptr;
    std::error_code ec;
    for (const CsvFile f : kAppended) fs::remove(fs::path(m_dir) / csv_file_name(f), ec);
    fs::remove(fs::path(m_dir) / csv_file_name(CsvFile::Summary), ec);
    fs::remove(fs::path(m_dir) / "commands.jsonl", ec);
    write_status();
    return;
  }
  std::string summary = csv_header(CsvFile::Summary);
  for (const RunState& s : m_state)
    if (s.has_summary) summary += csv_row(s.who, s.summary);
  write_file_atomically(m_dir, "summary.csv", summary);
  write_status();
}

// ------------------------------------------------------------------ reading

namespace {

[[noreturn]] void bad(const std::string& origin, const std::string& what) { throw std::runtime_error(origin + ": " + what); }

// The CSV text up to its last complete line (a kill mid-write leaves a
// torn last line without its line break).
std::string complete_lines(const std::string& text) {
  const auto end = text.rfind('\n');
  return end == std::string::npos ? std::string() : text.substr(0, end + 1);
}

CsvTable table(const fs::path& p) {
  const CsvTable t = parse_csv(complete_lines(read_text(p)), p.string());
  if (t.header.empty()) bad(p.string(), "no header");
  for (std::size_t r = 0; r < t.rows.size(); ++r)
    if (t.rows[r].size() != t.header.size())
      bad(p.string() + ":" + std::to_string(r + 2),
          "expected " + std::to_string(t.header.size()) + " fields, got " + std::to_string(t.rows[r].size()));
  return t;
}

// The run a row belongs to: its run_id, checked.
int run_of(const CsvRow& c, std::size_t runs) {
  const std::int64_t id = c.i("run_id");
  if (id < 0 || static_cast<std::size_t>(id) >= runs)
    c.fail("run_id " + std::to_string(id) + " is not a run of this folder");
  return static_cast<int>(id);
}

JournalContents read_status(const fs::path& dir) {
  JournalContents j;
  j.dir = dir.string();
  const fs::path status_path = dir / "status.json";
  const fs::path runs_path = dir / "runs.json";
  json status, runs;
  try {
    status = json::parse(read_text(status_path));
  } catch (const json::exception&) {
    bad(status_path.string(), "not valid JSON");
  }
  try {
    runs = json::parse(read_text(runs_path));
  } catch (const json::exception&) {
    bad(runs_path.string(), "not valid JSON");
  }
  if (!runs.is_object() || !runs.contains("runs") || !runs["runs"].is_array())
    bad(runs_path.string(), "'runs' must be an array");
  if (!status.is_object() || !status.contains("status") || !status["status"].is_string())
    bad(status_path.string(), "'status' is missing");
  j.status = status["status"].get<std::string>();
  const std::size_t n = runs["runs"].size();
  if (n > 4096) bad(runs_path.string(), "too many runs");
  for (std::size_t i = 0; i < n; ++i) {
    const json& r = runs["runs"][i];
    const std::string where = runs_path.string() + ": runs[" + std::to_string(i) + "]";
    if (!r.is_object() || !r.contains("name") || !r["name"].is_string() || !r.contains("config") ||
        !r["config"].is_object())
      bad(where, "needs a name and a config");
    JournalEntry e;
    e.run_id = static_cast<int>(i);
    e.name = r["name"].get<std::string>();
    e.config = parse_run_config(r["config"].dump(), where + ".config");
    j.runs.push_back(std::move(e));
  }
  if (status.contains("runs") && status["runs"].is_array()) {
    for (std::size_t i = 0; i < status["runs"].size() && i < n; ++i) {
      const json& r = status["runs"][i];
      if (!r.is_object()) continue;
      JournalEntry& e = j.runs[i];
      if (r.contains("status") && r["status"].is_string()) e.status = r["status"].get<std::string>();
      if (r.contains("message") && r["message"].is_string()) e.message = r["message"].get<std::string>();
      if (r.contains("steps") && r["steps"].is_number_integer()) e.steps = r["steps"].get<std::int64_t>();
      if (r.contains("total_steps") && r["total_steps"].is_number_integer())
        e.total_steps = r["total_steps"].get<std::int64_t>();
    }
  }
  const bool says_live = j.status == "running";
  if (says_live && !lock_held(dir)) {
    j.interrupted = true;
    j.status = "interrupted";
    for (JournalEntry& e : j.runs)
      if (e.status == "pending" || e.status == "running" || e.status == "paused") e.status = "interrupted";
  }
  return j;
}

}  // namespace

JournalContents read_journal_status(const std::string& dir) { return read_status(fs::path(dir)); }

JournalContents read_journal(const std::string& dir_s) {
  const fs::path dir(dir_s);
  JournalContents j = read_status(dir);
  const std::size_t n = j.runs.size();
  j.exports.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    j.exports[i].run_id = static_cast<int>(i);
    j.exports[i].name = j.runs[i].name;
    j.exports[i].recipe = j.runs[i].config.recipe;
    j.exports[i].config = j.runs[i].config;
  }
  // Each file's rows into their runs' histories, by the column table that wrote them.
  const auto read_rows = [&](const char* file, auto kind) {
    using T = decltype(kind);
    const fs::path p = dir / file;
    // A folder whose runs failed before they started has no result files.
    if (j.status == "failed" && !fs::exists(p)) return;
    const CsvTable t = table(p);
    for (CsvRow c{t, p.string()}; c.row < t.rows.size(); ++c.row) {
      T record;
      record.run_id = run_of(c, n);
      csv_read(c, record);
      j.exports[static_cast<std::size_t>(record.run_id)].history.add(record);
    }
  };
  read_rows("steps.csv", StepMetrics{});
  read_rows("evals.csv", EvalMetrics{});
  read_rows("events.csv", Event{});
  read_rows("grads.csv", GradStats{});
  std::vector<bool> summarized(n, false);
  if (fs::exists(dir / "summary.csv")) {
    const fs::path p = dir / "summary.csv";
    const CsvTable t = table(p);
    for (CsvRow c{t, p.string()}; c.row < t.rows.size(); ++c.row) {
      const int id = run_of(c, n);
      RunSummary& s = j.exports[static_cast<std::size_t>(id)].summary;
      s.run_id = id;
      csv_read(c, s);
      summarized[static_cast<std::size_t>(id)] = true;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    // The rows on disk may be ahead of status.json by what was flushed
    // after it was written last.
    if (!j.exports[i].history.steps.empty())
      j.runs[i].steps = std::max(j.runs[i].steps, j.exports[i].history.steps.back().step);
    if (summarized[i]) continue;
    // No summary row (interrupted, or failed): the figures of the history.
    RunExport& x = j.exports[i];
    const RunHistory& h = x.history;
    x.summary = h.summarize(h.steps.empty() ? 1.0 : h.steps.back().loss_scale);
    x.summary.run_id = static_cast<int>(i);
    x.summary.recipe = x.config.recipe;
    x.summary.model = x.config.model;
    x.summary.dataset = x.config.dataset;
    x.summary.backend = "cpu";
  }
  if (fs::exists(dir / "samples.jsonl")) {
    // Each line one TextSample; a torn last line is dropped like a CSV's.
    const fs::path p = dir / "samples.jsonl";
    std::stringstream ss(complete_lines(read_text(p)));
    std::string line;
    for (int no = 1; std::getline(ss, line); ++no) {
      if (line.empty()) continue;
      const std::string where = p.string() + ":" + std::to_string(no);
      json v;
      try {
        v = json::parse(line);
      } catch (const json::exception&) {
        bad(where, "not valid JSON");
      }
      if (!v.is_object()) bad(where, "not a JSON object");
      TextSample t;
      if (!v.contains("run_id") || !v["run_id"].is_number_integer()) bad(where, "'run_id' must be an integer");
      const std::int64_t id = v["run_id"].get<std::int64_t>();
      if (id < 0 || static_cast<std::size_t>(id) >= n)
        bad(where, "run_id " + std::to_string(id) + " is not a run of this folder");
      if (!v.contains("step") || !v["step"].is_number_integer() || v["step"].get<std::int64_t>() < 0)
        bad(where, "'step' must be an integer >= 0");
      for (const char* k : {"prompt", "text"})
        if (!v.contains(k) || !v[k].is_string()) bad(where, std::string("'") + k + "' must be a string");
      t.run_id = static_cast<int>(id);
      t.step = v["step"].get<std::int64_t>();
      t.prompt = v["prompt"].get<std::string>();
      t.text = v["text"].get<std::string>();
      j.exports[static_cast<std::size_t>(id)].history.add(t);
    }
  }
  if (fs::exists(dir / "commands.jsonl")) {
    const fs::path p = dir / "commands.jsonl";
    std::stringstream ss(complete_lines(read_text(p)));
    std::string line;
    for (int no = 1; std::getline(ss, line); ++no) {
      if (line.empty()) continue;
      StampedChange c = parse_live_change(line, p.string() + ":" + std::to_string(no));
      if (static_cast<std::size_t>(c.run_id) >= n)
        bad(p.string() + ":" + std::to_string(no), "run " + std::to_string(c.run_id) + " is not a run of this folder");
      j.commands.push_back(std::move(c));
    }
  }
  return j;
}

void attach_journal(Trainer& trainer, const std::string& dir, const std::vector<std::string>& names) {
  std::vector<JournalRun> runs;
  for (int i = 0; i < trainer.run_count(); ++i) {
    const std::size_t k = static_cast<std::size_t>(i);
    runs.push_back({k < names.size() ? names[k] : trainer.config(i).recipe, trainer.config(i)});
  }
  trainer.set_sink(std::make_unique<Journal>(dir, std::move(runs)));
}

}  // namespace engine
