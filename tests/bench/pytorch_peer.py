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
best of --rounds repetitions, interleaved; --our-threads 1,2: its best over
those thread counts too; --interleave: one round of ours, then one of
PyTorch's, and so on), and the script prints samples/s and the ratios, with
the targets of the performance issue (ours >= 1.2x).

--isa avx512 or avx2 measures both sides held to a smaller ISA, a stand-in
for a CPU without AVX512-BF16 (Skylake-SP to Ice Lake) or without AVX-512:
ours with PL_MAX_CPU_ISA and DNNL_MAX_CPU_ISA, PyTorch with
ATEN_CPU_CAPABILITY, its oneDNN's DNNL_MAX_CPU_ISA and OPENBLAS_CORETYPE
(SkylakeX, Haswell). Held to AVX2, PyTorch's autocast bf16 runs with its
oneDNN off (torch.backends.mkldnn.enabled = False), as on a CPU without
AVX-512, where PyTorch's bf16 device check turns oneDNN's bf16 kernels
down: its capped oneDNN would refuse the bf16 matmul instead ("could not
create a primitive descriptor iterator").

The language model `gpt` is nanoGPT's CPU "baby" shape (model.py: 4
layers, 4 heads, width 128, context 64, dropout 0, biases in every Linear
and LayerNorm, pre-LN, GELU MLP x4, learned positions, final LayerNorm,
a head without bias and not tied to the token embedding unless --tie) at
batch 32, trained with AdamW on windows of the text data set drawn from the
seeded generator (char-level: the vocabulary is the sorted code points of
the UTF-8 text, the first 90% of the tokens train, the rest validation).
Its rows also say tokens/s (samples/s times the context), and its targets
are the language-model issue's: ours fp32 >= 1.5x PyTorch fp32, ours
mixed-bf16 >= 1.2x PyTorch autocast bf16. The text is the Jargon File
(jargon-text) or --text PATH; without either, a token stream of the same
vocabulary size stands in (the step's cost does not depend on the text).

Convergence (--converge): trains the gpt in PyTorch for --steps steps of
--batch windows with the given hyperparameters and prints the validation
loss (mean cross-entropy in nats over every token of the non-overlapping
validation windows of the context) every --eval-every steps and at the
end, as "val_loss X" on the last line; tests/bench/gpt_convergence.sh
compares it with ours at the same token count:

    python3 tests/bench/pytorch_peer.py --converge --text jargon --steps 1000 \
        --batch 32 --lr 3e-3 --warmup 100 --weight-decay 0.1 --clip 1.0

Its learning rate follows our schedule (engine/optim/schedule.cpp: linear
warm-up base*(step+1)/warmup, then cosine to --min-lr, 0 by default, at the
last step), AdamW betas (0.9, --beta2; 0.999 as ours), eps 1e-8, weight
decay on the matrices and embeddings only (nanoGPT's groups: dim >= 2).

Needs python3-torch (Debian: apt-get install python3-torch
libopenblas0-pthread); it is a benchmark peer, not a dependency of the
project. Exits 1 with one line when it is missing or bench_train fails.
"""
import argparse
import gzip
import json
import math
import os
import re
import subprocess
import sys
import time

MODELS = ["mlp", "cnn", "transformer", "gpt"]
BATCH = 128
TARGET = 1.2
# The language model's bars (ours fp32 / PyTorch fp32, ours mixed-bf16 / PyTorch bf16).
TARGETS = {"gpt": (1.5, 1.2)}
# Debian's jargon-text: the built-in "jargon" corpus.
JARGON = "/usr/share/doc/jargon-text/jargon.txt.gz"
# nanoGPT's CPU baby shape (its README: --block_size=64 --n_layer=4
# --n_head=4 --n_embd=128 --dropout=0.0) and the batch of the gpt rows.
GPT = {"layers": 4, "heads": 4, "width": 128, "context": 64, "batch": 32, "init": "nanogpt", "wte_std": None, "wpe_std": None,
       "head_bias": False, "tie": False, "text": "jargon"}


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


def make_image_model(torch, model_name, widths=(256, 128), channels=(32, 64), hidden=128, dim=64, heads=4, depth=2,
                     ratio=2, patch=7):
    """The lab's image models (engine/nn/model.h) in PyTorch, on 1x28x28
    inputs and 10 classes: "mlp" (Flatten, Linear + ReLU per hidden width,
    Linear), "cnn" (two conv5x5 pad 2 + ReLU + maxpool2 blocks of
    channels[0] and channels[1], Linear to `hidden` + ReLU, Linear), or
    "transformer" (patch x patch patches, width `dim`, `depth` pre-LN blocks
    of `heads` heads and a GELU MLP of ratio x dim, final LayerNorm, mean
    pool, Linear head). The defaults are the lab's default sizes; the GPU
    peer (pytorch_gpu_peer.py) passes a run's own."""
    nn = torch.nn

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
        def __init__(self):
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
        layers, width = [nn.Flatten()], 784
        for w in widths:
            layers += [nn.Linear(width, w), nn.ReLU()]
            width = w
        return nn.Sequential(*layers, nn.Linear(width, 10))
    if model_name == "cnn":
        c1, c2 = channels
        return nn.Sequential(nn.Conv2d(1, c1, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(c1, c2, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(c2 * 7 * 7, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    if model_name == "transformer":
        return ViT()
    raise ValueError(f"unknown image model {model_name!r}")


def torch_child(model_name, mode, threads, seconds):
    """Runs in a subprocess: prints {"samples_per_s": ...} as JSON."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    if mode == "bf16" and os.environ.get("PL_PEER_BF16_NO_ONEDNN"):
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(0)
    model = make_image_model(torch, model_name)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(BATCH, 1, 28, 28)
    y = torch.randint(0, 10, (BATCH,))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(mode == "bf16")):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    print_best_rate(step, BATCH, seconds)


def print_best_rate(step, batch, seconds):
    """Three warm-up steps, then three windows of `seconds`: prints the best
    window's samples/s as one JSON object."""
    for _ in range(3):
        step()
    best = 0.0
    for _ in range(3):
        n, t0 = 0, time.perf_counter()
        while True:
            step()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= seconds:
                break
        best = max(best, n * batch / dt)
    print(json.dumps({"samples_per_s": best}))


def load_text(spec):
    """(train ids, validation ids, vocabulary) of a text data set as the
    lab's contract has it: the UTF-8 text's sorted distinct code points are
    the vocabulary (token id = rank), the first 90% of the tokens (rounded
    down) train, the rest validate. spec: "jargon", "text:PATH" or a PATH
    (gzip-compressed or not)."""
    path = JARGON if spec == "jargon" else spec[5:] if spec.startswith("text:") else spec
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        sys.exit(f"pytorch_peer: {path}: cannot read ({e.strerror})")
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        text = raw.decode("utf-8")  # bytes, not text mode: no newline translation
    except UnicodeDecodeError as e:
        sys.exit(f"pytorch_peer: {path}: not UTF-8 text (byte {e.start})")
    vocab = sorted(set(text))
    rank = {c: i for i, c in enumerate(vocab)}
    ids = [rank[c] for c in text]
    cut = len(ids) * 9 // 10
    return ids[:cut], ids[cut:], vocab


def make_gpt(torch, vocab_size, g):
    """nanoGPT's GPT (model.py) at the shape and options of `g` (GPT above)."""
    nn, F = torch.nn, torch.nn.functional
    C, H, T, L = g["width"], g["heads"], g["context"], g["layers"]

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T))

        def forward(self, x):
            B, t, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, t, H, C // H).transpose(1, 2)  # [B, H, t, d]
            k = k.view(B, t, H, C // H).transpose(1, 2)
            v = v.view(B, t, H, C // H).transpose(1, 2)
            # PyTorch 1.13 has no scaled_dot_product_attention: nanoGPT's
            # own path (its "slow attention"), as on any CPU before 2.0.
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
            att = F.softmax(att, dim=-1)
            return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, t, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(C), SelfAttention()
            self.ln_2 = nn.LayerNorm(C)
            self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))
            self.mlp[2].is_c_proj = True

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab_size, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, vocab_size, bias=g["head_bias"])
            if g["init"] == "nanogpt":
                # model.py's _init_weights, then the residual projections'
                # N(0, 0.02/sqrt(2L)).
                for m in self.modules():
                    if isinstance(m, (nn.Linear, nn.Embedding)):
                        torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)
                    if isinstance(m, nn.Linear) and m.bias is not None:
                        torch.nn.init.zeros_(m.bias)
                for b in self.h:
                    for proj in (b.attn.c_proj, b.mlp[2]):
                        torch.nn.init.normal_(proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * L))
            # (init "torch": the modules' own defaults, Linear U(+-1/sqrt(fan_in)), Embedding N(0, 1).)
            for e, std in ((self.wte, g["wte_std"]), (self.wpe, g["wpe_std"])):
                if std is not None:
                    torch.nn.init.normal_(e.weight, mean=0.0, std=std)
            if g["tie"]:
                self.wte.weight = self.lm_head.weight

        def forward(self, idx, targets):
            t = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
            for b in self.h:
                x = b(x)
            logits = self.lm_head(self.ln_f(x))
            # The loss in FP32 whatever autocast did to the logits.
            return F.cross_entropy(logits.float().view(-1, vocab_size), targets.reshape(-1))

    return GPT()


def gpt_optimizer(torch, model, lr, weight_decay, beta2, embedding_decay=True):
    """nanoGPT's configure_optimizers: AdamW, weight decay on every tensor of
    two or more dimensions (matrices, embeddings), none on biases and norms;
    embedding_decay False keeps it off the two embeddings too."""
    params = [p for p in model.parameters() if p.requires_grad]
    exempt = set() if embedding_decay else {id(model.wte.weight), id(model.wpe.weight)}
    decays = lambda p: p.dim() >= 2 and id(p) not in exempt
    groups = [{"params": [p for p in params if decays(p)], "weight_decay": weight_decay},
              {"params": [p for p in params if not decays(p)], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2), eps=1e-8)


class Windows:
    """Training windows of T tokens at every offset of the train stream,
    drawn in epochs: a permutation of the window starts from the seeded
    generator, consumed `batch` at a time (the lab's sampler picks windows
    the same way, from its own generator)."""

    def __init__(self, torch, ids, context, batch, seed):
        self.torch, self.T, self.B = torch, context, batch
        self.data = torch.tensor(ids, dtype=torch.long)
        self.count = len(ids) - context  # (N - 1 - T) / 1 + 1
        if self.count < batch:
            sys.exit(f"pytorch_peer: the training text has {len(ids)} tokens: too few for {batch} windows of {context}")
        self.gen = torch.Generator().manual_seed(seed)
        self.offsets = torch.arange(context)
        self.perm, self.at = None, self.count

    def next(self):
        if self.at + self.B > self.count:
            self.perm, self.at = self.torch.randperm(self.count, generator=self.gen), 0
        ix = self.perm[self.at:self.at + self.B]
        self.at += self.B
        idx = ix[:, None] + self.offsets[None, :]
        return self.data[idx], self.data[idx + 1]


def validation_loss(torch, model, ids, context, bf16, chunk=256):
    """Mean cross-entropy (nats) over every token of the non-overlapping
    validation windows: window i is ids[i*T .. i*T+T) predicting the next
    token at each position, count = (N - 1 - T) // T + 1."""
    T = context
    count = (len(ids) - 1 - T) // T + 1
    if count < 1:
        sys.exit(f"pytorch_peer: the validation text has {len(ids)} tokens: fewer than one window of {T} + 1")
    data = torch.tensor(ids, dtype=torch.long)
    starts = torch.arange(count) * T
    offsets = torch.arange(T)
    total, tokens = 0.0, 0
    model.eval()
    with torch.no_grad():
        for a in range(0, count, chunk):
            idx = starts[a:a + chunk, None] + offsets[None, :]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(data[idx], data[idx + 1])
            n = idx.numel()
            total += float(loss) * n
            tokens += n
    model.train()
    return total / tokens


def lr_at(step, base, warmup, total, schedule, min_lr):
    """engine/optim/schedule.cpp's learning_rate()."""
    step = max(step, 0)
    if step < warmup:
        return base * (step + 1) / warmup
    if schedule == "constant":
        return base
    span = total - 1 - max(warmup, 0)
    if span <= 0:
        return min_lr
    u = min(1.0, (step - warmup) / span)
    if u >= 1.0:
        return min_lr
    return min_lr + (base - min_lr) * 0.5 * (1.0 + math.cos(math.pi * u))


def gpt_child(mode, threads, seconds, g):
    """Runs in a subprocess: the gpt's training step (batch gathered, forward,
    loss, backward, clip, AdamW) timed like torch_child; prints
    {"samples_per_s": ...}."""
    import torch
    torch.set_num_threads(threads)
    if mode == "bf16" and os.environ.get("PL_PEER_BF16_NO_ONEDNN"):
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(0)
    if g["text"] and (g["text"] != "jargon" or os.path.exists(JARGON)):
        train, _, vocab = load_text(g["text"])
        vocab_size = len(vocab)
    else:
        vocab_size = 155  # the Jargon File's vocabulary
        train = torch.randint(0, vocab_size, (200000,), generator=torch.Generator().manual_seed(0)).tolist()
    model = make_gpt(torch, vocab_size, g)
    opt = gpt_optimizer(torch, model, 1e-3, 0.1, 0.999)
    windows = Windows(torch, train, g["context"], g["batch"], 0)
    B = g["batch"]

    def step():
        x, y = windows.next()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(mode == "bf16")):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    print_best_rate(step, B, seconds)


def converge_child(a):
    """Runs in a subprocess: the convergence run of --converge. Prints one
    JSON object per evaluation, then {"final": ...}."""
    import torch
    torch.set_num_threads(a["threads"])
    torch.manual_seed(a["seed"])
    train, val, vocab = load_text(a["text"])
    g = dict(GPT, layers=a["layers"], heads=a["heads"], width=a["width"], context=a["context"],
             batch=a["batch"], init=a["init"], wte_std=a["wte_std"], wpe_std=a["wpe_std"], head_bias=a["head_bias"], tie=a["tie"])
    model = make_gpt(torch, len(vocab), g)
    opt = gpt_optimizer(torch, model, a["lr"], a["weight_decay"], a["beta2"], not a["no_embedding_decay"])
    windows = Windows(torch, train, a["context"], a["batch"], a["seed"])
    bf16 = a["mode"] == "bf16"
    steps, tokens_per_step = a["steps"], a["batch"] * a["context"]
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"vocab": len(vocab), "train_tokens": len(train), "val_tokens": len(val), "parameters": params}),
          flush=True)
    train_seconds = 0.0  # the training steps only, not the evaluations
    recent = []
    for s in range(steps):
        t0 = time.perf_counter()
        lr = lr_at(s, a["lr"], a["warmup"], steps, a["schedule"], a["min_lr"])
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = windows.next()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a["clip"])
        opt.step()
        recent = (recent + [float(loss)])[-50:]
        train_seconds += time.perf_counter() - t0
        done = s + 1
        if (a["eval_every"] > 0 and done % a["eval_every"] == 0) or done == steps:
            v = validation_loss(torch, model, val, a["context"], bf16)
            print(json.dumps({"step": done, "tokens": done * tokens_per_step, "train_loss": sum(recent) / len(recent),
                              "val_loss": v, "seconds": train_seconds}), flush=True)
    print(json.dumps({"final": v}), flush=True)


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
VERSION = None


def run_torch(model, mode, threads, blas_threads, seconds, gpt=None):
    cmd = [PYTHON, os.path.abspath(__file__), "--child", model, mode, str(threads), str(seconds)]
    if model == "gpt":
        cmd.append(json.dumps(gpt))
    out = subprocess.run(cmd, env=torch_env(threads, blas_threads), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"pytorch_peer: PyTorch {model} {mode} ({threads} threads, OpenBLAS {blas_threads}) failed: "
                 f"{(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"]


def run_bench(bench, rounds, models, threads=0):
    # Only the models compared: bench_train's rows are train/<model>/<recipe>/...
    cmd = [bench, f"--benchmark_filter=^train/({'|'.join(models)})/(fp32|mixed-bf16)/", f"--benchmark_repetitions={rounds}",
           "--benchmark_enable_random_interleaving=true"] + ([f"--threads={threads}"] if threads else [])
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


def add_gpt_options(ap):
    g = ap.add_argument_group("gpt (the language model)")
    g.add_argument("--text", default=GPT["text"], help="its text: jargon (Debian's jargon-text), text:PATH or PATH")
    g.add_argument("--layers", type=int, default=GPT["layers"])
    g.add_argument("--heads", type=int, default=GPT["heads"])
    g.add_argument("--width", type=int, default=GPT["width"])
    g.add_argument("--context", type=int, default=GPT["context"])
    g.add_argument("--gpt-batch", "--batch", dest="batch", type=int, default=GPT["batch"], help="windows per step")
    g.add_argument("--init", choices=["nanogpt", "torch"], default=GPT["init"],
                   help="nanogpt: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0; "
                        "torch: the modules' defaults")
    g.add_argument("--wte-std", type=float, default=None, help="the token embedding N(0, this) after init")
    g.add_argument("--wpe-std", type=float, default=None, help="the position embedding N(0, this) after init")
    g.add_argument("--head-bias", action="store_true", help="the head has a bias (nanoGPT's has none)")
    g.add_argument("--tie", action="store_true", help="tie the head to the token embedding (nanoGPT does)")


def gpt_settings(a):
    return dict(GPT, text=a.text, layers=a.layers, heads=a.heads, width=a.width, context=a.context, batch=a.batch,
                init=a.init, wte_std=a.wte_std, wpe_std=a.wpe_std, head_bias=a.head_bias, tie=a.tie)


def converge(a):
    """--converge: the PyTorch gpt trained once; its validation curve and final loss."""
    settings = dict(gpt_settings(a), steps=a.steps, lr=a.lr, warmup=a.warmup, schedule=a.schedule, min_lr=a.min_lr,
                    weight_decay=a.weight_decay, beta2=a.beta2, clip=a.clip, seed=a.seed, threads=a.conv_threads,
                    no_embedding_decay=a.no_embedding_decay,
                    eval_every=a.eval_every, mode=a.mode)
    blas = 1  # OpenBLAS's own threads fight PyTorch's on few cores (see main)
    print(f"PyTorch {VERSION} ({PYTHON}); gpt {a.layers} layers, {a.heads} heads, width {a.width}, context {a.context}; "
          f"text {a.text}; {a.mode}; {a.conv_threads} threads")
    decayed = "dim >= 2, not the embeddings" if a.no_embedding_decay else "dim >= 2"
    print(f"AdamW lr {a.lr} betas (0.9, {a.beta2}) eps 1e-8 weight decay {a.weight_decay} ({decayed}); {a.schedule} "
          f"to {a.min_lr} after {a.warmup} warm-up steps; clip {a.clip}; batch {a.batch}; {a.steps} steps "
          f"= {a.steps * a.batch * a.context} tokens; init {a.init}" +
          (f", token embedding N(0, {a.wte_std})" if a.wte_std is not None else "") +
          (f", positions N(0, {a.wpe_std})" if a.wpe_std is not None else "") +
          ("; head bias" if a.head_bias else "") + ("; tied head" if a.tie else "") + f"; seed {a.seed}")
    proc = subprocess.Popen([PYTHON, os.path.abspath(__file__), "--child-converge", json.dumps(settings)],
                            env=torch_env(a.conv_threads, blas), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    final = None
    for line in proc.stdout:
        r = json.loads(line)
        if "vocab" in r:
            print(f"vocabulary {r['vocab']}, train {r['train_tokens']} tokens, validation {r['val_tokens']} tokens; "
                  f"{r['parameters']} parameters")
            print(f"{'step':>7} {'tokens':>10} {'train loss':>10} {'val loss':>9} {'seconds':>8} {'tokens/s':>9}")
        elif "step" in r:
            print(f"{r['step']:>7} {r['tokens']:>10} {r['train_loss']:>10.4f} {r['val_loss']:>9.4f} "
                  f"{r['seconds']:>8.1f} {r['tokens'] / max(r['seconds'], 1e-9):>9.0f}", flush=True)
        elif "final" in r:
            final = r["final"]
    err = proc.stderr.read()
    if proc.wait() != 0 or final is None:
        sys.exit(f"pytorch_peer: the convergence run failed: {(err.strip().splitlines() or ['no output'])[-1]}")
    print(f"val_loss {final:.6f}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        if sys.argv[2] == "gpt":
            gpt_child(sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), json.loads(sys.argv[6]))
        else:
            torch_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--child-converge":
        converge_child(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="build/release/tests/bench/bench_train",
                    help="bench_train to run; 'none': PyTorch's figures only")
    ap.add_argument("--rounds", type=int, default=3, help="repetitions of each measurement (best counts)")
    ap.add_argument("--threads", default="1,2", help="PyTorch thread counts to try (its best counts)")
    ap.add_argument("--our-threads", default="0",
                    help="bench_train thread counts to try, its best counts (0: every core)")
    ap.add_argument("--interleave", action="store_true",
                    help="ours and PyTorch's in turns, one round of each at a time (bench_train once per round and "
                         "thread count), so that a machine whose speed drifts hands both sides the same spells")
    ap.add_argument("--seconds", type=float, default=1.0, help="length of one PyTorch timing window")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--isa", choices=sorted(ISA_CAPS), default="native",
                    help="hold both sides to a smaller ISA: a stand-in for a CPU without AVX512-BF16 or AVX-512")
    add_gpt_options(ap)
    c = ap.add_argument_group("--converge: one PyTorch gpt training run, its validation loss")
    c.add_argument("--converge", action="store_true")
    c.add_argument("--steps", type=int, default=1000)
    c.add_argument("--lr", type=float, default=3e-3)
    c.add_argument("--warmup", type=int, default=100)
    c.add_argument("--schedule", choices=["cosine", "constant"], default="cosine")
    c.add_argument("--min-lr", type=float, default=0.0, help="the cosine's last learning rate (ours: 0)")
    c.add_argument("--weight-decay", type=float, default=0.1)
    c.add_argument("--no-embedding-decay", action="store_true",
                   help="no weight decay on the embeddings (nanoGPT decays them, as every 2-D tensor)")
    c.add_argument("--beta2", type=float, default=0.999, help="AdamW's beta2 (ours: 0.999; nanoGPT's baby: 0.99)")
    c.add_argument("--clip", type=float, default=1.0, help="gradient norm clip (0: off)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--eval-every", type=int, default=100, help="steps between validation losses (0: the end only)")
    c.add_argument("--mode", choices=["fp32", "bf16"], default="fp32", help="fp32, or autocast bf16")
    c.add_argument("--conv-threads", type=int, default=2, help="PyTorch threads of the convergence run")
    a = ap.parse_args()
    global PYTHON, ISA, VERSION
    ISA = a.isa
    PYTHON, VERSION = find_torch_python()
    if not PYTHON:
        sys.exit("pytorch_peer: PyTorch is not installed (apt-get install python3-torch libopenblas0-pthread)")
    if a.converge:
        if a.steps < 1 or a.batch < 1 or a.context < 1 or a.width % max(a.heads, 1) != 0:
            sys.exit("pytorch_peer: --steps, --batch and --context must be >= 1, --width a multiple of --heads")
        converge(a)
        return
    peer_only = a.bench == "none"
    if not peer_only and not os.access(a.bench, os.X_OK):
        sys.exit(f"pytorch_peer: {a.bench}: not found or not executable (build the release preset first)")
    models = [m for m in a.models.split(",") if m]
    threads = [int(t) for t in a.threads.split(",") if t]
    gpt = gpt_settings(a)
    if "gpt" in models and not (a.text != "jargon" or os.path.exists(JARGON)):
        gpt["text"] = ""  # a token stream of the Jargon File's vocabulary size (gpt_child)

    print(f"PyTorch {VERSION} ({PYTHON}); bench_train: {a.bench}; best of {a.rounds}; batch {BATCH}")
    if "gpt" in models:
        print(f"gpt: {a.layers} layers, {a.heads} heads, width {a.width}, context {a.context}, batch {a.batch}, "
              f"AdamW, clip 1.0; text: {gpt['text'] or 'none (jargon-text not installed): random tokens, vocabulary 155'}")
    if ISA != "native":
        caps = lambda d: " ".join(f"{k}={v}" for k, v in d.items())
        print(f"held to {ISA}: ours {caps(ISA_CAPS[ISA][0])}; PyTorch {caps(ISA_CAPS[ISA][1])}")
    our_threads = [int(t) for t in a.our_threads.split(",") if t]
    ours, ours_by_threads, header = {}, {}, ""

    def bench_round(rounds):
        nonlocal header
        for t in our_threads:
            rates, header = run_bench(a.bench, rounds, models, t)
            for key, v in rates.items():
                ours_by_threads[key + (t,)] = max(ours_by_threads.get(key + (t,), 0.0), v)
                ours[key] = max(ours.get(key, 0.0), v)

    if not peer_only and not a.interleave:
        bench_round(a.rounds)
    if header:
        print(header)
    peer = {}
    for r in range(a.rounds):
        if not peer_only and a.interleave:
            bench_round(1)
        for model in models:
            for mode in ("fp32", "bf16"):
                for t in threads:
                    # libopenblas0-pthread runs its own threads beside
                    # PyTorch's OpenMP ones: on few cores they fight (measured
                    # 5x slower fp32 at 2 + 2 threads on 2 cores), so both
                    # OpenBLAS 1 and OpenBLAS = t are tried.
                    for blas in sorted({1, t}):
                        v = run_torch(model, mode, t, blas, a.seconds, gpt)
                        key = (model, mode)
                        peer.setdefault(("all",) + key, []).append((v, t, blas))
                        if v > peer.get(key, (0.0, ""))[0]:
                            peer[key] = (v, f"{t}t" + ("" if blas == t else f",blas{blas}"))
    if a.interleave and header:
        print(header)
    print()
    print(f"{'model':<12} {'ours fp32':>10} {'torch fp32':>20} {'ratio':>6}   "
          f"{'ours mixed-bf16':>15} {'torch bf16':>20} {'ratio':>6}   (samples/s)")
    missed, cells_counted, absent = 0, 0, []

    def row(model, scale):
        nonlocal missed, cells_counted
        cells = []
        bars = TARGETS.get(model, (TARGET, TARGET))
        for (ours_recipe, mode), bar in zip((("fp32", "fp32"), ("mixed-bf16", "bf16")), bars):
            o = ours.get((model, ours_recipe), 0.0) * scale
            p, t = peer[(model, mode)]
            p *= scale
            if o > 0 and p > 0:
                ratio = o / p
                if scale == 1:
                    cells_counted += 1
                    missed += ratio < bar
                cells.append((f"{o:.0f}", f"{p:.0f} ({t})", f"{ratio:>5.2f}x"))
            else:
                if scale == 1 and not peer_only:
                    absent.append(f"{model} {ours_recipe}")
                cells.append(("-", f"{p:.0f} ({t})", "    -"))
        (o1, p1, r1), (o2, p2, r2) = cells
        return f"{o1:>10} {p1:>20} {r1:>6}   {o2:>15} {p2:>20} {r2:>6}"

    for model in models:
        print(f"{model:<12} " + row(model, 1))
    text_models = [m for m in models if m == "gpt"]
    if text_models:
        print(f"\n{'model':<12} {'ours fp32':>10} {'torch fp32':>20} {'ratio':>6}   "
              f"{'ours mixed-bf16':>15} {'torch bf16':>20} {'ratio':>6}   (tokens/s = samples/s x {a.context})")
        for model in text_models:
            print(f"{model:<12} " + row(model, a.context))
        # Every PyTorch setting tried, its best round: the 1- and 2-thread figures.
        for model in text_models:
            for mode in ("fp32", "bf16"):
                best = {}
                for v, t, blas in peer[("all", model, mode)]:
                    best[(t, blas)] = max(best.get((t, blas), 0.0), v)
                print(f"  torch {model} {mode}: " + ", ".join(
                    f"{t}t" + ("" if blas == t else f",blas{blas}") + f" {v:.0f} samples/s = {v * a.context:.0f} tokens/s"
                    for (t, blas), v in sorted(best.items())))
    if len(our_threads) > 1:
        for model in models:
            for recipe in ("fp32", "mixed-bf16"):
                cells = [f"{t or 'every core'}{'t' if t else ''} {ours_by_threads[(model, recipe, t)]:.0f}"
                         for t in our_threads if (model, recipe, t) in ours_by_threads]
                print(f"  ours {model} {recipe} by threads (samples/s): " + ", ".join(cells))
    targets = ", ".join(f"{m} fp32 >= {b[0]:.1f}x and mixed-bf16 >= {b[1]:.1f}x" for m, b in TARGETS.items()
                        if m in models)
    verdict = "not measured (--bench none)" if peer_only else \
        ((("met" if not absent else f"met in the {cells_counted} cells measured") if missed == 0
          else f"missed in {missed} of {cells_counted}"))
    print(f"\ntarget: ours >= {TARGET:.1f}x PyTorch in every cell" + (f" ({targets})" if targets else "") +
          f"; {verdict}" + (f"; bench_train has no row for {', '.join(absent)}" if absent else ""))


if __name__ == "__main__":
    main()
