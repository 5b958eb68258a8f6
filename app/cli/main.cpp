// precision-lab-cli: the command-line front end (README.md "Command line").
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/commands.h"

namespace {
void print_usage(std::FILE* out) {
  std::fputs(
      "usage: precision-lab-cli <command> [options]\n"
      "\n"
      "commands:\n"
      "  run      [--config FILE.json] [--recipe R] [--model mlp|cnn|transformer|gpt]\n"
      "           [--dataset fashion-mnist|spirals|tiny-gradients|jargon|text:FILE|DIR] [--epochs N | --steps N]\n"
      "           [--batch N] [--optimizer sgd|adam|adamw] [--lr X] [--seed N]\n"
      "           [--backend auto|cpu|cuda] --out DIR\n"
      "           more: --momentum --weight-decay --schedule constant|cosine --warmup N --clip X\n"
      "                 --threads N --eval-every N --eval-batches N --stats-every N\n"
      "                 --loss-scale none|static|dynamic --loss-scale-init X --growth-factor X\n"
      "                 --backoff-factor X --growth-interval N\n"
      "                 --master-weights true|false --weight-rounding nearest|stochastic\n"
      "                 --fp8-scaling delayed|none --grad-rounding recipe|nearest|stochastic\n"
      "                 --spike STEP:LAYER:VALUE --keep-initial on|off|auto (default on: initial weights\n"
      "                 and batch order kept for export-pytorch)\n"
      "           size: --size default|gpu (every model's shape and batch; the fields below override it)\n"
      "           mlp: --widths 256,128   cnn: --channels 32,64 (one conv stage each)\n"
      "           transformer: --depth N --width N --heads N (--layers N is --depth)\n"
      "           gpt:  --layers N --width N --heads N --context N --qk-norm --z-loss C\n"
      "           recipes: fp32 fp16 mixed-fp16 mixed-bf16 fp8 mxfp8 mxfp4 nvfp4 custom\n"
      "  compare  --recipes fp32,fp16,mixed-fp16 [the options of run] --out DIR\n"
      "  formats  [--value X]   table of the number formats, or X in every format with its bits\n"
      "  lecture  --list | NAME|FILE.json --out DIR [--check] [--quick]\n"
      "           lecture presets: run one, and with --check test the claims it makes\n"
      "  replay   DIR --out DIR2   repeat a run folder, live changes at the same steps\n"
      "  sample   RUN_DIR [--prompt S] [--tokens N] [--temperature T] [--seed N] [--run N]\n"
      "           text from a gpt run's final weights (a text data set: jargon, text:FILE)\n"
      "  export-pytorch RUN_DIR --out DIR [--run N]\n"
      "           the run as a PyTorch script, DIR/train.py (what does not translate is listed)\n"
      "  solve    [--matrix FILE.mtx | --n N --cond K --seed S] [--rhs FILE] --factor FMT\n"
      "           [--accumulate FMT] [--residual FMT] [--method lu-ir|gmres-ir] [--max-iter N]\n"
      "           [--compare FMT,FMT,...] --out DIR   Ax = b: low-precision LU, refined to FP64\n",
      out);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const char* cmd = argv[1];
  try {
    if (std::strcmp(cmd, "formats") == 0) return cli::cmd_formats(argc - 1, argv + 1);
    if (std::strcmp(cmd, "run") == 0) return cli::cmd_run(argc - 1, argv + 1, false);
    if (std::strcmp(cmd, "compare") == 0) return cli::cmd_run(argc - 1, argv + 1, true);
    if (std::strcmp(cmd, "lecture") == 0) return cli::cmd_lecture(argc - 1, argv + 1);
    if (std::strcmp(cmd, "replay") == 0) return cli::cmd_replay(argc - 1, argv + 1);
    if (std::strcmp(cmd, "sample") == 0) return cli::cmd_sample(argc - 1, argv + 1);
    if (std::strcmp(cmd, "export-pytorch") == 0) return cli::cmd_export_pytorch(argc - 1, argv + 1);
    if (std::strcmp(cmd, "solve") == 0) return cli::cmd_solve(argc - 1, argv + 1);
    if (std::strcmp(cmd, "--help") == 0 || std::strcmp(cmd, "-h") == 0 || std::strcmp(cmd, "help") == 0) {
      print_usage(stdout);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "precision-lab-cli: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "precision-lab-cli: unknown command '%s' (try --help)\n", cmd);
  return 2;
}
