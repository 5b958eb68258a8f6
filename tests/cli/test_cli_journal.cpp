// A CLI run killed with SIGKILL mid-run leaves a folder that reads back as
// interrupted with its data up to the last second, and `replay` repeats it
// bit for bit (measured columns aside).
#include <gtest/gtest.h>

#include <algorithm>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "cli/cli_runner.h"
#include "report/csv.h"
#include "journal/journal.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using cli_test::RunResult;
using cli_test::run_cli;

std::size_t rows(const fs::path& csv) {
  try {
    return engine::read_csv(csv.string()).rows.size();
  } catch (const std::exception&) {
    return 0;
  }
}

TEST(CliJournal, KilledMidRunTheFolderKeepsItsDataAndReplays) {
  const fs::path dir = cli_test::temp_path("journal_killed"), again = cli_test::temp_path("journal_again");
  std::fflush(nullptr);  // nothing buffered twice
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: a long comparison, its output away from the test's.
    freopen("/dev/null", "w", stdout);
    execl(PL_CLI_PATH, PL_CLI_PATH, "compare", "--recipes", "fp32,mixed-fp16", "--dataset", "spirals", "--steps",
          "1000000", "--batch", "32", "--threads", "1", "--stats-every", "50", "--out", dir.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until rows are on disk, then a little more, then kill it hard.
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  while (rows(dir / "steps.csv") < 200 && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(1500ms);
  const std::size_t seen = rows(dir / "steps.csv");
  ASSERT_GE(seen, 200u);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  const engine::JournalContents j = engine::read_journal(dir.string());
  EXPECT_TRUE(j.interrupted);
  EXPECT_EQ(j.status, "interrupted");
  ASSERT_EQ(j.runs.size(), 2u);
  for (const engine::JournalEntry& e : j.runs) EXPECT_EQ(e.status, "interrupted");
  // Everything up to the last second: at least what was on disk 1.5 s
  // before the kill.
  const std::size_t kept = j.exports[0].history.steps.size() + j.exports[1].history.steps.size();
  EXPECT_GE(kept, seen);

  const RunResult r = run_cli("replay '" + dir.string() + "' --out '" + again.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const engine::JournalContents k = engine::read_journal(again.string());
  EXPECT_EQ(k.status, "stopped");
  for (int run = 0; run < 2; ++run) {
    const auto& a = j.exports[run].history.steps;
    const auto& b = k.exports[run].history.steps;
    ASSERT_EQ(b.size(), a.size()) << "run " << run << " stops where it was interrupted";
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].loss, b[i].loss) << "run " << run << " step " << a[i].step;
      ASSERT_EQ(a[i].grad_norm, b[i].grad_norm) << "run " << run << " step " << a[i].step;
      ASSERT_EQ(a[i].loss_scale, b[i].loss_scale) << "run " << run << " step " << a[i].step;
    }
  }
  fs::remove_all(dir);
  fs::remove_all(again);
}

TEST(CliJournal, ReplayOfAMissingOrBrokenFolderIsOneLine) {
  const RunResult missing = run_cli("replay /nonexistent/run --out /tmp/unused");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "precision-lab-cli replay: /nonexistent/run/status.json: cannot open\n");
  const RunResult usage = run_cli("replay");
  EXPECT_EQ(usage.exit_code, 2);
}

}  // namespace

// A data set that does not load: the run never starts. It printed "wrote
// …/{steps,evals,…}.csv" after its error and left header-only CSVs; now one
// line names what failed, the exit code says so, and the folder holds what
// was asked and a status.json saying failed and why, no result files.
TEST(CliJournal, ARunWhoseDataDoesNotLoadLeavesAFailedStatusAndNoEmptyResults) {
  const fs::path dir = cli_test::temp_path("journal_nodata");
  const fs::path data = cli_test::temp_path("journal_nodata_set");
  fs::create_directories(data);  // a folder without the IDX files
  const RunResult r = run_cli("run --dataset '" + data.string() + "' --steps 10 --threads 1 --out '" + dir.string() + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out.find("wrote"), std::string::npos) << r.out;
  // One line, naming the data set's file.
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(data.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("failed"), std::string::npos) << r.err;
  for (const char* file : {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv", "commands.jsonl"})
    EXPECT_FALSE(fs::exists(dir / file)) << file;
  EXPECT_TRUE(fs::exists(dir / "config.json"));
  const engine::JournalContents j = engine::read_journal(dir.string());
  EXPECT_EQ(j.status, "failed");
  ASSERT_EQ(j.runs.size(), 1u);
  EXPECT_EQ(j.runs[0].status, "failed");
  EXPECT_NE(j.runs[0].message.find(data.string()), std::string::npos) << j.runs[0].message;
  EXPECT_TRUE(j.exports[0].history.steps.empty());
  const std::string status = cli_test::read_file((dir / "status.json").string());
  EXPECT_NE(status.find("\"message\""), std::string::npos) << status;
  fs::remove_all(dir);
  fs::remove_all(data);
}
