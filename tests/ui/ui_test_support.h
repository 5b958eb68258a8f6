// Shared by the UI tests: one QApplication (offscreen without a display),
// waiting on the event loop, and runs fed to a RunStore without training.
#pragma once

#include <QApplication>
#include <QColor>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QThread>

#include <functional>
#include <vector>

#include "session/run_store.h"
#include "records/metrics.h"
#include "train/run_config.h"

namespace ui_test {

// Runs started by a test journal into $XDG_DATA_HOME/precision-lab/runs:
// a temporary folder for the whole test program, never the real home.
// Call before anything asks QStandardPaths. Returns the folder.
inline QString useTemporaryDataHome() {
  static QTemporaryDir home;  // removed when the program ends
  static const bool set = qputenv("XDG_DATA_HOME", home.path().toLocal8Bit());
  (void)set;
  return home.path();
}

inline void ensureApplication() {
  useTemporaryDataHome();
  if (QApplication::instance()) return;
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  static int argc = 1;
  static char arg0[] = "ui_test";
  static char* argv[] = {arg0, nullptr};
  new QApplication(argc, argv);
}

inline bool waitFor(const std::function<bool()>& done, int ms = 20000) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
    QThread::msleep(2);
  }
  return true;
}

inline void settle() {
  for (int i = 0; i < 5; ++i) QCoreApplication::processEvents();
}

// settle() and then the rest of a presentation toggle: its parts run on
// timers (MainWindow::setPresentation), which processEvents() alone may not reach.
template <class Window>
inline void settle(const Window& w) {
  settle();
  waitFor([&] { return !w.presentationSettling(); }, 5000);
  settle();
}

inline engine::RunConfig config(const std::string& recipe) {
  engine::RunConfig c;
  c.recipe = recipe;
  c.dataset = "spirals";
  c.model = "mlp";
  c.steps = 100;
  return c;
}

// A step record of store run `id` (the trainer id is the store id here).
inline engine::StepMetrics step(int id, std::int64_t s, double loss, double scale = 1.0) {
  engine::StepMetrics m;
  m.run_id = id;
  m.step = s;
  m.loss = loss;
  m.loss_scale = scale;
  m.wall_ms = 1.0;
  m.mem.weights = 1 << 20;
  m.mem.grads = 1 << 20;
  return m;
}

// Appends `records` with trainer id == store id.
inline void feed(RunStore& store, std::vector<engine::Record> records) {
  QVector<int> ids;
  for (int i = 0; i < store.count(); ++i) ids << i;
  store.append(records, ids);
}

}  // namespace ui_test
