// precision-lab-cli export-pytorch: a run folder's run as a PyTorch script (engine/bridge/pytorch_export.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bridge/pytorch_export.h"
#include "cli/commands.h"

namespace cli {

namespace {

constexpr const char* kUsage =
    "usage: precision-lab-cli export-pytorch RUN_DIR --out DIR [--run N]\n"
    "  writes DIR/train.py, a PyTorch script that trains run N (default 0) of RUN_DIR again: the same\n"
    "  initial weights and batches, the recipe as torch.autocast, GradScaler and FP32 layers; what\n"
    "  PyTorch cannot express is listed at the top of the script and here. `python3 DIR/train.py`\n"
    "  writes DIR/steps.csv with the lab's columns. RUN_DIR must keep the run's initial state\n"
    "  (precision-lab-cli run keeps it; --keep-initial on for other runs).\n";

int fail(const std::string& what) {
  std::fprintf(stderr, "precision-lab-cli export-pytorch: %s\n", what.c_str());
  return 2;
}

}  // namespace

int cmd_export_pytorch(int argc, char** argv) {
  std::string dir, out;
  int run = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--out" || a == "--run") {
      if (i + 1 >= argc) return fail(a + " needs a value");
      const std::string v = argv[++i];
      if (a == "--out") {
        out = v;
      } else {
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || n < 0 || n > 1000000) return fail("--run must be a run number >= 0 (got '" + v + "')");
        run = static_cast<int>(n);
      }
    } else if (a.rfind("--", 0) == 0) {
      return fail("unknown option " + a);
    } else if (dir.empty()) {
      dir = a;
    } else {
      return fail("unexpected argument '" + a + "'");
    }
  }
  if (dir.empty()) return fail("needs a run folder (RUN_DIR)");
  if (out.empty()) return fail("--out DIR is required");
  engine::PytorchExport r;
  try {
    r = engine::export_pytorch(dir, out, run);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  std::printf("wrote %s (run %d, \"%s\"): python3 %s writes steps.csv beside it\n", r.script.c_str(), run,
              r.run_name.c_str(), r.script.c_str());
  if (r.untranslated.empty()) {
    std::printf("not translated: nothing (every part of the recipe has a PyTorch form)\n");
  } else {
    std::printf("not translated (PyTorch cannot express it; listed at the top of train.py too):\n");
    for (const std::string& u : r.untranslated) std::printf("  - %s\n", u.c_str());
  }
  return 0;
}

}  // namespace cli
