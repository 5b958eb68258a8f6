// The desktop app's --screenshot and --measure modes, apart from the window
// they observe.
#include "gui_harness.h"

#include <QApplication>
#include <QDockWidget>
#include <QPixmap>
#include <QTimer>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "charts/chart_area.h"
#include "charts/chart_export.h"
#include "charts/gradient_panel.h"
#include "compare/compare_dialog.h"
#include "export/export_dialog.h"
#include "lecture/format_explorer.h"
#include "main_window.h"
#include "panels/precision_table_controller.h"
#include "panels/setup_panel.h"
#include "session/command_line.h"
#include "session/run_launcher.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "solver/solver_view.h"

bool wantsOffscreenHarness(int argc, char** argv) {
  if (std::getenv("QT_QPA_PLATFORM") || std::getenv("DISPLAY") || std::getenv("WAYLAND_DISPLAY")) return false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--screenshot") == 0 || std::strncmp(argv[i], "--screenshot=", 13) == 0 ||
        std::strcmp(argv[i], "--measure") == 0)
      return true;
  return false;
}

namespace {

// Throughput and latency of the runs the window trained (the --measure line).
void printMeasurement(const MainWindow& window, const LatencyProbe& probe, double seconds) {
  const RunStore& store = *window.part<RunStore>();
  const TrainingController& controller = *window.part<TrainingController>();
  double samples = 0;
  std::int64_t steps = 0;
  QStringList perRun;
  for (int id : controller.currentRuns()) {
    const RunData& r = store.run(id);
    samples += r.samples;
    steps += r.steps.empty() ? 0 : r.steps.back().step;
    perRun << QStringLiteral("%1 %2").arg(r.recipe).arg(r.currentSummary().samples_per_second, 0, 'f', 0);
  }
  const LatencyProbe::Stats s = probe.stats();
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("measure: runs %d, steps %lld, %.2f s, throughput %.0f samples/s (all runs, wall clock); "
              "engine samples/s per run: %s; threads %lld, OMP_WAIT_POLICY=%s, platform %s, opengl %s\n",
              static_cast<int>(controller.currentRuns().size()), static_cast<long long>(steps), seconds,
              seconds > 0 ? samples / seconds : 0.0, qPrintable(perRun.join(QStringLiteral(", "))),
              static_cast<long long>(window.part<PrecisionTableController>()->nextRunConfig().threads),
              policy ? policy : "(unset)", qPrintable(QGuiApplication::platformName()),
              qPrintable(QStringLiteral("%1 (%2)")
                             .arg(ChartArea::openGlWanted() ? QStringLiteral("on") : QStringLiteral("off"),
                                  QGuiApplication::platformName() == QLatin1String("offscreen")
                                      ? QStringLiteral("offscreen")
                                      : ChartArea::openGlRenderer())));
  std::printf("measure: first point on a chart %lld ms after Start\n",
              static_cast<long long>(window.part<RunLauncher>()->firstPointMs()));
  std::printf("measure: UI event loop (5 ms timer) %s\n", qPrintable(LatencyProbe::describe(s)));
  std::fflush(stdout);
}

}  // namespace

GuiHarness::GuiHarness(MainWindow& window, const LaunchOptions& options) : m_window(window), m_options(options) {
  if (options.measure) armMeasure();
  if (!options.screenshot.isEmpty()) armScreenshot();
}

void GuiHarness::armMeasure() {
  QObject::connect(m_window.part<TrainingController>(), &TrainingController::started, &m_probe, [this] {
    m_probe.start();
    m_trainingClock.start();
  });
  QObject::connect(&m_window, &MainWindow::trainingFinished, &m_probe, [this] {
    m_probe.stop();
    printMeasurement(m_window, m_probe, m_trainingClock.elapsed() / 1000.0);
    if (m_options.screenshot.isEmpty()) QApplication::exit(0);
  });
}

void GuiHarness::armScreenshot() {
  const QString file = m_options.screenshot;
  auto grabAndQuit = [file](QWidget* target) {
    const bool ok = grabWithoutOpenGL(target).save(file);
    if (!ok) std::fprintf(stderr, "precision-lab: --screenshot: cannot write %s\n", qPrintable(file));
    QApplication::exit(ok ? 0 : 1);
  };
  MainWindow* window = &m_window;
  const LaunchOptions* options = &m_options;
  auto shoot = [window, options, grabAndQuit] {
    // Dialogs are made at shooting time, so they list the runs as they are.
    QDialog* dialog = nullptr;
    const QString& view = options->view;
    if (view == QLatin1String("export")) {
      dialog = new ExportDialog(*window->part<RunStore>(), QStringLiteral("/tmp/precision-lab-export"), window);
    } else if (view == QLatin1String("compare-dialog")) {
      dialog = new CompareDialog(CompareDialog::defaultRecipes(), window->part<SetupPanel>()->settings().seed, window);
    } else if (view == QLatin1String("format-explorer") || view == QLatin1String("block-view")) {
      FormatExplorer* explorer = window->formatExplorer();
      if (view == QLatin1String("block-view")) explorer->showBlocks();
      if (!options->value.isEmpty() && !explorer->setValueText(options->value))
        std::fprintf(stderr, "precision-lab: --value: '%s' is not a number\n", qPrintable(options->value));
      explorer->resize(explorer->sizeHint().expandedTo(QSize(1180, 600)).boundedTo(QSize(1280, 720)));
      dialog = explorer;
    }
    if (dialog) {
      dialog->show();
      QTimer::singleShot(300, dialog, [dialog, grabAndQuit] { grabAndQuit(dialog); });
      return;
    }
    QWidget* target = window;
    if (view == QLatin1String("gradients")) target = window->part<ChartArea>()->gradientPanel();
    if (view == QLatin1String("step-inspector"))
      target = window->findChild<QDockWidget*>(QStringLiteral("stepInspectorDock"));
    grabAndQuit(target);
  };
  auto* once = new QTimer(window);
  once->setSingleShot(true);
  QObject::connect(once, &QTimer::timeout, window, shoot);
  if (m_options.screenshotAfterMs >= 0) {
    once->start(m_options.screenshotAfterMs);
    // A deadline when training or solving: a lesson shot as its runs end
    // (a solver lesson's as its solves end), with its claims checked
    // (scripts/screenshots.sh), or at the deadline.
    if (m_options.start) {
      QObject::connect(window, &MainWindow::trainingFinished, once, [once] { once->start(300); });
      QObject::connect(window->part<SolverView>(), &SolverView::solveFinished, once, [once] { once->start(300); });
    }
  } else if (m_options.start && m_options.view == QLatin1String("solver")) {
    // The Solver tab's curves are drawn as each run ends: shoot when all have.
    QObject::connect(window->part<SolverView>(), &SolverView::solveFinished, once, [once] { once->start(300); });
  } else if (m_options.start && m_options.view == QLatin1String("compare-difference")) {
    // The difference to FP32 is read over whole runs: shoot when they end.
    QObject::connect(window, &MainWindow::trainingFinished, once, [once] { once->start(300); });
  } else if (m_options.start) {
    // A running app: once points are on screen, and a little more so the
    // curves have a shape; or when training ends, whichever is first.
    QObject::connect(window->part<RunLauncher>(), &RunLauncher::firstPointShown, once, [once] { once->start(1500); });
    QObject::connect(window, &MainWindow::trainingFinished, once, [once] { once->start(200); });
  } else {
    // The docks, splitters and chart scenes settle over a few event-loop
    // passes after show().
    once->start(500);
  }
}
