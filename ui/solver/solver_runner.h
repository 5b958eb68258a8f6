// SolverRunner: the Solver view's thread boundary: one solve job (a random
// matrix, then one refinement per factor format and method) on a thread of
// its own, each result handed back by a queued signal.
#pragma once

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QThread>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "solve/refine.h"

// What one Solve press asks for: the matrix (random, as the CLI's
// `solve --n --cond --seed`: b = A x for x = random_vector(n, seed + 1), so
// forward errors are known) and the runs, one per format and method.
struct SolverJob {
  std::int64_t n = 256;
  double cond = 100.0;
  std::uint64_t seed = 0;
  std::vector<engine::SolveFormat> formats;
  std::vector<engine::Method> methods;
  bool tensorCore = false;  // the LU held in FP32, its update's operands rounded (LuConfig::Storage::FP32)
  engine::Arith residual = engine::Arith::FP64;
  int maxIter = 30;
  // GMRES-IR's inner solve: FP64, or FP32 (five-precision GMRES-IR, the
  // CLI's --gmres fp32).
  engine::Arith gmres = engine::Arith::FP64;
  // A solver lesson's job: every entry of A multiplied by this (its
  // SolveProblem's matrix_scale), and its runs, named and configured as the
  // preset has them, in place of formats x methods.
  double matrixScale = 1.0;
  std::vector<engine::SolveRun> runs;
};

// The refinement configs of a job: its runs' where it has them, else
// formats outer and methods inner (the order the runs are done and shown
// in) with the CLI's defaults otherwise (products accumulated in FP32, x
// and its update in FP64).
std::vector<engine::RefineConfig> runConfigs(const SolverJob& job);
// The name of the job's run `index`: the lesson's name for it, else
// runName of its config.
QString runName(const SolverJob& job, int index);
// The run's name as the CLI spells it: "fp16-lu-ir", "bf16-tc-gmres-ir",
// with "-fp32" after GMRES-IR's name where its inner solve is in FP32
// ("bf16-tc-gmres-ir-fp32", as bench_solve names it).
QString runName(const engine::RefineConfig& c);

// One finished run, by value across the thread boundary.
struct SolverOutcome {
  int index = 0;  // in runConfigs(job)
  engine::RefineConfig config;
  engine::SolveResult result;
};
Q_DECLARE_METATYPE(SolverOutcome)

// Owns the worker thread. start() returns at once; the thread makes the
// matrix (kept for the next job with the same n, cond and seed) and runs
// each config, emitting outcome() after each and finished() at the end.
// stop() asks it to end after the run in progress (a run itself is not
// interruptible: an n = 2048 factorization takes seconds). The thread runs
// below the UI thread's priority, so the window keeps its share of the
// cores. Signals arrive on the GUI thread (queued). GUI thread only.
class SolverRunner : public QObject {
  Q_OBJECT

 public:
  explicit SolverRunner(QObject* parent = nullptr);
  ~SolverRunner() override;  // stops and joins

  // False (and nothing started) while a job is running.
  bool start(const SolverJob& job);
  void stop();
  bool running() const { return m_thread != nullptr; }
  // Blocks until the thread has ended (tests, shutdown).
  void wait();

 signals:
  void matrixReady(double seconds);
  void outcome(const SolverOutcome& o);
  // The job ended: all runs done, stopped, or failed (`error` non-empty,
  // one line).
  void finished(bool stopped, const QString& error);

 private:
  struct Cache;
  QThread* m_thread = nullptr;
  std::shared_ptr<std::atomic<bool>> m_stop;
  std::shared_ptr<Cache> m_cache;  // the last matrix, shared with the thread
};
