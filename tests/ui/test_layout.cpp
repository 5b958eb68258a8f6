// The window's layout on the screen it is given (offscreen, 1280x720 and
// 1600x1000 through the offscreen platform's screen configuration) in every
// state: each view, each built-in lesson before and after it runs, in normal
// and presentation view, the History tab, a 10-run comparison, 20 runs in the
// list. In each: the window and its minimum size within the screen, no chart
// below a minimum plot size, no chart text elided to "…", the lesson's claims
// on screen.
#include <gtest/gtest.h>

#include <QAction>
#include <QChart>
#include <QChartView>
#include <QDockWidget>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QLabel>
#include <QLegend>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QStatusBar>
#include <QTabWidget>

#include <algorithm>

#include "backend/registry.h"
#include "charts/chart_area.h"
#include "charts/chart_style.h"
#include "charts/gradient_panel.h"
#include "charts/live_chart_view.h"
#include "lecture/format_explorer.h"
#include "solver/solver_chart.h"
#include "solver/solver_view.h"
#include "ui_test_support.h"
#include "window_parts.h"

namespace {

// A chart's plot area at the least: presentation view is read from the back
// of a room; the usual grid shares 720 pixels with the tables, the setup
// panel and a lesson's text (a lesson's short bottom row of three charts,
// 20 runs' legend above the grid), and a chart there can be enlarged.
constexpr int kPresentationChartHeight = 220;  // the chart, as issue 43 asks
constexpr int kPresentationPlotHeight = 150;
constexpr int kPlotHeight = 45;
constexpr int kPlotWidth = 100;
// Lessons run this many steps after they are shown (a few seconds each on
// two cores): enough for the claims and the step-1 gradient statistics.
constexpr std::int64_t kLessonSteps = 12;

QRect screenRect() { return QGuiApplication::primaryScreen()->availableGeometry(); }

QString sizeText(const QSize& s) { return QStringLiteral("%1x%2").arg(s.width()).arg(s.height()); }

// The widest (or tallest) minimum below `w`: where an oversized minimum
// size comes from, for the failure message.
QString widestMinimum(QWidget* root, bool height) {
  QWidget* best = nullptr;
  int bestValue = -1;
  for (QWidget* c : root->findChildren<QWidget*>()) {
    if (!c->isVisibleTo(root) || c->isWindow()) continue;
    const QSize m = c->minimumSize().expandedTo(c->minimumSizeHint());
    // The innermost widget with the largest value names the culprit.
    const int v = height ? m.height() : m.width();
    if (v >= bestValue) best = c, bestValue = v;
  }
  if (!best) return {};
  QStringList chain;
  for (QWidget* p = best; p && p != root; p = p->parentWidget())
    chain << QStringLiteral("%1(%2 min %3)")
                 .arg(QString::fromLatin1(p->metaObject()->className()), p->objectName(),
                      sizeText(p->minimumSize().expandedTo(p->minimumSizeHint())));
  return chain.join(QStringLiteral(" < "));
}

// Every text item of a chart's scene that QtCharts cut short ("...", its
// elision, or "…").
QStringList elidedTexts(QChartView* view) {
  QStringList out;
  for (QGraphicsItem* item : view->scene()->items()) {
    if (!item->isVisible()) continue;
    QString text;
    if (auto* t = qgraphicsitem_cast<QGraphicsTextItem*>(item)) text = t->toPlainText();
    if (auto* t = qgraphicsitem_cast<QGraphicsSimpleTextItem*>(item)) text = t->text();
    if (text.contains(QChar(0x2026)) || text.contains(QLatin1String("..."))) out << text;
  }
  return out;
}

void checkChart(QChartView* view, const QString& name, bool presentation, const QString& state) {
  const QRectF plot = view->chart()->plotArea();
  const int minPlot = presentation ? kPresentationPlotHeight : kPlotHeight;
  EXPECT_GE(plot.height(), minPlot) << qPrintable(state) << ": " << qPrintable(name) << " plot area "
                                    << plot.width() << "x" << plot.height() << " in a view of "
                                    << qPrintable(sizeText(view->size()));
  EXPECT_GE(plot.width(), kPlotWidth) << qPrintable(state) << ": " << qPrintable(name) << " plot area "
                                      << plot.width() << "x" << plot.height();
  if (presentation) {
    EXPECT_GE(view->height(), kPresentationChartHeight) << qPrintable(state) << ": " << qPrintable(name);
  }
  const QStringList elided = elidedTexts(view);
  EXPECT_TRUE(elided.isEmpty()) << qPrintable(state) << ": " << qPrintable(name) << " shows elided text: "
                                << qPrintable(elided.join(QStringLiteral(" | ")));
}

// Lets the splitters, docks and chart scenes settle (a few passes, and the
// charts' coalesced redraws).
void settle(MainWindow& w) {
  for (int i = 0; i < 3; ++i) {
    ui_test::settle();
    w.part<ChartArea>()->refresh();
  }
  ui_test::waitFor([] { return false; }, 60);
  ui_test::settle();
}

void checkWindow(MainWindow& w, const QString& state) {
  settle(w);
  const QRect screen = screenRect();
  // The frame: with no window manager it is the geometry itself.
  EXPECT_TRUE(screen.contains(w.frameGeometry())) << qPrintable(state) << ": window " << w.frameGeometry().x() << ","
                                                  << w.frameGeometry().y() << " "
                                                  << qPrintable(sizeText(w.frameGeometry().size())) << " on a "
                                                  << qPrintable(sizeText(screen.size())) << " screen";
  const QSize minimum = w.minimumSize().expandedTo(w.minimumSizeHint());
  EXPECT_LE(minimum.width(), screen.width()) << qPrintable(state) << ": minimum width " << minimum.width()
                                             << " from " << qPrintable(widestMinimum(&w, false));
  EXPECT_LE(minimum.height(), screen.height()) << qPrintable(state) << ": minimum height " << minimum.height()
                                               << " from " << qPrintable(widestMinimum(&w, true));
  // Nothing the window shows lies outside it (a layout squeezed below its
  // minimum pushes its last widgets out).
  for (QWidget* part : {static_cast<QWidget*>(w.statusBar()), w.centralWidget()}) {
    if (!part->isVisible()) continue;
    const QRect r(part->mapTo(&w, QPoint(0, 0)), part->size());
    EXPECT_TRUE(w.rect().contains(r)) << qPrintable(state) << ": " << part->metaObject()->className() << " at "
                                      << r.x() << "," << r.y() << " " << qPrintable(sizeText(r.size()))
                                      << " outside the window " << qPrintable(sizeText(w.size()));
  }
  const bool presentation = w.presentation();
  if (presentation) {
    EXPECT_EQ(w.frameGeometry(), QGuiApplication::primaryScreen()->geometry())
        << qPrintable(state) << ": presentation view fills the screen";
  }
  ChartArea* charts = w.part<ChartArea>();
  if (charts->isVisible())
    for (int m = 0; m < charts->chartCount(); ++m)
      if (charts->view(m)->isVisible()) checkChart(charts->view(m), charts->title(m), presentation, state);

  // The lesson: in presentation view all of it without scrolling; in the
  // usual view the claims are never cut at the side.
  LecturePanel* lesson = w.part<LecturePanel>();
  if (lesson->isVisible()) {
    auto* scroll = lesson->findChild<QScrollArea*>();
    QWidget* viewport = scroll->viewport();
    for (const char* name : {"lectureTitle", "lectureExplanation", "lectureClaims"}) {
      auto* label = lesson->findChild<QLabel*>(QLatin1String(name));
      if (!label->isVisible()) continue;
      const QRect r(label->mapTo(viewport, QPoint(0, 0)), label->size());
      EXPECT_LE(r.right(), viewport->width()) << qPrintable(state) << ": " << name << " cut at the side";
      if (presentation) {
        EXPECT_TRUE(viewport->rect().contains(r))
            << qPrintable(state) << ": " << name << " at y " << r.y() << ".." << r.bottom()
            << " outside the lesson's " << viewport->height() << " px";
      }
      // The label is as tall as its text needs at its width.
      EXPECT_GE(r.height(), label->heightForWidth(r.width())) << qPrintable(state) << ": " << name << " clipped";
    }
    if (presentation) {
      EXPECT_EQ(scroll->verticalScrollBar()->maximum(), 0) << qPrintable(state) << ": lesson scrolls";
    }
  }
}

void setPresentation(MainWindow& w, bool on) {
  QAction* f11 = w.findChild<QAction*>(QStringLiteral("actionPresentation"));
  if (f11->isChecked() != on) f11->trigger();
  ui_test::settle(w);
}

// The lesson, made short: its runs, its claims, its charts, in seconds.
engine::Preset shortened(engine::Preset p) {
  for (engine::PresetRun& r : p.runs) {
    r.config.steps = std::min<std::int64_t>(r.config.steps > 0 ? r.config.steps : kLessonSteps, kLessonSteps);
    r.config.stats_every = 5;
    // The claims' values are not what this test looks at: a language
    // model's final evaluation reads two batches, not the Jargon File's
    // whole validation split.
    r.config.eval_batches = 2;
  }
  return p;
}

// Whether every claim of `p` needs a backend this machine lacks (the app
// then trains nothing and shows the claims skipped).
bool backendMissing(const engine::Preset& p) {
  const std::string needed = engine::required_backend(p);
  if (needed.empty()) return false;
  for (const engine::BackendAvailability& b : engine::available_backends())
    if (b.name == needed) return !b.available;
  return true;
}

class Layout : public ::testing::Test {
 protected:
  void SetUp() override {
    ui_test::ensureApplication();
    m_window = std::make_unique<MainWindow>();
    m_window->part<UserMessages>()->setQuiet(true);
    m_window->fitToScreen();
    m_window->show();
    settle(*m_window);
  }
  std::unique_ptr<MainWindow> m_window;
};

}  // namespace

TEST_F(Layout, OpensWithinTheScreen) {
  MainWindow& w = *m_window;
  const QRect screen = screenRect();
  // The whole of a small screen (less its frame), at most 1600x1000.
  EXPECT_GE(w.frameGeometry().width(), std::min(screen.width(), 1600) - 8);
  EXPECT_GE(w.frameGeometry().height(), std::min(screen.height(), 1000) - 8);
  checkWindow(w, QStringLiteral("fresh window"));
}

TEST_F(Layout, EveryViewFits) {
  MainWindow& w = *m_window;
  auto* tabs = w.findChild<QTabWidget*>(QStringLiteral("centreTabs"));
  auto* runsTabs = w.findChild<QTabWidget*>(QStringLiteral("runsTabs"));
  tabs->setCurrentIndex(1);
  checkWindow(w, QStringLiteral("Compare tab"));
  tabs->setCurrentIndex(2);
  checkWindow(w, QStringLiteral("Samples tab"));
  // The Solver tab after a solve of every format by both methods (the
  // fullest legend: 12 runs and 6 marks), normal and in presentation view.
  w.showSolver();
  SolverView* solver = w.part<SolverView>();
  SolverJob job = solver->job();
  job.n = 48;
  job.formats = {engine::SolveFormat::f64(), engine::SolveFormat::of(engine::Format::FP32),
                 engine::SolveFormat::of(engine::Format::TF32), engine::SolveFormat::of(engine::Format::BF16),
                 engine::SolveFormat::of(engine::Format::FP16), engine::SolveFormat::of(engine::Format::E4M3)};
  job.methods = {engine::Method::LuIr, engine::Method::GmresIr};
  solver->setJob(job);
  bool solved = false;
  QObject::connect(solver, &SolverView::solveFinished, solver, [&solved] { solved = true; });
  ASSERT_TRUE(solver->solve());
  ASSERT_TRUE(ui_test::waitFor([&] { return solved; }, 120000));
  ASSERT_EQ(solver->outcomes().size(), 12u);
  checkWindow(w, QStringLiteral("Solver tab"));
  checkChart(solver->chart(), QStringLiteral("solver"), false, QStringLiteral("Solver tab"));
  setPresentation(w, true);
  EXPECT_TRUE(solver->isVisible()) << "presentation view keeps the Solver tab";
  checkWindow(w, QStringLiteral("Solver tab, presentation"));
  checkChart(solver->chart(), QStringLiteral("solver"), true, QStringLiteral("Solver tab, presentation"));
  setPresentation(w, false);
  tabs->setCurrentIndex(0);
  runsTabs->setCurrentIndex(1);
  checkWindow(w, QStringLiteral("History tab"));
  runsTabs->setCurrentIndex(0);
  w.findChild<QDockWidget*>(QStringLiteral("stepInspectorDock"))->show();
  checkWindow(w, QStringLiteral("step inspector"));
  w.findChild<QDockWidget*>(QStringLiteral("stepInspectorDock"))->hide();
  // F11 twice, without a lesson: the loss and loss-scale charts.
  setPresentation(w, true);
  checkWindow(w, QStringLiteral("presentation, no lesson"));
  setPresentation(w, false);
  checkWindow(w, QStringLiteral("presentation and back"));
  EXPECT_EQ(w.frameGeometry().size(), QSize(std::min(screenRect().width(), 1600), std::min(screenRect().height(), 1000)));

  // The format explorer and its block view: windows of their own.
  for (bool blocks : {false, true}) {
    blocks ? w.showBlockView() : w.showFormatExplorer();
    FormatExplorer* e = w.formatExplorer();
    ui_test::settle();
    const char* name = blocks ? "block view" : "format explorer";
    EXPECT_TRUE(screenRect().contains(e->frameGeometry())) << name << ": " << qPrintable(sizeText(e->size()));
    const QSize minimum = e->minimumSize().expandedTo(e->minimumSizeHint());
    EXPECT_LE(minimum.width(), screenRect().width()) << name << ": from " << qPrintable(widestMinimum(e, false));
    EXPECT_LE(minimum.height(), screenRect().height()) << name << ": from " << qPrintable(widestMinimum(e, true));
    // Every wrapped text is as tall as it needs (none cut).
    for (QLabel* l : e->findChildren<QLabel*>())
      if (l->isVisible() && l->wordWrap() && !l->text().isEmpty()) {
        EXPECT_GE(l->height(), l->heightForWidth(l->width())) << name << ": " << qPrintable(l->text().left(60));
      }
    e->hide();
  }
}

TEST_F(Layout, ManyRunsAndATenRunComparison) {
  MainWindow& w = *m_window;
  RunStore& store = *w.part<RunStore>();
  const int group = store.newCompareGroup();
  const QStringList recipes = {QStringLiteral("fp32"),       QStringLiteral("fp16"), QStringLiteral("mixed-fp16"),
                               QStringLiteral("mixed-bf16"), QStringLiteral("fp8"),  QStringLiteral("mxfp8")};
  for (int i = 0; i < 20; ++i) {
    const QString recipe = recipes[i % recipes.size()];
    store.addRun(QStringLiteral("run %1 · %2 with a longer name").arg(i + 1).arg(recipe), recipe,
                 chart_style::runColour(i), ui_test::config(recipe.toStdString()), i < 10 ? group : -1);
  }
  std::vector<engine::Record> records;
  for (int id = 0; id < 20; ++id)
    for (int s = 1; s <= 50; ++s) records.emplace_back(ui_test::step(id, s, 2.0 / s + 0.01 * id));
  ui_test::feed(store, records);
  checkWindow(w, QStringLiteral("20 runs"));
  w.part<CompareView>()->setGroup(group);
  w.findChild<QTabWidget*>(QStringLiteral("centreTabs"))->setCurrentIndex(1);  // Compare
  w.part<CompareView>()->refresh();
  checkWindow(w, QStringLiteral("10-run comparison"));
}

// Every built-in lesson: chosen, presented, run a few steps, presented
// again with its claims checked, and back.
TEST_F(Layout, EveryLessonBeforeAndAfterItRuns) {
  MainWindow& w = *m_window;
  bool finished = false;
  QObject::connect(&w, &MainWindow::trainingFinished, [&] { finished = true; });
  bool checked = false;
  QObject::connect(w.part<LessonController>(), &LessonController::checked, [&] { checked = true; });
  for (const engine::Preset& p : engine::builtin_presets()) {
    const QString name = QString::fromStdString(p.name);
    SCOPED_TRACE(p.name);
    if (p.kind == engine::PresetKind::Solve) {
      // On the Solver tab, at the test suite's size (its quick n).
      engine::Preset quick = p;
      quick.problem.n = 128;
      ASSERT_TRUE(w.part<LessonController>()->set(quick));
      checkWindow(w, name + QStringLiteral(", chosen"));
      setPresentation(w, true);
      checkWindow(w, name + QStringLiteral(", presentation"));
      checked = false;
      ASSERT_TRUE(w.part<LessonController>()->start()) << qPrintable(w.part<UserMessages>()->lastError());
      ASSERT_TRUE(ui_test::waitFor([&] { return checked; }, 180000)) << p.name;
      checkWindow(w, name + QStringLiteral(", solved, presentation"));
      EXPECT_EQ(w.part<LecturePanel>()->claimResults().size(), p.expect.size());
      setPresentation(w, false);
      checkWindow(w, name + QStringLiteral(", solved"));
      continue;
    }
    w.part<LessonController>()->set(shortened(p));
    checkWindow(w, name + QStringLiteral(", chosen"));
    setPresentation(w, true);
    checkWindow(w, name + QStringLiteral(", presentation"));
    finished = false;
    ASSERT_TRUE(ui_test::waitFor([&] { return w.part<RunLauncher>()->readyToStart(); }, 180000));
    if (backendMissing(p)) {
      // A GPU lesson on a CPU: not trained; its claims show skipped.
      EXPECT_FALSE(w.part<LessonController>()->start());
      EXPECT_FALSE(w.part<LecturePanel>()->claimResults().empty());
      checkWindow(w, name + QStringLiteral(", skipped, presentation"));
      setPresentation(w, false);
      checkWindow(w, name + QStringLiteral(", skipped"));
      continue;
    }
    ASSERT_TRUE(w.part<LessonController>()->start()) << qPrintable(w.part<UserMessages>()->lastError());
    ASSERT_TRUE(ui_test::waitFor([&] { return finished; }, 180000)) << p.name;
    checkWindow(w, name + QStringLiteral(", run, presentation"));
    EXPECT_FALSE(w.part<LecturePanel>()->claimResults().empty());
    setPresentation(w, false);
    checkWindow(w, name + QStringLiteral(", run"));
  }
  // The past runs, every lesson's, in the History tab.
  w.part<HistoryController>()->show();
  checkWindow(w, QStringLiteral("History tab after the lessons"));
}
