#!/usr/bin/env python3
"""The PyTorch peer: Precision Lab's training throughput against PyTorch's,
measured in one sitting on this machine.

    python3 tests/bench/pytorch_peer.py
    python3 tests/bench/pytorch_peer.py --bench build/release/tests/bench/bench_train --rounds 3

Trains the three bundled models (mlp 784-256-128-10, cnn conv5x5 32/64 +
pools + 128, the vision transformer: 7x7 patches, width 64, 4 heads, 2 pre-LN
blocks, GELU MLP x2) in PyTorch fp32 and under torch.autocast(bfloat16) at
batch 128 with SGD (lr 0.05, momentum 0.9) on random inputs: the training
step only (forward, cross-entropy, backward, optimizer step). Each PyTorch
figure is its best over the thread counts tried (--threads, default 1 and 2;
OpenBLAS's own threads 1 or the same) and over the rounds; OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for the
PyTorch processes. bench_train runs in the same sitting (fp32 and mixed-bf16,
best of --rounds repetitions, interleaved), and the script prints samples/s
and the ratios, with the targets of the performance issue (ours >= 1.2x).

--isa avx512 or avx2 measures both sides held to a smaller ISA, a stand-in
for a CPU without AVX512-BF16 (Skylake-SP to Ice Lake) or without AVX-512:
ours with PL_MAX_CPU_ISA and DNNL_MAX_CPU_ISA, PyTorch with
ATEN_CPU_CAPABILITY, its oneDNN's DNNL_MAX_CPU_ISA and OPENBLAS_CORETYPE
(SkylakeX, Haswell). Held to AVX2, PyTorch's autocast bf16 runs with its
oneDNN off (torch.backends.mkldnn.enabled = False), as on a CPU without
AVX-512, where PyTorch's bf16 device check turns oneDNN's bf16 kernels
down: its capped oneDNN would refuse the bf16 matmul instead ("could not
create a primitive descriptor iterator").

Needs python3-torch (Debian: apt-get install python3-torch
libopenblas0-pthread); it is a benchmark peer, not a dependency of the
project. Exits 1 with one line when it is missing or bench_train fails.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

MODELS = ["mlp", "cnn", "transformer"]
BATCH = 128
TARGET = 1.2


# Both sides held to a smaller ISA (--isa): (ours, PyTorch's) environments.
ISA_CAPS = {
    "native": ({}, {}),
    "avx512": ({"PL_MAX_CPU_ISA": "avx512", "DNNL_MAX_CPU_ISA": "AVX512_CORE"},
               {"ATEN_CPU_CAPABILITY": "avx512", "DNNL_MAX_CPU_ISA": "AVX512_CORE", "OPENBLAS_CORETYPE": "SkylakeX"}),
    "avx2": ({"PL_MAX_CPU_ISA": "avx2", "DNNL_MAX_CPU_ISA": "AVX2"},
             {"ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
              "PL_PEER_BF16_NO_ONEDNN": "1"}),
}
ISA = "native"


def torch_child(model_name, mode, threads, seconds):
    """Runs in a subprocess: prints {"samples_per_s": ...} as JSON."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    if mode == "bf16" and os.environ.get("PL_PEER_BF16_NO_ONEDNN"):
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(0)

    class Attention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads, self.d = heads, dim // heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, T, C = x.shape
            qkv = self.qkv(x).reshape(B, T, 3, self.heads, self.d).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # [B, H, T, d]
            p = torch.softmax(q @ k.transpose(-2, -1) * (self.d ** -0.5), dim=-1)
            return self.proj((p @ v).transpose(1, 2).reshape(B, T, C))

    class Block(nn.Module):
        def __init__(self, dim, heads, ratio):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
            self.ln2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, ratio * dim), nn.GELU(), nn.Linear(ratio * dim, dim))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class ViT(nn.Module):
        def __init__(self, dim=64, heads=4, depth=2, ratio=2, patch=7):
            super().__init__()
            self.patch = patch
            self.embed = nn.Linear(patch * patch, dim)
            self.pos = nn.Parameter(torch.zeros(1, (28 // patch) ** 2, dim))
            self.blocks = nn.Sequential(*[Block(dim, heads, ratio) for _ in range(depth)])
            self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

        def forward(self, x):
            B, p = x.shape[0], self.patch
            patches = x.reshape(B, 28 // p, p, 28 // p, p).permute(0, 1, 3, 2, 4).reshape(B, -1, p * p)
            h = self.blocks(self.embed(patches) + self.pos)
            return self.head(self.norm(h).mean(dim=1))

    if model_name == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10))
    elif model_name == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = ViT()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(BATCH, 1, 28, 28)
    y = torch.randint(0, 10, (BATCH,))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(mode == "bf16")):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    best = 0.0
    for _ in range(3):  # three windows of `seconds`, the best one counts
        n, t0 = 0, time.perf_counter()
        while True:
            step()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= seconds:
                break
        best = max(best, n * BATCH / dt)
    print(json.dumps({"samples_per_s": best}))


def torch_env(threads=None, blas_threads=None):
    """The environment of a PyTorch process: OpenBLAS left to pick its own
    kernels; OpenMP and OpenBLAS thread counts as given."""
    env = dict(os.environ)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(k, None)
    env.update(ISA_CAPS[ISA][1])
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    if blas_threads:
        env["OPENBLAS_NUM_THREADS"] = str(blas_threads)
    return env


def find_torch_python():
    """(interpreter, torch version) of the first Python that imports torch:
    this one, else Debian's /usr/bin/python3 (python3-torch installs there,
    not into a pyenv or venv interpreter). (None, None) when none does."""
    for exe in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if not os.access(exe, os.X_OK):
            continue
        r = subprocess.run([exe, "-c", "import torch; print(torch.__version__)"], env=torch_env(),
                           capture_output=True, text=True)
        if r.returncode == 0:
            return exe, r.stdout.strip()
    return None, None


PYTHON = None


def run_torch(model, mode, threads, blas_threads, seconds):
    out = subprocess.run([PYTHON, os.path.abspath(__file__), "--child", model, mode, str(threads), str(seconds)],
                         env=torch_env(threads, blas_threads), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"pytorch_peer: PyTorch {model} {mode} ({threads} threads, OpenBLAS {blas_threads}) failed: "
                 f"{(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"]


def run_bench(bench, rounds):
    cmd = [bench, "--benchmark_filter=/(fp32|mixed-bf16)/", f"--benchmark_repetitions={rounds}",
           "--benchmark_enable_random_interleaving=true"]
    out = subprocess.run(cmd, env={**os.environ, **ISA_CAPS[ISA][0]}, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"pytorch_peer: {bench} failed (exit {out.returncode}): "
                 f"{(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    rates, header = {}, ""
    for line in out.stdout.splitlines():
        if line.startswith("FMA peak"):
            header = line
        m = re.match(r"\s+(\w+)\s+([\w-]+)\s+(\d+) samples/s", line)
        if m:
            rates[(m.group(1), m.group(2))] = float(m.group(3))
    return rates, header


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        torch_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="build/release/tests/bench/bench_train", help="bench_train to run")
    ap.add_argument("--rounds", type=int, default=3, help="repetitions of each measurement (best counts)")
    ap.add_argument("--threads", default="1,2", help="PyTorch thread counts to try (its best counts)")
    ap.add_argument("--seconds", type=float, default=1.0, help="length of one PyTorch timing window")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--isa", choices=sorted(ISA_CAPS), default="native",
                    help="hold both sides to a smaller ISA: a stand-in for a CPU without AVX512-BF16 or AVX-512")
    a = ap.parse_args()
    global PYTHON, ISA
    ISA = a.isa
    PYTHON, version = find_torch_python()
    if not PYTHON:
        sys.exit("pytorch_peer: PyTorch is not installed (apt-get install python3-torch libopenblas0-pthread)")
    if not os.access(a.bench, os.X_OK):
        sys.exit(f"pytorch_peer: {a.bench}: not found or not executable (build the release preset first)")
    models = [m for m in a.models.split(",") if m]
    threads = [int(t) for t in a.threads.split(",") if t]

    print(f"PyTorch {version} ({PYTHON}); bench_train: {a.bench}; best of {a.rounds}; batch {BATCH}")
    if ISA != "native":
        caps = lambda d: " ".join(f"{k}={v}" for k, v in d.items())
        print(f"held to {ISA}: ours {caps(ISA_CAPS[ISA][0])}; PyTorch {caps(ISA_CAPS[ISA][1])}")
    ours, header = run_bench(a.bench, a.rounds)
    print(header)
    peer = {}
    for r in range(a.rounds):
        for model in models:
            for mode in ("fp32", "bf16"):
                for t in threads:
                    # libopenblas0-pthread runs its own threads beside
                    # PyTorch's OpenMP ones: on few cores they fight (measured
                    # 5x slower fp32 at 2 + 2 threads on 2 cores), so both
                    # OpenBLAS 1 and OpenBLAS = t are tried.
                    for blas in sorted({1, t}):
                        v = run_torch(model, mode, t, blas, a.seconds)
                        key = (model, mode)
                        if v > peer.get(key, (0.0, ""))[0]:
                            peer[key] = (v, f"{t}t" + ("" if blas == t else f",blas{blas}"))
    print()
    print(f"{'model':<12} {'ours fp32':>10} {'torch fp32':>20} {'ratio':>6}   "
          f"{'ours mixed-bf16':>15} {'torch bf16':>20} {'ratio':>6}")
    missed = 0
    for model in models:
        cells = []
        for ours_recipe, mode in (("fp32", "fp32"), ("mixed-bf16", "bf16")):
            o = ours.get((model, ours_recipe), 0.0)
            p, t = peer[(model, mode)]
            ratio = o / p if p > 0 else 0.0
            if ratio < TARGET:
                missed += 1
            cells.append((o, f"{p:.0f} ({t})", ratio))
        (o1, p1, r1), (o2, p2, r2) = cells
        print(f"{model:<12} {o1:>10.0f} {p1:>20} {r1:>5.2f}x   {o2:>15.0f} {p2:>20} {r2:>5.2f}x")
    print(f"\ntarget: ours >= {TARGET:.1f}x PyTorch in every cell; "
          f"{'met' if missed == 0 else f'missed in {missed} of {2 * len(models)}'}")


if __name__ == "__main__":
    main()
