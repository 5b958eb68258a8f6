#!/usr/bin/env python3
"""The PyTorch peer on the GPU: Precision Lab's training throughput against
PyTorch's on the same card, in one sitting.

    python3 tests/bench/pytorch_gpu_peer.py --run RUN_DIR [--run RUN_DIR ...] \\
        --bench build/release/tests/bench/bench_train
    python3 tests/bench/pytorch_gpu_peer.py --run RUN_DIR --bench-log default=bench_train_cuda.log

Each --run is a folder our `precision-lab-cli run ... --out DIR` wrote: its
config.json gives the model and its size ("model", "widths", "channels",
"depth", "width", "heads", "context", "batch"; a field that is absent is the
model's default today: mlp 784-256-128-10, cnn channels 32/64 and a 128
hidden layer, transformer width 64, 4 heads, depth 2, gpt 4 layers, width
128, 4 heads, context 64) and the optimizer ("optimizer", "lr", "momentum",
"weight_decay", "clip"). Its "size" field, when the CLI wrote one, names the
size (default or gpu); without it the size is "default" when the shape is
the model's default and "custom" otherwise; --run SIZE=DIR names it.

PyTorch trains the same model (tests/bench/pytorch_peer.py's builders) at
the same batch on random inputs of the run's shape, the training step only
(forward, cross-entropy, backward, clipping when the run clips, optimizer
step), per recipe of ours:
  fp32        eager fp32 (TF32 off for matmuls and cuDNN: our fp32 is FP32)
  mixed-bf16  eager under torch.autocast(bfloat16)
  mixed-fp16  eager under torch.autocast(float16) with a GradScaler
and, for the recipes --compile names, the same step of torch.compile(model)
(default mode); where compiling fails the cell says "skipped" and the
exception's first line is printed under the table. Timing: --warmup steps,
then --rounds windows of --steps steps, each between two
torch.cuda.synchronize() calls (on the GPU); the best window counts.

Ours: bench_train's samples/s for the same model and recipe on the same
backend (--device cuda: rows train/<model>@cuda/<recipe> of
`bench_train --backend=cuda`, with `--size SIZE` for a size other than
default; --device cpu: the CPU rows), either run here (--bench, one run per
size) or read from its saved output (--bench-log SIZE=FILE). bench_train
must train the same shapes and batch as the runs given: at the default size
it trains batch 128 (gpt: 32, the nanoGPT baby), which the runs then need.

Prints one row per model, size and recipe: ours, PyTorch eager, the ratio
(ours / PyTorch), PyTorch compiled and its ratio; then the verdict of the
GPU issue's target: ours >= 1.0x PyTorch eager autocast (mixed-bf16) and
eager fp32 on every model and size.

--device cpu (with Debian's torch 1.13, which has no torch.compile, and CPU
autocast in bfloat16 only) is the smoke test's way to run all of it without
a GPU. Exits 1 with one line when torch is missing, a run folder or a
bench_train log is unusable, or bench_train fails.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_peer  # noqa: E402  (the model builders and the text reader)

RECIPES = ["fp32", "mixed-bf16", "mixed-fp16"]
# Ours against PyTorch eager in these recipes: the target.
TARGET, TARGET_RECIPES = 1.0, ("fp32", "mixed-bf16")
# The models' default sizes (engine/nn/model.h, engine/train/run_config.h).
DEFAULTS = {
    "mlp": {"widths": [256, 128]},
    "cnn": {"channels": [32, 64], "hidden": 128},
    "transformer": {"width": 64, "heads": 4, "depth": 2},
    "gpt": {"depth": 4, "width": 128, "heads": 4, "context": 64},
}
GPT_VOCAB = 155  # the Jargon File's characters: the gpt's head when the text is not here


def fail(msg):
    sys.exit(f"pytorch_gpu_peer: {msg}")


def read_run(folder):
    """A run folder's model, shape, batch, optimizer and size label."""
    path = os.path.join(folder, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            c = json.load(f)
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    except json.JSONDecodeError as e:
        fail(f"{path}: not JSON ({e.msg}, line {e.lineno})")
    model = c.get("model")
    if model not in DEFAULTS:
        fail(f"{path}: model {model!r} is not one of {', '.join(DEFAULTS)}")

    def integer(key, default, low=1):
        v = c.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            fail(f"{path}: {key} must be an integer >= {low} (got {v!r})")
        return v

    def integers(key, default, count=None):
        v = c.get(key, default)
        if not isinstance(v, list) or not v or not all(isinstance(x, int) and x >= 1 for x in v):
            fail(f"{path}: {key} must be a list of positive integers (got {v!r})")
        if count and len(v) not in count:
            fail(f"{path}: {key} must hold {' or '.join(map(str, count))} numbers (got {len(v)})")
        return v

    d = DEFAULTS[model]
    shape = {}
    if model == "mlp":
        shape["widths"] = integers("widths", d["widths"])
    elif model == "cnn":
        ch = integers("channels", d["channels"], (2, 3))
        shape["channels"] = ch[:2]
        shape["hidden"] = ch[2] if len(ch) == 3 else d["hidden"]
    else:
        for key in ("width", "heads", "depth") + (("context",) if model == "gpt" else ()):
            shape[key] = integer(key, d[key])
        if shape["width"] % shape["heads"]:
            fail(f"{path}: width {shape['width']} is not a multiple of heads {shape['heads']}")
    size = c.get("size")
    if not isinstance(size, str) or not size:
        size = "default" if shape == d else "custom"
    opt = {"optimizer": c.get("optimizer", "adamw" if model == "gpt" else "sgd"),
           "lr": float(c.get("lr", 1e-3 if model == "gpt" else 0.05)),
           "momentum": float(c.get("momentum", 0.9)), "weight_decay": float(c.get("weight_decay", 0.0)),
           "clip": float(c.get("clip", 1.0 if model == "gpt" else 0.0))}
    if opt["optimizer"] not in ("sgd", "adam", "adamw"):
        fail(f"{path}: optimizer {opt['optimizer']!r} is not sgd, adam or adamw")
    return {"folder": folder, "model": model, "shape": shape, "batch": integer("batch", 32 if model == "gpt" else 128),
            "dataset": c.get("dataset", ""), "size": size, "opt": opt}


def shape_text(run):
    s, m = run["shape"], run["model"]
    if m == "mlp":
        return "784-" + "-".join(map(str, s["widths"])) + "-10"
    if m == "cnn":
        return f"conv {s['channels'][0]}/{s['channels'][1]}, fc {s['hidden']}"
    text = f"w{s['width']} h{s['heads']} d{s['depth']}"
    return text + (f" ctx{s['context']}" if m == "gpt" else "")


def gpt_vocab(dataset):
    """The run's vocabulary: its text's distinct characters when the text is
    on this machine, else the Jargon File's count."""
    spec = "jargon" if dataset in ("", "jargon", "text:jargon") else dataset
    path = pytorch_peer.JARGON if spec == "jargon" else spec[5:] if spec.startswith("text:") else spec
    if not os.path.exists(path):
        return GPT_VOCAB
    return len(pytorch_peer.load_text(spec)[2])


class Trainer:
    """One model's training step in PyTorch under one recipe, eager or compiled."""

    def __init__(self, torch, run, recipe, device, compiled):
        self.torch, self.device, self.batch = torch, device, run["batch"]
        torch.manual_seed(0)
        s, o = run["shape"], run["opt"]
        if run["model"] == "gpt":
            g = dict(pytorch_peer.GPT, layers=s["depth"], width=s["width"], heads=s["heads"], context=s["context"])
            vocab = gpt_vocab(run["dataset"])
            self.model = pytorch_peer.make_gpt(torch, vocab, g).to(device)
            self.x = torch.randint(0, vocab, (self.batch, s["context"]), device=device)
            self.y = torch.randint(0, vocab, (self.batch, s["context"]), device=device)
            self.loss = lambda model, x, y: model(x, y)
            self.opt = pytorch_peer.gpt_optimizer(torch, self.model, o["lr"], o["weight_decay"], 0.999)
        else:
            self.model = pytorch_peer.make_image_model(
                torch, run["model"], widths=s.get("widths", (256, 128)), channels=s.get("channels", (32, 64)),
                hidden=s.get("hidden", 128), dim=s.get("width", 64), heads=s.get("heads", 4),
                depth=s.get("depth", 2)).to(device)
            self.x = torch.randn(self.batch, 1, 28, 28, device=device)
            self.y = torch.randint(0, 10, (self.batch,), device=device)
            self.loss = lambda model, x, y: torch.nn.functional.cross_entropy(model(x), y)
            params = self.model.parameters()
            if o["optimizer"] == "sgd":
                self.opt = torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"], weight_decay=o["weight_decay"])
            elif o["optimizer"] == "adamw":
                self.opt = torch.optim.AdamW(params, lr=o["lr"], weight_decay=o["weight_decay"])
            else:
                self.opt = torch.optim.Adam(params, lr=o["lr"], weight_decay=o["weight_decay"])
        self.clip = o["clip"]
        self.forward_model = self.model
        if compiled:
            if not hasattr(torch, "compile"):
                raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
            self.forward_model = torch.compile(self.model)
        self.dtype = {"fp32": None, "mixed-bf16": torch.bfloat16, "mixed-fp16": torch.float16}[recipe]
        self.scaler = None
        if recipe == "mixed-fp16":
            amp = getattr(torch, "amp", None)
            if amp is not None and hasattr(amp, "GradScaler"):
                self.scaler = amp.GradScaler(device)  # torch >= 2.3
            else:
                self.scaler = torch.cuda.amp.GradScaler(enabled=(device == "cuda"))

    def step(self):
        torch = self.torch
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(self.device, dtype=self.dtype or torch.bfloat16, enabled=self.dtype is not None):
            loss = self.loss(self.forward_model, self.x, self.y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            if self.clip > 0:
                self.scaler.unscale_(self.opt)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            if self.clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.opt.step()


def measure(torch, run, recipe, device, compiled, a):
    """Best samples/s over the rounds; raises what building or a step raised."""
    t = Trainer(torch, run, recipe, device, compiled)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(a.warmup):  # the first steps build plans, autotune, compile
        t.step()
    sync()
    best = 0.0
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            t.step()
        sync()
        best = max(best, a.steps * t.batch / (time.perf_counter() - t0))
    del t
    if device == "cuda":
        torch.cuda.empty_cache()
    return best


def first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".strip()


ROW = re.compile(r"^\s+(\S+)\s+(\S+)\s+(\d+) samples/s")


def parse_bench(text, device):
    """(model, recipe) -> samples/s from bench_train's summary lines."""
    rates = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        model, recipe, rate = m.group(1), m.group(2), float(m.group(3))
        if device == "cuda":
            if not model.endswith("@cuda"):
                continue
            model = model[:-len("@cuda")]
        elif "@" in model:
            continue
        rates[(model, recipe)] = rate
    return rates


def run_bench(bench, size, device, models, recipes):
    cmd = [bench, f"--backend={'cuda' if device == 'cuda' else 'cpu'}",
           f"--benchmark_filter=^train/({'|'.join(models)})(@cuda)?/({'|'.join(recipes)})/"]
    if size != "default":
        # A bench_train without the option would ignore it and time the default sizes.
        with open(bench, "rb") as f:
            if b"--size" not in f.read():
                print(f"  ours: {bench} has no --size option: no figures of ours at the {size} size")
                return ""
        cmd.insert(2, f"--size={size}")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"{' '.join(cmd[:3])} failed (exit {out.returncode}): "
             f"{(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", default=[], metavar="[SIZE=]DIR",
                    help="a run folder of ours (its config.json); SIZE= names its size (else config.json's)")
    ap.add_argument("--bench", help="bench_train to run, once per size")
    ap.add_argument("--bench-log", action="append", default=[], metavar="SIZE=FILE",
                    help="bench_train's saved output for the runs of that size, instead of running it")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--recipes", default=",".join(RECIPES), help="ours: fp32, mixed-bf16, mixed-fp16")
    ap.add_argument("--compile", default="fp32,mixed-bf16",
                    help="recipes also measured under torch.compile ('' for none)")
    ap.add_argument("--compile-sizes", default="", help="sizes whose runs are compiled ('' for every size)")
    ap.add_argument("--compile-budget", type=float, default=240.0,
                    help="seconds of compiled measurements (compiling included); the rest are skipped")
    ap.add_argument("--warmup", type=int, default=10, help="steps before timing")
    ap.add_argument("--steps", type=int, default=50, help="steps in one timed window")
    ap.add_argument("--rounds", type=int, default=3, help="timed windows (the best counts)")
    a = ap.parse_args()
    if not a.run:
        fail("no --run folder given (precision-lab-cli run ... --out DIR writes one)")
    if a.steps < 1 or a.rounds < 1 or a.warmup < 0:
        fail("--steps and --rounds must be >= 1, --warmup >= 0")
    recipes = [r for r in a.recipes.split(",") if r]
    for r in recipes:
        if r not in RECIPES:
            fail(f"--recipes: {r!r} is not one of {', '.join(RECIPES)}")
    compiled_recipes = [r for r in a.compile.split(",") if r]
    compile_sizes = [s for s in a.compile_sizes.split(",") if s]
    runs = []
    for spec in a.run:
        size, sep, folder = spec.partition("=")
        run = read_run(folder if sep and size and "/" not in size else spec)
        if sep and size and "/" not in size:
            run["size"] = size
        runs.append(run)
    try:
        import torch
    except ImportError as e:
        fail(f"PyTorch is not installed for {sys.executable} ({e})")
    if a.device == "cuda" and not torch.cuda.is_available():
        fail(f"torch {torch.__version__} sees no CUDA device (--device cpu measures on the CPU)")
    if a.device == "cuda":
        # Our fp32 recipe is FP32 throughout: no TF32 on PyTorch's side either.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        where = torch.cuda.get_device_name(0)
    else:
        where = f"CPU, {torch.get_num_threads()} threads"

    # Ours, per size.
    logs = {}
    for spec in a.bench_log:
        size, sep, path = spec.partition("=")
        if not sep or not size or not path:
            fail(f"--bench-log {spec!r}: expected SIZE=FILE")
        try:
            with open(path, encoding="utf-8") as f:
                logs[size] = f.read()
        except OSError as e:
            fail(f"{path}: cannot read ({e.strerror})")
    sizes = list(dict.fromkeys(r["size"] for r in runs))
    if a.bench and not (os.access(a.bench, os.X_OK)):
        fail(f"{a.bench}: not found or not executable")
    for size in sizes:
        # bench_train knows its presets' sizes only: a custom shape needs its saved output.
        if size not in logs and a.bench and size in ("default", "gpu"):
            models = sorted({r["model"] for r in runs if r["size"] == size})
            logs[size] = run_bench(a.bench, size, a.device, models, recipes)
    ours = {size: parse_bench(text, a.device) for size, text in logs.items()}

    print(f"PyTorch {torch.__version__} ({sys.executable}) on {where}; "
          f"best of {a.rounds} windows of {a.steps} steps after {a.warmup} warm-up steps; "
          f"ours: {a.bench or 'saved bench_train output'}")
    header = (f"{'model':<12} {'size':<8} {'shape':<24} {'batch':>5} {'recipe':<11} {'ours':>10} "
              f"{'torch eager':>12} {'ratio':>6} {'torch compiled':>15} {'ratio':>6}")
    print(header + "   (samples/s)")
    notes, cells, missed, absent = [], 0, [], []
    compile_spent = 0.0
    for run in runs:
        for recipe in recipes:
            o = ours.get(run["size"], {}).get((run["model"], recipe), 0.0)
            eager = compiled = None
            eager_text = compiled_text = "skipped"
            try:
                eager = measure(torch, run, recipe, a.device, False, a)
                eager_text = f"{eager:.0f}"
            except Exception as e:  # a recipe this torch or device cannot run: a cell, not the end
                notes.append(f"torch eager {run['model']} {run['size']} {recipe}: skipped: {first_line(e)}")
            if recipe in compiled_recipes and (not compile_sizes or run["size"] in compile_sizes):
                if compile_spent >= a.compile_budget:
                    notes.append(f"torch compiled {run['model']} {run['size']} {recipe}: skipped: "
                                 f"the compile budget of {a.compile_budget:.0f} s is spent")
                else:
                    t0 = time.perf_counter()
                    try:
                        compiled = measure(torch, run, recipe, a.device, True, a)
                        compiled_text = f"{compiled:.0f}"
                    except Exception as e:
                        notes.append(f"torch compiled {run['model']} {run['size']} {recipe}: skipped: {first_line(e)}")
                    compile_spent += time.perf_counter() - t0
            else:
                compiled_text = "-"
            ratio = lambda p: f"{o / p:5.2f}x" if o > 0 and p else "    -"
            print(f"{run['model']:<12} {run['size']:<8} {shape_text(run):<24} {run['batch']:>5} {recipe:<11} "
                  f"{(f'{o:.0f}' if o > 0 else '-'):>10} {eager_text:>12} {ratio(eager):>6} {compiled_text:>15} "
                  f"{ratio(compiled):>6}", flush=True)
            if recipe in TARGET_RECIPES:
                if o <= 0:
                    absent.append(f"{run['model']} {run['size']} {recipe}")
                elif eager:
                    cells += 1
                    if o / eager < TARGET:
                        missed.append(f"{run['model']} {run['size']} {recipe} {o / eager:.2f}x")
    for n in notes:
        print("  " + n)
    if absent:
        print(f"  ours: bench_train has no row for {', '.join(absent)}")
    if cells == 0:
        verdict = "not measured (no cell has both figures)"
    elif missed:
        verdict = f"missed in {len(missed)} of {cells}: {', '.join(missed)}"
    else:
        verdict = f"met in {cells} of {cells}" + (f" ({len(absent)} without our figure)" if absent else "")
    print(f"verdict peer: ours >= {TARGET:.1f}x PyTorch eager ({', '.join(TARGET_RECIPES)}) on every model and size: "
          f"{verdict}")


if __name__ == "__main__":
    main()
