// precision-lab: the desktop app's entry point.
//   precision-lab [--config FILE] [--recipe R] [--model M] [--dataset D] [--start]
//                 [--compare r1,r2,...] [--steps N] [--epochs N] [--screenshot FILE]
//                 [--screenshot-after-ms N]
//                 [--view live|compare|compare-difference|samples|gradients|export|compare-dialog|solver]
//                 [--measure] [--lecture NAME|FILE] [--presentation] [--speed N] [--value X]
// --view solver shows the Solver tab; with --start it solves (instead of
// training) and --screenshot waits for the solve to end.
// --view history shows the past runs (the newest interrupted one opened on the charts).
// --lecture chooses a lesson (a built-in preset or a preset file; --start
// runs all its runs); --presentation starts in presentation view; --speed
// caps each run's steps per second; --view format-explorer (with --value X)
// --view block-view (the explorer's Blocks tab) and --view step-inspector
// shoot those windows.
// --help and --version are answered before any display is needed. Bad
// options: one line on stderr and exit code 2. A missing or bad --config
// file opens the window with an error dialog (and the line on stderr); with
// --screenshot (unattended) it exits 2 instead.
// --screenshot renders the window (or the chosen view) into FILE and exits:
// 0 when written, 1 otherwise. With --start it waits until the runs have
// drawn points. Without a display (and no QT_QPA_PLATFORM) it renders
// offscreen, so CI needs no X server.
// --measure prints the event-loop latency of the UI thread (a 5 ms timer's
// lateness, max and p99) and the training throughput when training ends.
// Both live in gui_harness.cpp.
#include <QApplication>
#include <QTimer>

#include <csignal>
#include <cstdio>

#include "compare/compare_view.h"
#include "gui_harness.h"
#include "lecture/lesson_controller.h"
#include "lecture/speed_control.h"
#include "main_window.h"
#include "panels/history_controller.h"
#include "panels/history_panel.h"
#include "panels/precision_table_controller.h"
#include "session/command_line.h"
#include "session/run_launcher.h"
#include "session/user_messages.h"
#include "solver/solver_view.h"

namespace {

// SIGTERM/SIGINT (a logout, Ctrl+C in the terminal): the window closes as if
// the user closed it, so a run in progress is stopped and its folder says
// "stopped", not "interrupted". The handler only sets the flag; a timer on
// the GUI thread reads it.
volatile std::sig_atomic_t g_terminate = 0;
extern "C" void onTerminate(int) { g_terminate = 1; }

}  // namespace

int main(int argc, char** argv) {
  // No OMP_WAIT_POLICY is set here: libgomp reads it when the library is
  // loaded, before main() (measured: setenv() in main() leaves the policy
  // unchanged). A comparison steps each run on one core of its own (no
  // OpenMP barrier between runs), and the engine's threads run below the
  // UI thread's priority (TrainingController::kEngineNiceness).
  if (wantsHelpOnly(argc, argv)) {
    // No QApplication: it would need a platform (a display) to print text.
    QCoreApplication core(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("Precision Lab"));
    QCoreApplication::setApplicationVersion(QStringLiteral("0.1.0"));
    LaunchOptions options;
    QString text;
    bool exitNow = false;
    if (!parseLaunchOptions(QCoreApplication::arguments(), options, &text, &exitNow)) {
      std::fprintf(stderr, "precision-lab: %s\n", qPrintable(text));
      return 2;
    }
    std::printf("%s\n", qPrintable(text));
    return 0;
  }
  if (wantsOffscreenHarness(argc, argv)) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("Precision Lab"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
  QApplication::setDesktopFileName(QStringLiteral("precision-lab"));

  LaunchOptions options;
  QString message;
  bool exitNow = false;
  if (!parseLaunchOptions(QApplication::arguments(), options, &message, &exitNow)) {
    std::fprintf(stderr, "precision-lab: %s\n", qPrintable(message));
    return 2;
  }
  if (exitNow) {
    std::printf("%s\n", qPrintable(message));
    return 0;
  }

  // Unattended modes report errors on stderr instead of a modal box.
  const bool unattended = !options.screenshot.isEmpty() || options.measure;
  if (!options.configError.isEmpty()) {
    std::fprintf(stderr, "precision-lab: %s\n", qPrintable(options.configError));
    if (unattended) return 2;
  }

  MainWindow window;
  UserMessages* messages = window.part<UserMessages>();
  RunLauncher* launcher = window.part<RunLauncher>();
  window.fitToScreen();
  messages->setQuiet(true);  // the dialog comes once the window shows
  bool settingsOk = true;
  if (options.configGiven) settingsOk = window.part<PrecisionTableController>()->applyLaunchOptions(options);
  messages->setQuiet(unattended);
  if (!settingsOk && unattended) {
    std::fprintf(stderr, "precision-lab: %s\n", qPrintable(messages->lastError()));
    return 2;
  }
  if (!options.lecture.isEmpty()) {
    messages->setQuiet(true);
    if (!window.part<LessonController>()->open(options.lecture)) {
      std::fprintf(stderr, "precision-lab: %s\n", qPrintable(messages->lastError()));
      if (unattended) return 2;
      const QString error = messages->lastError();
      QTimer::singleShot(0, &window, [messages, error] { messages->error(QObject::tr("Cannot open the lesson"), error); });
    }
    messages->setQuiet(unattended);
  }
  if (options.speed >= 0) window.part<SpeedControl>()->setRate(options.speed);
  if (!options.compare.isEmpty()) launcher->setCompareRecipes(options.compare);
  if (options.view == QLatin1String("compare") || options.view == QLatin1String("compare-difference")) {
    window.showCompare();
    if (options.view == QLatin1String("compare-difference"))
      window.part<CompareView>()->setMode(CompareView::Mode::Difference);
  }
  if (options.view == QLatin1String("samples")) window.showSamples();
  if (options.view == QLatin1String("solver")) window.showSolver();
  if (options.view == QLatin1String("history")) {
    // The past runs; the newest interrupted one on the charts, so the
    // picture shows what reopening keeps.
    HistoryController* history = window.part<HistoryController>();
    for (const PastRun& p : window.part<HistoryPanel>()->pastRuns())
      if (p.interrupted) {
        history->open(p.dir);
        break;
      }
    history->show();
  }
  window.show();
  if (options.presentation) window.setPresentation(true);
  if (!settingsOk) {
    // Started from a menu, stderr is nowhere: the window says it.
    const QString error = messages->lastError();
    QTimer::singleShot(0, &window, [messages, error] { messages->error(QObject::tr("Cannot use the settings"), error); });
  }

  std::signal(SIGTERM, onTerminate);
  std::signal(SIGINT, onTerminate);
  QTimer terminateWatch;
  QObject::connect(&terminateWatch, &QTimer::timeout, &window, [&window] {
    if (!g_terminate) return;
    window.close();  // stops and joins the engine; the journal is finished
    QApplication::exit(0);
  });
  terminateWatch.start(100);

  GuiHarness harness(window, options);

  if (options.start) {
    // --measure starts 1.5 s after the window shows, as a user's click
    // would come: after the first paint (not training) and after the
    // background load of the selected data set (DatasetCache).
    QTimer::singleShot(options.measure ? 1500 : 0, &window, [&window, launcher, messages, &options, unattended] {
      if (options.view == QLatin1String("solver")) {
        window.part<SolverView>()->solve();
        return;
      }
      const bool ok = options.compare.isEmpty() ? launcher->startRun() : launcher->startComparison(options.compare);
      // A lesson this machine does not train (a GPU lesson on a CPU) shows
      // its skipped claims instead: not an error.
      if (!ok && !window.part<LessonController>()->notTrainedHere()) {
        std::fprintf(stderr, "precision-lab: %s\n", qPrintable(messages->lastError()));
        if (unattended) QApplication::exit(2);
      }
    });
  }

  return app.exec();
}
