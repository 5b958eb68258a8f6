// precision-lab-cli replay: repeat a run folder, live changes at the same steps.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "journal/journal.h"

namespace cli {

int cmd_replay(int argc, char** argv) {
  std::string dir, out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::puts("usage: precision-lab-cli replay DIR --out DIR2\n"
                "  repeats the runs of folder DIR (runs.json) with every live change of commands.jsonl\n"
                "  at the step it took effect, each run stopping where it stopped; DIR2 gets the same\n"
                "  files, equal to DIR's but for the measured columns (wall_ms, samples_per_second, rss)");
      return 0;
    }
    if (a == "--out") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "precision-lab-cli replay: --out needs a folder\n");
        return 2;
      }
      out = argv[++i];
    } else if (a.rfind("--out=", 0) == 0) {
      out = a.substr(6);
    } else if (a.rfind("--", 0) == 0 || !dir.empty()) {
      std::fprintf(stderr, "precision-lab-cli replay: unexpected argument '%s' (usage: replay DIR --out DIR2)\n", a.c_str());
      return 2;
    } else {
      dir = a;
    }
  }
  if (dir.empty() || out.empty()) {
    std::fprintf(stderr, "precision-lab-cli replay: usage: replay DIR --out DIR2\n");
    return 2;
  }
  engine::JournalContents j;
  try {
    j = engine::read_journal(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "precision-lab-cli replay: %s\n", e.what());
    return 2;
  }
  std::vector<engine::ComparisonRun> runs;
  Replay replay;
  replay.changes = j.commands;
  for (const engine::JournalEntry& e : j.runs) {
    runs.push_back({e.name, e.config});
    // A run that did not finish ends where it stopped (or was interrupted).
    const bool ended_early = e.status == "stopped" || e.status == "interrupted" || e.status == "failed";
    replay.stop_at.push_back(ended_early && e.status != "failed" ? e.steps : 0);
  }
  std::printf("replaying %s (%zu runs, %zu live changes)\n", dir.c_str(), runs.size(), replay.changes.size());
  std::vector<engine::RunExport> exports;
  return train_runs(runs, out, exports, &replay);
}

}  // namespace cli
