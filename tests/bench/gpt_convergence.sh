#!/usr/bin/env bash
# gpt_convergence.sh: our FP32 gpt's validation loss against PyTorch's after the same tokens, same hyperparameters.
#
#   tests/bench/gpt_convergence.sh                 jargon, baby shape, 1000 steps of 32 windows
#   tests/bench/gpt_convergence.sh --steps 1200 --lr 0.002 --dataset text:/path/to/book.txt
#
# Trains the gpt (nanoGPT's CPU "baby" shape: 4 layers, width 128, 4 heads,
# context 64) once with precision-lab-cli (recipe fp32) and once in PyTorch
# (tests/bench/pytorch_peer.py --converge) with the same data set, batch,
# steps, AdamW (betas 0.9/0.999, eps 1e-8), learning rate, warm-up and
# cosine schedule to 0, weight decay and gradient clip, then prints both
# validation losses (mean nats per token over the non-overlapping
# validation windows) and their ratio. Target: within 2% (|ratio - 1| <=
# 0.02); exits 1 when missed, 2 when either side cannot run (a
# precision-lab-cli without the gpt model says so).
#
# Options (defaults): --steps 1000 --batch 32 --lr 0.003 --warmup 100
# --weight-decay 0.1 --clip 1.0 --seed 0 --dataset jargon --threads 0 (ours:
# every core) --peer-threads 1 --cli build/release/app/precision-lab-cli
# --out DIR (the run folder; default a temporary one, removed after)
# --curve N (both sides evaluate every N steps; default only at the end).
#
# The peer's model must be ours: PL_PEER_ARGS passes it further options
# (pytorch_peer.py --help: --init nanogpt|torch, --wte-std, --wpe-std, --head-bias,
# --tie, --no-embedding-decay), e.g. PL_PEER_ARGS="--init torch --head-bias".
set -euo pipefail
cd "$(dirname "$0")/../.."

steps=1000 batch=32 lr=0.003 warmup=100 wd=0.1 clip=1.0 seed=0 dataset=jargon threads=0 peer_threads=1
cli=build/release/app/precision-lab-cli out="" curve=0
layers=4 width=128 heads=4 context=64
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  esac
  [ $# -ge 2 ] || { echo "gpt_convergence: option $1 needs a value" >&2; exit 2; }
  case "$1" in
    --steps) steps=$2 ;;
    --batch) batch=$2 ;;
    --lr) lr=$2 ;;
    --warmup) warmup=$2 ;;
    --weight-decay) wd=$2 ;;
    --clip) clip=$2 ;;
    --seed) seed=$2 ;;
    --dataset) dataset=$2 ;;
    --threads) threads=$2 ;;
    --peer-threads) peer_threads=$2 ;;
    --cli) cli=$2 ;;
    --out) out=$2 ;;
    --curve) curve=$2 ;;
    *) echo "gpt_convergence: unknown option '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift 2
done
[ -x "$cli" ] || { echo "gpt_convergence: $cli: not found or not executable (build the release preset first)" >&2; exit 2; }
# Both sides read the same bytes. Our "jargon" is the Jargon File cleaned
# for a class (title page, tables, headword lists and indent removed); the
# peer does not clean, so for "jargon" both read Debian's file as it is,
# through text:PATH.
case "$dataset" in
  jargon) dataset=text:/usr/share/doc/jargon-text/jargon.txt.gz; peer_text=$dataset ;;
  text:*) peer_text=$dataset ;;
  *) echo "gpt_convergence: --dataset must be jargon or text:PATH (got '$dataset')" >&2; exit 2 ;;
esac
keep=1
if [ -z "$out" ]; then
  out=$(mktemp -d /tmp/pl_gpt_convergence.XXXXXX)
  keep=0
fi
cleanup() { [ "$keep" = 1 ] || rm -rf "$out"; }
trap cleanup EXIT
tokens=$((steps * batch * context))
echo "gpt_convergence: $dataset, $layers layers, width $width, $heads heads, context $context; batch $batch, $steps steps" \
  "= $tokens tokens; AdamW lr $lr, warm-up $warmup, cosine to 0, weight decay $wd, clip $clip; seed $seed"

# Ours. Evaluations: at the end (eval_every = steps), or every --curve steps.
eval_every=$steps
[ "$curve" -gt 0 ] && eval_every=$curve
t0=$(date +%s)
set +e
"$cli" run --model gpt --dataset "$dataset" --layers "$layers" --width "$width" --heads "$heads" --context "$context" \
  --recipe fp32 --batch "$batch" --steps "$steps" --optimizer adamw --lr "$lr" --warmup "$warmup" --schedule cosine \
  --weight_decay "$wd" --clip "$clip" --seed "$seed" --threads "$threads" --eval_every "$eval_every" \
  --stats_every 0 --out "$out/ours" >"$out/ours.log" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  why=$(grep -v '^\s*$' "$out/ours.log" | tail -n 1)
  if grep -qE "'model' must be|unknown option --(layers|width|heads|context)|no such dataset" "$out/ours.log"; then
    echo "gpt_convergence: $cli does not know the gpt model (or its flags, or the jargon data set) yet: $why" >&2
  else
    echo "gpt_convergence: our run failed (exit $rc): $why" >&2
  fi
  exit 2
fi
ours_seconds=$(( $(date +%s) - t0 ))
# The last evaluation of evals.csv (columns by name).
ours_curve=$(python3 - "$out/ours/evals.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
if not rows:
    sys.exit("gpt_convergence: " + sys.argv[1] + ": no evaluation")
for r in rows:
    print(r["step"], r["val_loss"])
EOF
)
ours=$(echo "$ours_curve" | tail -n 1 | cut -d' ' -f2)
echo "ours ($ours_seconds s, evaluations included):"
echo "$ours_curve" | while read -r s v; do printf "  step %7d  val_loss %.4f\n" "$s" "$v"; done

# PyTorch.
set +e
# shellcheck disable=SC2086  # PL_PEER_ARGS is a list of options
python3 tests/bench/pytorch_peer.py --converge --text "$peer_text" --layers "$layers" --width "$width" \
  --heads "$heads" --context "$context" --batch "$batch" --steps "$steps" --lr "$lr" --warmup "$warmup" \
  --schedule cosine --min-lr 0 --weight-decay "$wd" --beta2 0.999 --clip "$clip" --seed "$seed" \
  --eval-every "$curve" --conv-threads "$peer_threads" ${PL_PEER_ARGS:-} >"$out/peer.log" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "gpt_convergence: the PyTorch peer failed (exit $rc): $(grep -v '^\s*$' "$out/peer.log" | tail -n 1)" >&2
  exit 2
fi
sed 's/^/  /' "$out/peer.log" | grep -v "val_loss [0-9]" || true
peer=$(sed -n 's/^val_loss \([0-9.eE+-]*\)$/\1/p' "$out/peer.log" | tail -n 1)
[ -n "$peer" ] || { echo "gpt_convergence: the peer printed no val_loss" >&2; exit 2; }

python3 - "$ours" "$peer" "$tokens" <<'EOF'
import sys
ours, peer, tokens = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
ratio = ours / peer
ok = abs(ratio - 1.0) <= 0.02
print(f"validation loss after {tokens} tokens: ours {ours:.4f}, PyTorch {peer:.4f}; ratio {ratio:.4f} "
      f"(target within 2%: {'met' if ok else 'missed'})")
sys.exit(0 if ok else 1)
EOF
