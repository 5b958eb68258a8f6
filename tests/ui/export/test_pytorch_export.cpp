// tests/ui/export: File > Export to PyTorch… writes train.py for a finished run and shows what did not translate.
#include <gtest/gtest.h>

#include <QAction>
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QMessageBox>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <functional>
#include <memory>

#include "export/pytorch_export_action.h"
#include "main_window.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"
#include "ui/ui_test_support.h"
#include "ui/window_parts.h"

namespace {

using ui_test::waitFor;

class PytorchExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }
  void SetUp() override {
    m_window = std::make_unique<MainWindow>();
    m_window->part<UserMessages>()->setQuiet(true);
    m_window->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(m_window.get()));
  }
  void TearDown() override { m_window.reset(); }
  std::unique_ptr<MainWindow> m_window;
};

TEST_F(PytorchExportTest, ActionWritesTheScriptAndListsWhatDidNotTranslate) {
  // The fp16 recipe keeps its optimizer state in FP16, which torch's
  // optimizers do not: the list has that line.
  engine::RunConfig c;
  c.dataset = "spirals";
  c.model = "mlp";
  c.recipe = "fp16";
  c.steps = 30;
  c.batch = 64;
  c.seed = 3;
  c.threads = 1;
  c.stats_every = 0;
  m_window->part<PrecisionTableController>()->setBaseConfig(c);
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun()) << m_window->part<UserMessages>()->lastError().toStdString();
  auto* controller = m_window->part<TrainingController>();
  ASSERT_TRUE(waitFor([&] { return !controller->active(); }, 30000));
  RunStore* store = m_window->part<RunStore>();
  ASSERT_EQ(store->count(), 1);
  ASSERT_EQ(store->run(0).state, engine::RunState::Finished);
  ASSERT_FALSE(store->run(0).folder.isEmpty());

  auto* action = m_window->findChild<QAction*>(QStringLiteral("actionExportPytorch"));
  ASSERT_NE(action, nullptr);
  EXPECT_TRUE(action->isEnabled());
  auto* exporter = m_window->part<PytorchExportAction>();
  ASSERT_NE(exporter, nullptr);
  QTemporaryDir out;
  exporter->setOutputDirectory(out.path());
  QSignalSpy finished(exporter, &PytorchExportAction::exportFinished);
  action->trigger();
  ASSERT_TRUE(waitFor([&] { return finished.count() == 1; }, 30000));
  const QList<QVariant> args = finished.takeFirst();
  ASSERT_TRUE(args.at(0).toBool()) << args.at(3).toString().toStdString();
  const QString script = args.at(1).toString();
  EXPECT_TRUE(QFileInfo(script).isFile()) << script.toStdString();
  EXPECT_TRUE(script.startsWith(out.path()));
  EXPECT_TRUE(QFileInfo(QFileInfo(script).dir().filePath(QStringLiteral("batches.txt"))).isFile());
  const QStringList untranslated = args.at(2).toStringList();
  ASSERT_FALSE(untranslated.isEmpty());
  EXPECT_TRUE(untranslated.join('\n').contains(QStringLiteral("optimizer state in FP16")));

  // The message box shows the script and the list.
  QMessageBox* box = exporter->resultBox();
  ASSERT_NE(box, nullptr);
  EXPECT_TRUE(box->isVisible());
  EXPECT_TRUE(box->text().contains(QStringLiteral("train.py"))) << box->text().toStdString();
  EXPECT_TRUE(box->informativeText().contains(QStringLiteral("optimizer state in FP16")))
      << box->informativeText().toStdString();
  box->close();

  // No such run: refused with a message, nothing started.
  EXPECT_FALSE(exporter->exportRun(7));
  ASSERT_NE(exporter->resultBox(), nullptr);
  EXPECT_TRUE(exporter->resultBox()->text().contains(QStringLiteral("no run")));
  EXPECT_FALSE(exporter->exporting());
}

}  // namespace
