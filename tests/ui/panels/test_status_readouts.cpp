// tests/ui/panels: the status bar's memory read-out says which quantity it
// is: the last step's memory ("now") beside the run's peak, the number the
// Compare table shows.
#include <gtest/gtest.h>

#include <QLabel>
#include <QLocale>
#include <QStatusBar>

#include "panels/status_readouts.h"
#include "session/run_store.h"
#include "ui/ui_test_support.h"

namespace {

// At a run's end the bar read 3.33 MiB where the table's peak read 3.53 MiB.
TEST(StatusReadouts, MemoryShowsTheLastStepAndThePeakTheTableShows) {
  ui_test::ensureApplication();
  RunStore store;
  store.addRun(QStringLiteral("run 1"), QStringLiteral("fp32"), Qt::blue, ui_test::config("fp32"));
  std::vector<engine::Record> records;
  for (int s = 1; s <= 3; ++s) {
    engine::StepMetrics m = ui_test::step(0, s, 1.0);
    m.mem.weights = 3'490'000;
    m.mem.activations = s == 2 ? 210'000 : 0;  // the peak is step 2's
    records.emplace_back(m);
  }
  ui_test::feed(store, records);
  const RunData& run = store.run(0);
  ASSERT_GT(run.peak_memory, run.steps.back().mem.total());

  QStatusBar bar;
  StatusReadouts readouts(&bar);
  readouts.showRun(&run);
  auto* memory = bar.findChild<QLabel*>(QStringLiteral("statusMemory"));
  ASSERT_NE(memory, nullptr);
  const QLocale locale;
  const QString now = locale.formattedDataSize(run.steps.back().mem.total());
  const QString peak = locale.formattedDataSize(run.peak_memory);
  ASSERT_NE(now, peak);
  EXPECT_EQ(memory->text(), QStringLiteral("memory %1, peak %2").arg(now, peak));
  // The peak is the summary's: what the Compare table and the export show.
  EXPECT_EQ(run.summarize(1.0).peak_memory_bytes, run.peak_memory);

  readouts.showRun(nullptr);
  EXPECT_EQ(memory->text(), QStringLiteral("memory —"));
}

}  // namespace
