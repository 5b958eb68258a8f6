// The first window: every area of the layout exists, with the controls a
// user relies on, laid out without clipping at 1400x900.
#include <gtest/gtest.h>

#include <QWidgetAction>

#include <QAction>
#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTabWidget>
#include <QTableView>
#include <QTest>
#include <QScreen>
#include <QStatusBar>
#include <QToolBar>
#include <QTreeView>
#include <QValueAxis>

#include <memory>

#include "backend/cuda_module.h"
#include "backend/registry.h"
#include "charts/chart_area.h"
#include "compare/compare_view.h"
#include "main_window.h"
#include "panels/precision_table.h"
#include "panels/precision_table_model.h"
#include "panels/runs_list.h"
#include "panels/setup_panel.h"
#include "ui/ui_test_support.h"
#include "ui/window_parts.h"

namespace {

QStringList comboItems(const QComboBox* combo) {
  QStringList items;
  for (int i = 0; i < combo->count(); ++i) items << combo->itemText(i);
  return items;
}

class MainWindowTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ui_test::useTemporaryDataHome();  // runs journal there, not in the real home
    if (QApplication::instance()) return;
    // Runnable without a display even outside ctest.
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    static int argc = 1;
    static char arg0[] = "test_main_window";
    static char* argv[] = {arg0, nullptr};
    new QApplication(argc, argv);  // lives for the whole test program
  }

  void SetUp() override {
    m_window = std::make_unique<MainWindow>();
    m_window->resize(1400, 900);
    m_window->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(m_window.get()));
    QApplication::processEvents();
  }

  template <class T>
  T* child(const char* name) const {
    return m_window->findChild<T*>(QString::fromLatin1(name));
  }

  std::unique_ptr<MainWindow> m_window;
};

TEST_F(MainWindowTest, TitleAndAreasExist) {
  EXPECT_EQ(m_window->windowTitle(), QStringLiteral("Precision Lab"));
  // The icon comes from the qrc compiled into the static ui library.
  EXPECT_FALSE(m_window->windowIcon().pixmap(32, 32).isNull());
  EXPECT_NE(child<SetupPanel>("setupPanel"), nullptr);
  EXPECT_NE(child<QTableView>("precisionTable"), nullptr);
  EXPECT_NE(child<ChartArea>("chartArea"), nullptr);
  EXPECT_NE(child<QTreeView>("runsList"), nullptr);
  for (const char* name : {"setupPanel", "precisionTable", "chartArea", "runsList"}) {
    QWidget* w = child<QWidget>(name);
    ASSERT_NE(w, nullptr) << name;
    EXPECT_TRUE(w->isVisible()) << name;
  }
}

TEST_F(MainWindowTest, SetupPanelOffersTheDesignChoices) {
  EXPECT_EQ(comboItems(child<QComboBox>("recipeCombo")),
            (QStringList{"fp32", "fp16", "mixed-fp16", "mixed-bf16", "fp8", "mxfp8", "mxfp4", "nvfp4", "custom"}));
  const QStringList datasets = comboItems(child<QComboBox>("datasetCombo"));
  ASSERT_EQ(datasets.size(), 6);
  EXPECT_EQ(datasets.mid(0, 3), (QStringList{"fashion-mnist", "spirals", "tiny-gradients"}));
  EXPECT_TRUE(datasets[3].startsWith(QStringLiteral("folder")));
  EXPECT_EQ(datasets[4], QStringLiteral("jargon"));
  EXPECT_TRUE(datasets[5].startsWith(QStringLiteral("text file")));
  EXPECT_EQ(comboItems(child<QComboBox>("modelCombo")), (QStringList{"mlp", "cnn", "transformer", "gpt"}));
  EXPECT_EQ(comboItems(child<QComboBox>("optimizerCombo")), (QStringList{"sgd", "adam", "adamw"}));
  EXPECT_EQ(comboItems(child<QComboBox>("lossScaleModeCombo")), (QStringList{"none", "static", "dynamic"}));
  EXPECT_EQ(comboItems(child<QComboBox>("backendCombo")), (QStringList{"auto", "cpu", "cuda"}));
  EXPECT_NE(child<QDoubleSpinBox>("learningRateSpin"), nullptr);
  EXPECT_NE(child<QSpinBox>("batchSpin"), nullptr);
  EXPECT_NE(child<QSpinBox>("seedSpin"), nullptr);
  EXPECT_EQ(comboItems(child<QComboBox>("durationUnitCombo")), (QStringList{"epochs", "steps"}));

  // GradScaler's defaults.
  const SetupSettings s = m_window->part<SetupPanel>()->settings();
  EXPECT_EQ(s.initialScale, 65536.0);
  EXPECT_EQ(s.growthFactor, 2.0);
  EXPECT_EQ(s.backoffFactor, 0.5);
  EXPECT_EQ(s.growthInterval, 2000);
  EXPECT_EQ(s.dataset, QStringLiteral("fashion-mnist"));
  EXPECT_EQ(s.recipe, QStringLiteral("mixed-fp16"));
  EXPECT_EQ(s.lossScaling, QStringLiteral("dynamic"));
}

TEST_F(MainWindowTest, RecipeSetsItsLossScalingAndTheScalerControlsFollow) {
  auto* recipe = child<QComboBox>("recipeCombo");
  auto* mode = child<QComboBox>("lossScaleModeCombo");
  recipe->setCurrentText(QStringLiteral("fp32"));
  EXPECT_EQ(mode->currentText(), QStringLiteral("none"));
  EXPECT_FALSE(child<QDoubleSpinBox>("initialScaleSpin")->isEnabled());
  EXPECT_FALSE(child<QSpinBox>("growthIntervalSpin")->isEnabled());
  recipe->setCurrentText(QStringLiteral("fp8"));
  EXPECT_EQ(mode->currentText(), QStringLiteral("dynamic"));
  EXPECT_TRUE(child<QDoubleSpinBox>("growthFactorSpin")->isEnabled());
  mode->setCurrentText(QStringLiteral("static"));
  EXPECT_TRUE(child<QDoubleSpinBox>("initialScaleSpin")->isEnabled());
  EXPECT_FALSE(child<QDoubleSpinBox>("backoffSpin")->isEnabled());
}

TEST_F(MainWindowTest, StepsAndEpochsKeepTheirOwnValues) {
  auto* unit = child<QComboBox>("durationUnitCombo");
  auto* length = child<QSpinBox>("durationSpin");
  length->setValue(3);
  unit->setCurrentIndex(1);
  length->setValue(500);
  unit->setCurrentIndex(0);
  EXPECT_EQ(length->value(), 3);
  const SetupSettings s = m_window->part<SetupPanel>()->settings();
  EXPECT_FALSE(s.useSteps);
  EXPECT_EQ(s.epochs, 3);
  EXPECT_EQ(s.steps, 500);
}

TEST_F(MainWindowTest, CudaChoiceFollowsTheRegistry) {
  auto* backend = child<QComboBox>("backendCombo");
  auto* model = qobject_cast<QStandardItemModel*>(backend->model());
  ASSERT_NE(model, nullptr);
  QStandardItem* cuda = model->item(2);
  ASSERT_NE(cuda, nullptr);
  engine::BackendAvailability c;
  for (const engine::BackendAvailability& b : engine::available_backends())
    if (b.name == "cuda") c = b;
  ASSERT_EQ(c.name, "cuda");
  EXPECT_EQ(cuda->isEnabled(), c.available);
  if (!c.available) {
    const QString reason = QString::fromStdString(c.reason);
    EXPECT_FALSE(reason.isEmpty());
    EXPECT_TRUE(cuda->toolTip().contains(reason)) << cuda->toolTip().toStdString();
    EXPECT_TRUE(child<QLabel>("backendNote")->text().startsWith(QStringLiteral("CUDA unavailable")));
  }
}

TEST_F(MainWindowTest, PrecisionTableHasItsColumnsAndEditsFormats) {
  auto* table = qobject_cast<PrecisionTable*>(child<QTableView>("precisionTable"));
  ASSERT_NE(table, nullptr);
  PrecisionTableModel* model = table->precisionModel();
  ASSERT_EQ(table->model(), model);
  QStringList headers;
  for (int c = 0; c < model->columnCount(); ++c) headers << model->headerData(c, Qt::Horizontal).toString();
  EXPECT_EQ(headers, (QStringList{"layer", "shape", "compute", "storage", "accumulate", "parameters", "memory"}));
  // The default setup (fashion-mnist, mlp, mixed-fp16): one row per leaf,
  // the matmul layers in FP16 with FP32 accumulation.
  QStringList layers;
  for (const PrecisionTableRow& r : model->rows()) layers << r.layer;
  EXPECT_EQ(layers, (QStringList{"flatten", "fc1", "relu1", "fc2", "relu2", "fc3"}));
  const PrecisionTableRow& first = model->rows()[1];
  EXPECT_EQ(first.shape, QStringLiteral("256 x 784"));
  EXPECT_EQ(first.parameters, 784 * 256 + 256);
  EXPECT_EQ(first.precision.compute, engine::Format::FP16);
  EXPECT_EQ(first.precision.accumulate, engine::Format::FP32);
  // FP16 weights (2 bytes) + FP32 master (4 bytes) + FP16 activations of a batch of 64.
  EXPECT_EQ(first.memoryBytes, first.parameters * 6 + 64 * 256 * 2);

  PrecisionTableRow fc1;
  fc1.layer = QStringLiteral("fc1");
  fc1.precision = fc1.recipePrecision = engine::LayerPrecision{};
  fc1.shape = QStringLiteral("784 x 256");
  fc1.parameters = 784 * 256 + 256;
  fc1.memoryBytes = 2 * fc1.parameters;
  model->setRows({fc1});
  ASSERT_EQ(model->rowCount(), 1);
  EXPECT_EQ(model->index(0, PrecisionTableModel::Compute).data().toString(), QStringLiteral("FP32"));

  QSignalSpy edited(model, &PrecisionTableModel::precisionEdited);
  EXPECT_TRUE(model->setData(model->index(0, PrecisionTableModel::Compute), QStringLiteral("bf16")));
  EXPECT_EQ(model->index(0, PrecisionTableModel::Compute).data().toString(), QStringLiteral("BF16"));
  ASSERT_EQ(edited.count(), 1);
  EXPECT_EQ(model->rows()[0].precision.compute, engine::Format::BF16);
  // TF32 is compute-only; E4M3 is no accumulation format; nonsense is refused.
  EXPECT_FALSE(model->setData(model->index(0, PrecisionTableModel::Storage), QStringLiteral("tf32")));
  EXPECT_FALSE(model->setData(model->index(0, PrecisionTableModel::Accumulate), QStringLiteral("e4m3")));
  EXPECT_FALSE(model->setData(model->index(0, PrecisionTableModel::Compute), QStringLiteral("fp12")));
  EXPECT_FALSE(model->flags(model->index(0, PrecisionTableModel::Layer)) & Qt::ItemIsEditable);
  EXPECT_EQ(edited.count(), 1);
}

// Between runs the table shows (and edits) the next run's recipe, and its
// title says so; a new recipe rebuilds both.
TEST_F(MainWindowTest, PrecisionTableTitleNamesTheRecipeItShows) {
  auto* box = child<QGroupBox>("precisionBox");
  auto* table = qobject_cast<PrecisionTable*>(child<QTableView>("precisionTable"));
  auto* panel = child<SetupPanel>("setupPanel");
  ASSERT_NE(box, nullptr);
  ASSERT_NE(table, nullptr);
  ASSERT_NE(panel, nullptr);
  EXPECT_TRUE(box->title().contains(QStringLiteral("next run: mixed-fp16"))) << box->title().toStdString();
  panel->setRecipe(QStringLiteral("fp32"));
  QApplication::processEvents();
  EXPECT_TRUE(box->title().contains(QStringLiteral("next run: fp32"))) << box->title().toStdString();
  ASSERT_GT(table->precisionModel()->rows().size(), 1);
  EXPECT_EQ(table->precisionModel()->rows()[1].precision.compute, engine::Format::FP32);
}

TEST_F(MainWindowTest, ChartAreaHasFiveChartsWithLabelledAxes) {
  auto* area = child<ChartArea>("chartArea");
  ASSERT_NE(area, nullptr);
  const QList<QChartView*> views = area->findChildren<QChartView*>();
  ASSERT_EQ(views.size(), 5);
  QStringList titles;
  for (QChartView* v : views) titles << v->chart()->title();
  titles.sort();
  QStringList expected{"Loss", "Loss scale (log2)", "Memory", "Accuracy", "Gradients"};
  expected.sort();
  EXPECT_EQ(titles, expected);
  ASSERT_EQ(area->chartCount(), 5);
  for (int m = 0; m < area->chartCount(); ++m) {
    const auto metric = static_cast<ChartArea::Metric>(m);
    QValueAxis* x = area->xAxis(metric);
    QValueAxis* y = area->yAxis(metric);
    ASSERT_NE(x, nullptr) << m;
    ASSERT_NE(y, nullptr) << m;
    // Every chart runs over training steps, except the gradient histogram.
    EXPECT_EQ(x->titleText(), metric == ChartArea::Gradients ? QStringLiteral("log2 |gradient|")
                                                              : QStringLiteral("step"))
        << m;
    EXPECT_FALSE(y->titleText().isEmpty()) << m;
    EXPECT_TRUE(area->view(metric)->isVisible()) << m;
  }
}

TEST_F(MainWindowTest, RunsListHasItsColumnsAndEnablesExport) {
  auto* runs = qobject_cast<RunsList*>(child<QTreeView>("runsList"));
  ASSERT_NE(runs, nullptr);
  QStringList headers;
  for (int c = 0; c < runs->model()->columnCount(); ++c)
    headers << runs->model()->headerData(c, Qt::Horizontal).toString();
  EXPECT_EQ(headers, (QStringList{"name", "recipe", "colour", "status"}));

  auto* exportAction = child<QAction>("actionExport");
  ASSERT_NE(exportAction, nullptr);
  EXPECT_FALSE(exportAction->isEnabled());
  const QColor colour = runs->nextColour();
  const int row = runs->addRun(QStringLiteral("run 1"), QStringLiteral("mixed-fp16"), colour, QStringLiteral("finished"));
  EXPECT_EQ(runs->model()->index(row, RunsList::Colour).data(Qt::UserRole).value<QColor>(), colour);
  EXPECT_EQ(runs->model()->index(row, RunsList::Colour).data(Qt::ToolTipRole).toString(), colour.name());
  // New runs are ticked: drawn on the charts.
  EXPECT_TRUE(runs->isRunChecked(row));
  EXPECT_NE(runs->nextColour(), colour);
  m_window->updateActions();
  EXPECT_TRUE(exportAction->isEnabled());
}

TEST_F(MainWindowTest, ToolbarAndStatusBar) {
  auto* toolbar = child<QToolBar>("runToolBar");
  ASSERT_NE(toolbar, nullptr);
  QStringList texts;
  for (QAction* a : toolbar->actions())
    if (!a->isSeparator() && !qobject_cast<QWidgetAction*>(a)) texts << a->text();
  EXPECT_EQ(texts, (QStringList{"Start", "Pause", "Step", "Stop", "Compare", "Export"}));
  // After them, the lecture's speed control (steps per second).
  EXPECT_NE(toolbar->findChild<QWidget*>(QStringLiteral("speedControl")), nullptr);
  // Nothing to pause or stop before a run exists; Start, Step and Compare work.
  EXPECT_FALSE(child<QAction>("actionPause")->isEnabled());
  EXPECT_FALSE(child<QAction>("actionStop")->isEnabled());
  EXPECT_TRUE(child<QAction>("actionStart")->isEnabled());
  EXPECT_TRUE(child<QAction>("actionStep")->isEnabled());
  EXPECT_TRUE(child<QAction>("actionCompare")->isEnabled());

  m_window->part<StatusReadouts>()->set(1234, 5678.0, 65536.0, 3 * 1024 * 1024);
  EXPECT_TRUE(child<QLabel>("statusStep")->text().contains(QStringLiteral("1")));
  EXPECT_TRUE(child<QLabel>("statusRate")->text().contains(QStringLiteral("samples/s")));
  EXPECT_EQ(child<QLabel>("statusScale")->text(), QStringLiteral("loss scale 2^16"));
  EXPECT_TRUE(child<QLabel>("statusMemory")->text().contains(QStringLiteral("MiB")));
}

// Nothing is squeezed below what it needs at the size the app opens with.
TEST_F(MainWindowTest, NothingIsClippedAt1400x900) {
  EXPECT_EQ(m_window->size(), QSize(1400, 900));
  for (const char* name : {"setupPanel", "precisionTable", "chartArea", "runsList", "lossChart",
                           "lossScaleChart", "memoryChart", "accuracyChart", "gradientsChart"}) {
    QWidget* w = child<QWidget>(name);
    ASSERT_NE(w, nullptr) << name;
    const QSize need = w->minimumSizeHint().expandedTo(w->minimumSize());
    EXPECT_GE(w->width(), need.width()) << name;
    EXPECT_GE(w->height(), need.height()) << name;
  }
  // Every setup control is fully inside the panel horizontally.
  SetupPanel* panel = m_window->part<SetupPanel>();
  for (QWidget* w : panel->findChildren<QWidget*>()) {
    if (!w->isVisible()) continue;
    const QRect r(w->mapTo(panel, QPoint(0, 0)), w->size());
    EXPECT_LE(r.right(), panel->width()) << w->objectName().toStdString();
  }
  const QPixmap shot = m_window->grab();
  EXPECT_EQ(shot.size(), m_window->size() * shot.devicePixelRatio());
}

// A 1280x720 projector: today the precision table, runs list and status bar
// were off-screen and, shrunk to fit, the gradients chart was 80 px tall.
TEST_F(MainWindowTest, NothingIsClippedAt1280x720) {
  m_window->resize(1280, 720);
  QApplication::processEvents();
  EXPECT_EQ(m_window->size(), QSize(1280, 720));
  EXPECT_LE(m_window->minimumSizeHint().height(), 720);
  EXPECT_LE(m_window->minimumSizeHint().width(), 1280);
  const QRect inside = m_window->rect();
  for (const char* name : {"precisionTable", "runsList", "chartArea", "lossChart", "lossScaleChart", "memoryChart",
                           "accuracyChart", "gradientsChart"}) {
    QWidget* w = child<QWidget>(name);
    ASSERT_NE(w, nullptr) << name;
    EXPECT_TRUE(w->isVisible()) << name;
    const QRect r(w->mapTo(m_window.get(), QPoint(0, 0)), w->size());
    EXPECT_TRUE(inside.contains(r)) << name;
    EXPECT_GE(w->height(), name == std::string("precisionTable") || name == std::string("runsList") ? 90 : 140)
        << name;
  }
  QWidget* status = m_window->statusBar();
  EXPECT_TRUE(status->isVisible());
  EXPECT_TRUE(inside.contains(QRect(status->mapTo(m_window.get(), QPoint(0, 0)), status->size())));
}

// Today the window was fixed at 1400x900 whatever the screen.
TEST_F(MainWindowTest, OpensSizedToTheAvailableScreen) {
  m_window->fitToScreen();
  const QRect avail = m_window->screen()->availableGeometry();
  // The whole screen up to 1600x1000 (no smaller than the window can be:
  // the offscreen platform's screen is 800x600, below the 1280x720 it supports).
  const QSize least = m_window->minimumSizeHint();
  // (Less the frame's few pixels: the frame fits the screen.)
  EXPECT_NEAR(m_window->width(), std::max(std::min(avail.width(), 1600), least.width()), 8);
  EXPECT_NEAR(m_window->height(), std::max(std::min(avail.height(), 1000), least.height()), 8);
  EXPECT_NE(m_window->size(), QSize(1400, 900));
}

// Today Ctrl+Q did nothing in presentation view: its action lived in the
// File menu, hidden with the menu bar.
TEST_F(MainWindowTest, CtrlQQuitsInPresentationView) {
  m_window->setPresentation(true);
  QApplication::processEvents();
  EXPECT_FALSE(m_window->menuBar()->isVisible());
  m_window->activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(m_window.get()));
  QTest::keyClick(m_window.get(), Qt::Key_Q, Qt::ControlModifier);
  QApplication::processEvents();
  EXPECT_FALSE(m_window->isVisible());
}

// The Live charts' "Difference to FP32" action shows the Compare tab in
// that mode; the tab's page is the scroll area around the compare view.
TEST_F(MainWindowTest, DifferenceActionShowsTheCompareTabInDifferenceMode) {
  auto* tabs = m_window->findChild<QTabWidget*>(QStringLiteral("centreTabs"));
  ASSERT_NE(tabs, nullptr);
  auto* compare = m_window->part<CompareView>();
  ASSERT_NE(tabs->currentWidget(), nullptr);
  EXPECT_FALSE(tabs->currentWidget()->isAncestorOf(compare));
  compare->differenceAction()->trigger();
  QApplication::processEvents();
  EXPECT_TRUE(tabs->currentWidget()->isAncestorOf(compare));
  EXPECT_EQ(compare->mode(), CompareView::Mode::Difference);
}

}  // namespace
