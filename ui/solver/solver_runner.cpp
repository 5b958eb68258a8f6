// SolverRunner: the solve job on a thread of its own (see solver_runner.h).
#include "solver/solver_runner.h"

#include <QElapsedTimer>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <exception>

#include "backend/backend.h"
#include "backend/registry.h"
#include "lecture/solve_lesson.h"
#include "solve/matrix.h"

namespace {

// The engine thread's nice value above the UI thread's (as training's,
// TrainingController::kEngineNiceness): on two cores an n = 2048 LU must
// not take the cores the window paints with. Linux nice is per thread; the
// OpenMP threads this thread starts inherit it.
constexpr int kSolverNiceness = 10;

void lowerThisThreadsPriority() {
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (errno == 0) setpriority(PRIO_PROCESS, tid, std::min(19, now + kSolverNiceness));
}

}  // namespace

struct SolverRunner::Cache {
  bool valid = false;
  std::int64_t n = 0;
  double cond = 0;
  std::uint64_t seed = 0;
  double scale = 1.0;
  engine::Matrix a;
  std::vector<double> b, x;
  // The CPU backend, made (and warmed) by the first job, kept for the next.
  engine::BackendChoice backend;
  // The solves' buffers, kept from one run and job to the next.
  engine::SolveWorkspace workspace;
};

std::vector<engine::RefineConfig> runConfigs(const SolverJob& job) {
  std::vector<engine::RefineConfig> out;
  if (!job.runs.empty()) {
    for (const engine::SolveRun& r : job.runs) out.push_back(r.config);
    return out;
  }
  for (const engine::SolveFormat& f : job.formats)
    for (engine::Method m : job.methods) {
      engine::RefineConfig c;
      c.method = m;
      c.lu.factor = f;
      c.lu.accumulate = engine::Format::FP32;
      if (job.tensorCore && !f.fp64) c.lu.storage = engine::LuConfig::Storage::FP32;
      c.residual = job.residual;
      c.working = engine::Arith::FP64;
      c.max_iter = job.maxIter;
      c.gmres = job.gmres;
      out.push_back(c);
    }
  return out;
}

QString runName(const SolverJob& job, int index) {
  if (!job.runs.empty()) return QString::fromStdString(job.runs.at(static_cast<std::size_t>(index)).name);
  return runName(runConfigs(job).at(static_cast<std::size_t>(index)));
}

QString runName(const engine::RefineConfig& c) {
  const bool tc = !c.lu.factor.fp64 && c.lu.storage == engine::LuConfig::Storage::FP32;
  const bool fp32_gmres = c.method == engine::Method::GmresIr && c.gmres == engine::Arith::FP32;
  return QString::fromStdString(engine::factor_key(c.lu.factor)) + (tc ? QStringLiteral("-tc-") : QStringLiteral("-")) +
         QString::fromLatin1(engine::method_key(c.method)) + (fp32_gmres ? QStringLiteral("-fp32") : QString());
}

SolverRunner::SolverRunner(QObject* parent) : QObject(parent), m_cache(std::make_shared<Cache>()) {
  qRegisterMetaType<SolverOutcome>();
}

SolverRunner::~SolverRunner() {
  stop();
  wait();
}

void SolverRunner::stop() {
  if (m_stop) m_stop->store(true);
}

void SolverRunner::wait() {
  if (!m_thread) return;
  m_thread->wait();
  delete m_thread;
  m_thread = nullptr;
}

bool SolverRunner::start(const SolverJob& job) {
  if (m_thread) return false;
  auto stopFlag = std::make_shared<std::atomic<bool>>(false);
  m_stop = stopFlag;
  std::shared_ptr<Cache> cache = m_cache;
  // The lambdas posted back run on this object's (the GUI) thread; one
  // posted after this object is gone is dropped by Qt.
  m_thread = QThread::create([this, job, stopFlag, cache] {
    lowerThisThreadsPriority();
    bool stopped = false;
    QString error;
    try {
      if (!cache->valid || cache->n != job.n || cache->cond != job.cond || cache->seed != job.seed ||
          cache->scale != job.matrixScale) {
        QElapsedTimer t;
        t.start();
        cache->valid = false;
        engine::build_solve_system({job.n, job.cond, job.seed, job.matrixScale}, cache->a, cache->x, cache->b);
        cache->n = job.n, cache->cond = job.cond, cache->seed = job.seed, cache->scale = job.matrixScale;
        cache->valid = true;
        const double seconds = t.elapsed() / 1000.0;
        QMetaObject::invokeMethod(this, [this, seconds] { emit matrixReady(seconds); }, Qt::QueuedConnection);
      } else {
        QMetaObject::invokeMethod(this, [this] { emit matrixReady(0.0); }, Qt::QueuedConnection);
      }
      if (!cache->backend.backend) {
        cache->backend = engine::make_backend("cpu");
        // A first factorization pays for the backend's start (its threads,
        // its kernels' first use: in the app's first solve, n = 256, the
        // FP32 LU-IR row read 1.47 s, and 0.001 s after this warm-up); done
        // here, untimed, so the first row's time is the solve's own.
        engine::LuConfig warm;
        warm.factor = engine::SolveFormat::of(engine::Format::FP32);
        engine::lu_factor(engine::random_matrix(256, 10.0, 0), warm, cache->backend.backend.get());
      }
      engine::Backend* be = cache->backend.backend.get();
      const std::vector<engine::RefineConfig> configs = runConfigs(job);
      for (std::size_t i = 0; i < configs.size(); ++i) {
        if (stopFlag->load()) {
          stopped = true;
          break;
        }
        SolverOutcome o;
        o.index = static_cast<int>(i);
        o.config = configs[i];
        o.result = engine::solve_refine(cache->a, cache->b, &cache->x, configs[i], be, &cache->workspace);
        o.result.x.clear();  // the view shows errors, not the solution: n doubles less to copy
        QMetaObject::invokeMethod(this, [this, o = std::move(o)] { emit outcome(o); }, Qt::QueuedConnection);
      }
    } catch (const std::exception& e) {
      error = QString::fromUtf8(e.what()).split(QLatin1Char('\n')).value(0);
    }
    QMetaObject::invokeMethod(
        this,
        [this, stopped, error] {
          wait();  // the thread is returning: joined at once
          emit finished(stopped, error);
        },
        Qt::QueuedConnection);
  });
  m_thread->setObjectName(QStringLiteral("solver"));
  m_thread->start();
  return true;
}
