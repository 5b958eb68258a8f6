// precision-lab-cli lecture: list the presets, run one, check its claims.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "lecture/claims.h"
#include "lecture/preset.h"

namespace cli {

namespace {

constexpr const char* kUsage =
    "usage: precision-lab-cli lecture --list\n"
    "       precision-lab-cli lecture NAME|FILE.json --out DIR [--check] [--quick]\n"
    "  --list   the built-in presets, one line each\n"
    "  --check  print every claim of the preset with its value, PASS or FAIL; exit 1 if any fails\n"
    "           (a run that diverges is a result the claims judge, not a failure)\n"
    "  --quick  the preset's scaled-down settings (what the test suite runs)\n";

int bad_input(const std::string& message) {
  std::fprintf(stderr, "precision-lab-cli lecture: %s\n", message.c_str());
  return 2;
}

void list() {
  for (const engine::Preset& p : engine::builtin_presets()) {
    std::string runs;
    for (const engine::PresetRun& r : p.runs) runs += (runs.empty() ? "" : ",") + r.name;
    std::printf("%-24s %s  [%s]\n", p.name.c_str(), p.title.c_str(), runs.c_str());
  }
}

// True when every run that stopped before the longest one ended with a
// NaN/inf loss (an EventKind::NanLoss), and at least one did.
bool only_divergence(const std::vector<engine::RunExport>& runs) {
  std::int64_t longest = 0;
  for (const engine::RunExport& r : runs) longest = std::max(longest, r.summary.steps);
  bool diverged_any = false;
  for (const engine::RunExport& r : runs) {
    bool diverged = false;
    for (const engine::Event& e : r.history.events) diverged = diverged || e.kind == engine::EventKind::NanLoss;
    if (!diverged && r.summary.steps < longest) return false;
    diverged_any = diverged_any || diverged;
  }
  return diverged_any;
}

}  // namespace

int cmd_lecture(int argc, char** argv) {
  std::string what, out;
  bool check = false, quick = false, list_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--list") list_only = true;
    else if (a == "--check") check = true;
    else if (a == "--quick") quick = true;
    else if (a == "--out") {
      if (i + 1 >= argc) return bad_input("--out needs a folder");
      out = argv[++i];
    } else if (a.rfind("--out=", 0) == 0) out = a.substr(6);
    else if (a.rfind("--", 0) == 0) return bad_input("unknown option '" + a + "'");
    else if (!what.empty()) return bad_input("one preset at a time (got '" + what + "' and '" + a + "')");
    else what = a;
  }
  if (list_only) {
    list();
    return 0;
  }
  if (what.empty()) return bad_input("which preset? (--list shows them)");
  if (out.empty()) return bad_input("--out DIR is required");
  engine::Preset preset;
  try {
    preset = engine::find_preset(what);
    if (quick) preset = engine::quick_version(preset);
  } catch (const std::exception& e) {
    return bad_input(e.what());
  }
  std::printf("%s\n%s\n\n", preset.title.c_str(), preset.explanation.c_str());
  if (quick && !preset.quick_note.empty()) std::printf("quick: %s\n\n", preset.quick_note.c_str());
  std::vector<engine::ComparisonRun> runs;
  for (const engine::PresetRun& r : preset.runs) runs.push_back({r.name, r.config});
  std::vector<engine::RunExport> exports;
  const int code = train_runs(runs, out, exports);
  // A run that diverged (its loss went NaN or inf) is what some lessons
  // show, so with --check its claims judge it; any other failure, a run
  // that stopped short without diverging, ends the lecture as it ends `run`.
  if (code != 0 && !(check && code == 1 && only_divergence(exports))) return code;
  if (!check) return 0;
  int failed = 0;
  std::printf("\nclaims of %s:\n", preset.name.c_str());
  for (const engine::ClaimResult& r : engine::check_claims(preset, exports)) {
    std::printf("  %s\n", r.text.c_str());
    failed += r.pass ? 0 : 1;
  }
  std::printf("%zu passed, %d failed\n", preset.expect.size() - static_cast<std::size_t>(failed), failed);
  return failed > 0 ? 1 : 0;
}

}  // namespace cli
