// precision-lab-cli lecture: list the presets, run one, check its claims.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/registry.h"
#include "cli/commands.h"
#include "cli/parse_args.h"
#include "lecture/claims.h"
#include "lecture/preset.h"
#include "lecture/solve_lesson.h"

namespace cli {

namespace {

constexpr const char* kUsage =
    "usage: precision-lab-cli lecture --list\n"
    "       precision-lab-cli lecture NAME|FILE.json --out DIR [--check] [--quick]\n"
    "  --list   the built-in presets, one line each\n"
    "  --check  print every claim of the preset with its value, PASS or FAIL; exit 1 if any fails\n"
    "           (a run that diverges is a result the claims judge, not a failure; a claim that needs\n"
    "           a backend the runs did not have is SKIP with the reason, and a lesson whose every\n"
    "           claim needs a missing backend (gpu-*: cuda) is not trained)\n"
    "  --quick  the preset's scaled-down settings (what the test suite runs)\n"
    "a training lesson writes run's files (steps.csv, summary.csv, ...); a solver lesson (solve-*)\n"
    "writes solve's (iterations.csv, summary.csv, solution.csv, config.json; docs/solver.md)\n";

int bad_input(const std::string& message) {
  std::fprintf(stderr, "precision-lab-cli lecture: %s\n", message.c_str());
  return 2;
}

void list() {
  for (const engine::Preset& p : engine::builtin_presets()) {
    std::string runs;
    for (const engine::PresetRun& r : p.runs) runs += (runs.empty() ? "" : ",") + r.name;
    for (const engine::SolveRun& r : p.solve_runs) runs += (runs.empty() ? "" : ",") + r.name;
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

// Prints the claims' results; the exit code: 1 when one fails.
// A skipped claim (it needs a backend the runs did not have) is neither.
int print_claims(const engine::Preset& preset, const std::vector<engine::ClaimResult>& results) {
  int failed = 0, skipped = 0;
  std::printf("\nclaims of %s:\n", preset.name.c_str());
  for (const engine::ClaimResult& r : results) {
    std::printf("  %s\n", r.text.c_str());
    skipped += r.skipped ? 1 : 0;
    failed += r.pass || r.skipped ? 0 : 1;
  }
  std::printf("%zu passed, %d failed", results.size() - static_cast<std::size_t>(failed + skipped), failed);
  if (skipped > 0) std::printf(", %d skipped", skipped);
  std::printf("\n");
  return failed > 0 ? 1 : 0;
}

// When every claim of the lesson needs a backend this machine lacks (a GPU
// lesson on a CPU), what it has in one line ("cpu (no CUDA device: ...)"),
// else "": training a GPU-sized model for minutes would show nothing.
std::string missing_backend(const engine::Preset& preset) {
  const std::string needed = engine::required_backend(preset);
  if (needed.empty()) return "";
  for (const engine::BackendAvailability& b : engine::available_backends())
    if (b.name == needed) return b.available ? "" : "cpu (" + b.reason + ")";
  return "cpu (no " + needed + " backend in this build)";
}


std::string short_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A solver lesson: its system solved by every run, the solver's files
// (as `solve` writes them; config.json names the lesson and its system),
// the claims. A run that does not converge is a result, as in `solve`.
int solve_lesson(const engine::Preset& preset, const std::string& out, bool check, bool quick) {
  const engine::SolveProblem& s = preset.problem;
  std::printf("solve: n = %lld, random, cond %g, seed %llu%s, b = A x for a random x\n", static_cast<long long>(s.n),
              s.cond, static_cast<unsigned long long>(s.seed),
              s.matrix_scale != 1.0 ? (", entries times " + short_number(s.matrix_scale)).c_str() : "");
  engine::SolveLesson lesson;
  try {
    engine::BackendChoice be = engine::make_backend("cpu", 0);
    print_solve_header();
    // Each run's line as it finishes, so a class sees them come.
    lesson = engine::run_solve_lesson(preset, be.backend.get(),
                                      [](const engine::SolveRun& r) { print_solve_row(r, true); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "precision-lab-cli lecture: %s\n", e.what());
    return 1;
  }
  const std::string cfg =
      "{\n  \"command\": \"lecture\",\n  \"lesson\": \"" + preset.name + "\",\n  \"quick\": " +
      (quick ? "true" : "false") + ",\n  \"matrix\": \"random\",\n  \"n\": " + std::to_string(s.n) +
      ",\n  \"cond\": " + exact(s.cond) + ",\n  \"seed\": " + std::to_string(s.seed) +
      ",\n  \"matrix_scale\": " + exact(s.matrix_scale) + ",\n  \"rhs\": \"A x, x random from seed + 1\"\n}\n";
  const int written = write_solve_files("lecture", out,
                                        {{"iterations.csv", solve_iterations_csv(lesson.runs)},
                                         {"summary.csv", solve_summary_csv(lesson.runs, s.n, s.cond)},
                                         {"solution.csv", solve_solution_csv(lesson.runs, s.n, lesson.x_true)},
                                         {"config.json", cfg}});
  if (written != 0) return written;
  std::printf("wrote %s/{iterations.csv, summary.csv, solution.csv, config.json}\n", out.c_str());
  if (!check) return 0;
  return print_claims(preset, engine::check_claims(preset, lesson.runs));
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
  if (preset.kind == engine::PresetKind::Solve) return solve_lesson(preset, out, check, quick);
  if (const std::string here = missing_backend(preset); !here.empty()) {
    std::printf("not trained: every claim of %s needs the %s backend; this machine has %s\n", preset.name.c_str(),
                engine::required_backend(preset).c_str(), here.c_str());
    if (!check) return 0;
    return print_claims(preset, engine::check_claims(preset, {}, here));
  }
  std::vector<engine::ComparisonRun> runs;
  for (const engine::PresetRun& r : preset.runs) runs.push_back({r.name, r.config});
  std::vector<engine::RunExport> exports;
  const int code = train_runs(runs, out, exports);
  // A run that diverged (its loss went NaN or inf) is what some lessons
  // show, so with --check its claims judge it; any other failure, a run
  // that stopped short without diverging, ends the lecture as it ends `run`.
  if (code != 0 && !(check && code == 1 && only_divergence(exports))) return code;
  if (!check) return 0;
  return print_claims(preset, engine::check_claims(preset, exports));
}

}  // namespace cli
