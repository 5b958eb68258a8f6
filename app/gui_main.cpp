// precision-lab: the desktop app's entry point.
//   precision-lab [--config FILE] [--recipe R] [--model M] [--dataset D] [--start]
//                 [--compare r1,r2,...] [--steps N] [--epochs N] [--screenshot FILE]
//                 [--screenshot-after-ms N] [--view live|compare|gradients|export|compare-dialog]
//                 [--measure] [--lecture NAME|FILE] [--presentation] [--speed N] [--value X]
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
#include <QApplication>
#include <QDockWidget>
#include <QChartView>
#include <QElapsedTimer>
#include <QPixmap>
#include <QTabWidget>
#include <QTreeWidget>
#include <QTimer>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "charts/chart_area.h"
#include "charts/chart_export.h"
#include "session/command_line.h"
#include "compare/compare_dialog.h"
#include "compare/compare_view.h"
#include "export/export_dialog.h"
#include "lecture/format_explorer.h"
#include "lecture/speed_control.h"
#include "charts/gradient_panel.h"
#include "session/latency_probe.h"
#include "main_window.h"
#include "session/run_store.h"
#include "panels/history_panel.h"
#include "panels/setup_panel.h"
#include "session/training_controller.h"

namespace {

// SIGTERM/SIGINT (a logout, Ctrl+C in the terminal): the window closes as if
// the user closed it, so a run in progress is stopped and its folder says
// "stopped", not "interrupted". The handler only sets the flag; a timer on
// the GUI thread reads it.
volatile std::sig_atomic_t g_terminate = 0;
extern "C" void onTerminate(int) { g_terminate = 1; }

// Decided before QApplication exists, because it picks the platform.
bool wantsOffscreenScreenshot(int argc, char** argv) {
  if (std::getenv("QT_QPA_PLATFORM") || std::getenv("DISPLAY") || std::getenv("WAYLAND_DISPLAY")) return false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--screenshot") == 0 || std::strncmp(argv[i], "--screenshot=", 13) == 0 ||
        std::strcmp(argv[i], "--measure") == 0)
      return true;
  return false;
}

// Throughput and latency of the runs the window trained (the --measure line).
void printMeasurement(const MainWindow& window, const LatencyProbe& probe, double seconds) {
  const RunStore& store = *window.store();
  double samples = 0;
  std::int64_t steps = 0;
  QStringList perRun;
  for (int id : window.controller()->currentRuns()) {
    const RunData& r = store.run(id);
    samples += r.samples;
    steps += r.steps.empty() ? 0 : r.steps.back().step;
    perRun << QStringLiteral("%1 %2").arg(r.recipe).arg(r.currentSummary().samples_per_second, 0, 'f', 0);
  }
  const LatencyProbe::Stats s = probe.stats();
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("measure: runs %d, steps %lld, %.2f s, throughput %.0f samples/s (all runs, wall clock); "
              "engine samples/s per run: %s; threads %lld, OMP_WAIT_POLICY=%s, platform %s, opengl %s\n",
              static_cast<int>(window.controller()->currentRuns().size()), static_cast<long long>(steps), seconds,
              seconds > 0 ? samples / seconds : 0.0, qPrintable(perRun.join(QStringLiteral(", "))),
              static_cast<long long>(window.nextRunConfig().threads), policy ? policy : "(unset)",
              qPrintable(QGuiApplication::platformName()),
              qPrintable(QStringLiteral("%1 (%2)")
                             .arg(ChartArea::openGlWanted() ? QStringLiteral("on") : QStringLiteral("off"),
                                  QGuiApplication::platformName() == QLatin1String("offscreen")
                                      ? QStringLiteral("offscreen")
                                      : ChartArea::openGlRenderer())));
  std::printf("measure: first point on a chart %lld ms after Start\n", static_cast<long long>(window.firstPointMs()));
  std::printf("measure: UI event loop (5 ms timer) %s\n", qPrintable(LatencyProbe::describe(s)));
  std::fflush(stdout);
}

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
  if (wantsOffscreenScreenshot(argc, argv)) qputenv("QT_QPA_PLATFORM", "offscreen");
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
  window.fitToScreen();
  window.setQuietErrors(true);  // the dialog comes once the window shows
  bool settingsOk = true;
  if (options.configGiven) settingsOk = window.applyLaunchOptions(options);
  window.setQuietErrors(unattended);
  if (!settingsOk && unattended) {
    std::fprintf(stderr, "precision-lab: %s\n", qPrintable(window.lastError()));
    return 2;
  }
  if (!options.lecture.isEmpty()) {
    window.setQuietErrors(true);
    if (!window.openLecture(options.lecture)) {
      std::fprintf(stderr, "precision-lab: %s\n", qPrintable(window.lastError()));
      if (unattended) return 2;
      const QString error = window.lastError();
      QTimer::singleShot(0, &window, [&window, error] { window.reportError(QObject::tr("Cannot open the lesson"), error); });
    }
    window.setQuietErrors(unattended);
  }
  if (options.speed >= 0) window.speedControl()->setRate(options.speed);
  if (!options.compare.isEmpty()) window.setCompareRecipes(options.compare);
  if (options.view == QLatin1String("compare")) window.tabs()->setCurrentWidget(window.compareView());
  if (options.view == QLatin1String("history")) {
    // The past runs; the newest interrupted one on the charts, so the
    // picture shows what reopening keeps.
    for (const PastRun& p : window.historyPanel()->pastRuns())
      if (p.interrupted) {
        window.openPastRun(p.dir);
        break;
      }
    window.showHistory();
  }
  window.show();
  if (options.presentation) window.setPresentation(true);
  if (!settingsOk) {
    // Started from a menu, stderr is nowhere: the window says it.
    const QString error = window.lastError();
    QTimer::singleShot(0, &window, [&window, error] { window.reportError(QObject::tr("Cannot use the settings"), error); });
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

  LatencyProbe probe;
  QElapsedTimer trainingClock;
  if (options.measure) {
    QObject::connect(window.controller(), &TrainingController::started, &probe, [&probe, &trainingClock] {
      probe.start();
      trainingClock.start();
    });
    QObject::connect(&window, &MainWindow::trainingFinished, &probe, [&] {
      probe.stop();
      printMeasurement(window, probe, trainingClock.elapsed() / 1000.0);
      if (options.screenshot.isEmpty()) QApplication::exit(0);
    });
  }

  if (options.start) {
    // --measure starts 1.5 s after the window shows, as a user's click
    // would come: after the first paint (not training) and after the
    // background load of the selected data set (DatasetCache).
    QTimer::singleShot(options.measure ? 1500 : 0, &window, [&window, &options, unattended] {
      const bool ok = options.compare.isEmpty() ? window.startRun() : window.startComparison(options.compare);
      if (!ok) {
        std::fprintf(stderr, "precision-lab: %s\n", qPrintable(window.lastError()));
        if (unattended) QApplication::exit(2);
      }
    });
  }

  if (!options.screenshot.isEmpty()) {
    const QString file = options.screenshot;
    auto grabAndQuit = [file](QWidget* target) {
      const bool ok = grabWithoutOpenGL(target).save(file);
      if (!ok) std::fprintf(stderr, "precision-lab: --screenshot: cannot write %s\n", qPrintable(file));
      QApplication::exit(ok ? 0 : 1);
    };
    auto shoot = [&window, &options, grabAndQuit] {
      // Dialogs are made at shooting time, so they list the runs as they are.
      QDialog* dialog = nullptr;
      if (options.view == QLatin1String("export"))
        dialog = new ExportDialog(*window.store(), QStringLiteral("/tmp/precision-lab-export"), &window);
      else if (options.view == QLatin1String("compare-dialog"))
        dialog = new CompareDialog(CompareDialog::defaultRecipes(), window.setupPanel()->settings().seed, &window);
      else if (options.view == QLatin1String("format-explorer") || options.view == QLatin1String("block-view")) {
        FormatExplorer* explorer = window.formatExplorer();
        if (options.view == QLatin1String("block-view")) explorer->showBlocks();
        if (!options.value.isEmpty() && !explorer->setValueText(options.value))
          std::fprintf(stderr, "precision-lab: --value: '%s' is not a number\n", qPrintable(options.value));
        explorer->resize(explorer->sizeHint().expandedTo(QSize(1180, 600)).boundedTo(QSize(1280, 720)));
        dialog = explorer;
      }
      if (dialog) {
        dialog->show();
        QTimer::singleShot(300, dialog, [dialog, grabAndQuit] { grabAndQuit(dialog); });
        return;
      }
      QWidget* target = &window;
      if (options.view == QLatin1String("gradients")) target = window.chartArea()->gradientPanel();
      if (options.view == QLatin1String("step-inspector")) target = window.stepInspectorDock();
      grabAndQuit(target);
    };
    auto* once = new QTimer(&window);
    once->setSingleShot(true);
    QObject::connect(once, &QTimer::timeout, &window, shoot);
    if (options.screenshotAfterMs >= 0) {
      once->start(options.screenshotAfterMs);
    } else if (options.start) {
      // A running app: once points are on screen, and a little more so the
      // curves have a shape; or when training ends, whichever is first.
      QObject::connect(&window, &MainWindow::firstPointShown, once, [once] { once->start(1500); });
      QObject::connect(&window, &MainWindow::trainingFinished, once, [once] { once->start(200); });
    } else {
      // The docks, splitters and chart scenes settle over a few event-loop
      // passes after show().
      once->start(500);
    }
  }
  return app.exec();
}
