// TrainingController: Trainer lifetime, controls, and the drain every kDrainIntervalMs (~30 Hz).
#include "session/training_controller.h"

#include <stdexcept>

#include "amp/loss_scaler.h"
#include "session/run_folders.h"
#include "session/run_store.h"
#include "journal/journal.h"
#include "train/trainer.h"

TrainingController::TrainingController(RunStore* store, QObject* parent)
    : QObject(parent), m_store(store), m_journalRoot(run_folders::root()) {
  m_timer.setInterval(kDrainIntervalMs);
  m_timer.setTimerType(Qt::PreciseTimer);
  connect(&m_timer, &QTimer::timeout, this, &TrainingController::onTick);
}

TrainingController::~TrainingController() {
  // The store may already be gone during teardown: join without draining.
  if (m_trainer) {
    m_trainer->stop();
    m_trainer->wait();
  }
}

QVector<int> TrainingController::start(const std::vector<RunRequest>& runs, int compareGroup, bool paused,
                                       const QString& folderName) {
  if (runs.empty()) throw std::runtime_error("nothing to start: no run");
  // Everything that can be refused is refused before anything changes: a
  // fresh trainer validates every config (add_run throws naming the field).
  auto trainer = std::make_unique<engine::Trainer>();
  for (const RunRequest& r : runs) {
    trainer->add_run(r.config);
    if (m_provided && r.config.dataset == m_providedName)
      trainer->provide_data(r.config.dataset, r.config.seed, m_provided,
                            static_cast<std::size_t>(r.config.context));
  }
  m_provided.reset();
  // The journal: its folder is created (and locked) here, once; the engine
  // thread writes it as the runs go. A folder that cannot be written
  // refuses the start, before anything changes.
  QString folder;
  if (!m_journalRoot.isEmpty()) {
    QString label = folderName;
    if (label.isEmpty()) label = runs.size() == 1 ? runs.front().name : QStringLiteral("compare");
    folder = run_folders::newFolder(m_journalRoot, label);
    std::vector<std::string> names;
    for (const RunRequest& r : runs) names.push_back(r.name.toStdString());
    engine::attach_journal(*trainer, folder.toStdString(), names);
  }

  if (m_trainer) shutdown();
  m_storeIds.clear();
  for (const RunRequest& r : runs)
    m_storeIds << m_store->addRun(r.name, QString::fromStdString(r.config.recipe), r.colour, r.config,
                                  compareGroup);
  m_folder = folder;
  if (!folder.isEmpty())
    for (int i = 0; i < m_storeIds.size(); ++i) m_store->setFolder(m_storeIds[i], folder, i);
  m_trainer = std::move(trainer);
  // The engine's threads below the UI's priority: the window (and the
  // display server) get a core the moment they need one.
  m_trainer->set_background(kEngineNiceness);
  if (paused) m_trainer->pause();
  m_trainer->set_step_rate(m_stepRate);
  m_sinceStart.start();
  m_trainer->start();
  m_finishedSignalled = false;
  m_timer.start();
  emit started();
  if (!folder.isEmpty()) emit folderStarted(folder);
  if (paused) emit pausedChanged(true);
  return m_storeIds;
}

void TrainingController::provideData(const std::string& dataset, std::shared_ptr<const engine::DatasetPair> data) {
  m_providedName = dataset;
  m_provided = std::move(data);
}

void TrainingController::pause() {
  if (!active()) return;
  m_trainer->pause();
  emit pausedChanged(true);
}

void TrainingController::resume() {
  if (!active()) return;
  m_trainer->resume();
  emit pausedChanged(false);
}

void TrainingController::stepOnce() {
  if (!active()) return;
  const bool wasPaused = m_trainer->paused();
  m_trainer->inspect_next_step();
  m_trainer->step_once();  // pauses after the step
  if (!wasPaused) emit pausedChanged(true);
}

void TrainingController::setStepRate(double stepsPerSecond) {
  m_stepRate = stepsPerSecond > 0 ? stepsPerSecond : 0.0;
  if (m_trainer) m_trainer->set_step_rate(m_stepRate);
}

void TrainingController::stop() {
  if (!m_trainer) return;
  m_trainer->stop();
}

void TrainingController::shutdown() {
  if (!m_trainer) return;
  m_trainer->stop();
  m_trainer->wait();  // within one step: stop is checked at every step boundary
  drainNow();
  m_timer.stop();
  if (!m_finishedSignalled) {
    m_finishedSignalled = true;
    emit finished();
  }
}

bool TrainingController::active() const { return m_trainer && !m_finishedSignalled; }

bool TrainingController::paused() const { return active() && m_trainer->paused(); }

bool TrainingController::setLayerPrecision(int storeId, const std::string& layer, const engine::LayerPrecision& p) {
  if (!active()) return false;
  const int trainerId = static_cast<int>(m_storeIds.indexOf(storeId));
  if (trainerId < 0 || !m_store->run(storeId).live()) return false;
  m_trainer->set_layer_precision(trainerId, layer, p);
  return true;
}

bool TrainingController::setLossScaler(int storeId, const engine::LossScalerConfig& scaler) {
  if (!active()) return false;
  const int trainerId = static_cast<int>(m_storeIds.indexOf(storeId));
  if (trainerId < 0 || !m_store->run(storeId).live()) return false;
  engine::validate(scaler);  // throws (one line naming the field) before anything is queued
  m_trainer->set_loss_scaler(trainerId, scaler);
  return true;
}

bool TrainingController::injectFault(int storeId, engine::FaultTarget target, const std::string& layer, bool inf) {
  if (!active()) return false;
  const int trainerId = static_cast<int>(m_storeIds.indexOf(storeId));
  if (trainerId < 0 || !m_store->run(storeId).live()) return false;
  m_trainer->inject_fault(trainerId, target, layer, inf);
  return true;
}

void TrainingController::drainNow() {
  if (!m_trainer) return;
  m_trainer->drain(m_buffer);
  if (m_buffer.empty()) return;
  m_store->append(m_buffer, m_storeIds);
  emit framed();
}

std::uint64_t TrainingController::droppedRecords() const { return m_trainer ? m_trainer->dropped() : 0; }

void TrainingController::onTick() {
  if (!m_trainer) {
    m_timer.stop();
    return;
  }
  // Read "ended" before draining: the engine pushes its last records and
  // only then clears active(), so a drain after an ended read gets them all.
  const bool ended = !m_trainer->active();
  drainNow();
  if (ended) {
    m_trainer->wait();
    drainNow();
    m_timer.stop();
    if (!m_finishedSignalled) {
      m_finishedSignalled = true;
      emit finished();
    }
  }
}
