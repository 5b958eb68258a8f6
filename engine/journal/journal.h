// Journal: a run folder written as the runs go (docs/ARCHITECTURE.md "Runs on disk"),
// and read back — for the app's list of past runs, for reopening an
// interrupted run, and for replay.
//
// DIR/config.json    the starting config (the first run's, with `compare`)
// DIR/runs.json      every run's name and full starting config
// DIR/commands.jsonl every live change, stamped with the step after which it took effect
// DIR/{steps,evals,events,grads}.csv   appended as records arrive, flushed at least once a second
// DIR/summary.csv    one row per run that ended (written when the trainer ends)
// DIR/samples.jsonl  a text run's continuation at each evaluation (TextSample), one JSON object a line,
//                    UTF-8: {"run_id", "run", "step", "prompt", "text"}; only when a run wrote one
// DIR/weights-<run_id>.bin  a finished or stopped run's final weights (journal/weights.h), written
//                    whole (temporary file, fsync, rename) before its status says it ended
// DIR/initial-<run_id>/  the run's initial weights (.npy) and batch order (journal/initial_state.h), when
//                    its keep_initial says so, written whole before its first step
// DIR/status.json    {"status": running|finished|stopped|failed, "message": why (failed), "runs": [{name, status, steps, ...}]}
//                    (runs that all failed before their first step leave no CSV files nor commands.jsonl)
// DIR/.lock          held (flock) while a process writes the folder: a folder whose
//                    status says running but whose lock is free was interrupted
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "report/csv.h"
#include "train/commands.h"
#include "train/record_sink.h"
#include "train/trainer.h"
#include "records/metrics.h"
#include "train/run_config.h"

namespace engine {

struct JournalRun {
  std::string name;
  RunConfig config;
};

// Written by one thread (the trainer's); not thread-safe.
class Journal final : public RecordSink {
 public:
  // Creates `dir` (and parents), takes its lock, writes config.json,
  // runs.json, status.json (pending) and the CSV headers. Throws
  // std::runtime_error naming the folder when it cannot, or when another
  // process is writing it.
  Journal(const std::string& dir, std::vector<JournalRun> runs);
  ~Journal() override;  // flushes and releases the lock
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  const std::string& dir() const { return m_dir; }
  // Appends one record. Status records rewrite status.json at once (after
  // flushing the rows, so the status never runs ahead of the data).
  void record(const Record& r) override;
  // A live change as it took effect.
  void command(int run_id, std::int64_t after_step, const LiveChange& c) override;
  // Flushes the files when a second has passed since the last flush.
  void tick() override;
  // The trainer ended: summary.csv, the final status.json, everything flushed.
  void finish() override;
  // weights-<run_id>.bin (journal/weights.h).
  void final_weights(int run_id, Model& model, std::int64_t steps) override;
  // initial-<run_id>/ (journal/initial_state.h).
  void initial_state(int run_id, Run& run) override;

 private:
  struct RunState;
  void flush();
  void write_status();
  std::string m_dir;
  std::vector<JournalRun> m_runs;
  std::vector<RunState> m_state;
  std::FILE* m_files[4] = {nullptr, nullptr, nullptr, nullptr};  // steps, evals, events, grads
  std::FILE* m_commands = nullptr;
  std::FILE* m_samples = nullptr;  // samples.jsonl, opened at the first TextSample
  int m_lock = -1;
  std::int64_t m_last_flush_ms = 0;
  bool m_dirty = false;
  bool m_rows_written = false;  // any CSV row or command since the headers
};

// Before trainer.start(), after its runs are added: write the run folder
// `dir` as the runs go, the runs named `names` (one per run; a run without
// a name is called by its recipe). Throws std::runtime_error naming the
// folder when it cannot be written.
void attach_journal(Trainer& trainer, const std::string& dir, const std::vector<std::string>& names);

// What a run folder holds, read back.
struct JournalEntry {
  int run_id = 0;
  std::string name;
  RunConfig config;
  std::string status;   // pending, running, paused, finished, stopped, failed, interrupted
  std::string message;  // why it failed or diverged
  std::int64_t steps = 0;
  std::int64_t total_steps = 0;
};
struct JournalContents {
  std::string dir;
  std::string status;        // the folder's: running, finished, stopped, failed, interrupted
  bool interrupted = false;  // it says running but no process writes it
  std::vector<JournalEntry> runs;
  std::vector<RunExport> exports;          // every run's history (and summary, computed when none was written)
  std::vector<StampedChange> commands;     // in the order they took effect
};

// Reads a run folder. A torn last line (a kill mid-write) is dropped.
// Throws std::runtime_error naming the file (and line) on malformed input.
JournalContents read_journal(const std::string& dir);

// The folder's status only (status.json and the lock): cheap, for listing
// past runs. Throws like read_journal.
JournalContents read_journal_status(const std::string& dir);

}  // namespace engine
