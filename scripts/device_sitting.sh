#!/usr/bin/env bash
# One sitting on a lent GPU machine (the `device` tool), from the repository
# root, with the bundle scripts/device_bundle.sh made here carried along:
#   run(command="bash scripts/device_sitting.sh ours", carry=[".device-bundle"], timeout_s=420)
#   run(command="bash scripts/device_sitting.sh peer checks", carry=[".device-bundle"], timeout_s=420)
# (docs/gpu-sitting.md: what each part runs and what its verdicts mean).
# Parts, one or more in one call, in the order given (default cpu):
#   ours         the GPU issue's targets for our own step (about 5 minutes):
#                bench_train --backend=both at the default sizes, every
#                recipe (verdict: no low-precision recipe below 1.0x our
#                fp32 on the GPU); bench_train --backend=cuda --size gpu
#                (verdicts: transformer and gpt mixed-bf16 >= 2.5x fp32,
#                fp8 >= 1.2x mixed-bf16); short CLI runs of every model at
#                both sizes, whose config.json the peer reads and whose
#                steps.csv carries the device's allocation (verdicts:
#                mixed-bf16 below fp32, and <= 0.65x fp32 at the gpu size)
#   peer         tests/bench/pytorch_gpu_peer.py on the same models and
#                sizes, against ours from the `ours` part's bench_train
#                output when this machine still has it, else bench_train
#                run here (verdict: ours >= 1.0x PyTorch eager autocast,
#                mixed-bf16 and fp32); about 3 minutes
#   checks       precision-lab-cli lecture gpu-mixed-precision-pays --check,
#                the conformance suite's cuda cases, and the captured-vs-
#                uncaptured step test where the bundle has one; about 2
#                minutes
#   sitting      ours, peer and checks: about 9 minutes, one call only on a
#                fresh machine, with timeout_s 600 and PL_SITTING_BUDGET=580
#                (two calls are safer)
#   cpu          the CPU performance targets on the machine's cores:
#                bench_train --paired on all of them (16 on the GPU
#                machine; twice) and on 2, and bench_ops on all of them
#                for the mlp and the transformer in fp32, mixed-bf16 and
#                fp8, the recipes that missed there on 2026-11-25 (where
#                each step's time goes, op by op); about 4 minutes
#   conformance  the whole backend conformance suite (about 2 minutes)
#   gpu          bench_train --backend=both --wide, bench_cuda_gemm, and one
#                CLI run on the GPU twice (the same steps.csv); about 4 minutes
#   all          cpu, conformance and gpu, about 10 minutes: more than one
#                run's limit, so only with a fresh machine, a timeout_s of 600
#                and PL_SITTING_BUDGET=580
# PL_SITTING_BACKEND=cpu runs every GPU step on the CPU backend instead
# (bench_train --backend=cpu, the CLI's --backend cpu, the peer's --device
# cpu): a way to try the script on a machine without a GPU. With
# PL_SITTING_STEP_LIMIT=S no step runs longer than S seconds (a dry run
# that shows each step starts).
# Everything goes to $OUT (one log a step, sitting.txt a summary of what
# ran, how it ended, and one "verdict" line per target). Each step has its
# own time limit (`timeout`), so a stuck step costs its limit and not the
# sitting. The `ours` part keeps its bench_train output and run folders in
# $PL_SITTING_WORK (default /tmp/pl-sitting-work), where a later call on the
# same warm machine finds them.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
[ $# -eq 0 ] && set -- cpu
for part in "$@"; do
  case $part in
    cpu | conformance | gpu | all | ours | peer | checks | sitting) ;;
    *) echo "device_sitting: unknown part '$part' (ours, peer, checks, sitting, cpu, conformance, gpu or all)"; exit 2 ;;
  esac
done
B=$PWD/.device-bundle
OUT=${OUT:-/tmp/device-sitting}
WORK=${PL_SITTING_WORK:-/tmp/pl-sitting-work}
BACKEND=${PL_SITTING_BACKEND:-cuda}
mkdir -p "$OUT" "$WORK"
summary=$OUT/sitting.txt
: >"$summary"

if [ ! -x "$B/bin/bench_train" ]; then
  echo "device_sitting: $B/bin/bench_train is missing: run scripts/device_bundle.sh here and carry .device-bundle" |
    tee -a "$summary"
  exit 1
fi

# The machine's own libraries first; the bundle's fill what its image lacks.
# cuDNN comes with the image's PyTorch (nvidia-cudnn-cu13) where it is not
# in CUDA's folder.
cudnn=$(find /usr/local/cuda*/lib* /opt /usr/lib -name 'libcudnn.so.9' 2>/dev/null | head -1)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${cudnn:+:$(dirname "$cudnn")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$B/lib"
export PL_CUDA_MODULE="$B/bin/libpl_cuda.so"
[ -e "$PL_CUDA_MODULE" ] || unset PL_CUDA_MODULE

# The call's own budget (PL_SITTING_BUDGET seconds, default 400: under the
# run's timeout_s of 420, so the summary and the logs' archive are always
# written): no step outlives it, and a step that would start after it is
# skipped with a line that says so.
budget=${PL_SITTING_BUDGET:-400}

# step NAME SECONDS COMMAND...: runs COMMAND with its output in $OUT/NAME.log
# and one line in sitting.txt; returns COMMAND's exit status.
step() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${PL_SITTING_STEP_LIMIT:-}" ] && [ "$PL_SITTING_STEP_LIMIT" -lt "$limit" ]; then
    limit=$PL_SITTING_STEP_LIMIT
  fi
  local left=$((budget - SECONDS))
  if [ $left -lt 5 ]; then
    printf '%-28s %4d s  %s\n' "$name" 0 "skipped: the call's budget of $budget s is spent (PL_SITTING_BUDGET)" |
      tee -a "$summary"
    : >"$OUT/$name.log"
    return 124
  fi
  [ $left -lt "$limit" ] && limit=$left
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local verdict="rc $rc"
  [ $rc -eq 124 ] && verdict="stopped at its ${limit} s limit"
  printf '%-28s %4d s  %s\n' "$name" $((SECONDS - t0)) "$verdict" | tee -a "$summary"
  return $rc
}

# verdict NAME TEXT: one line a target's reader looks for.
verdict() { printf 'verdict %-26s %s\n' "$1" "$2" | tee -a "$summary"; }

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores;" \
    "avx512_bf16: $(grep -qw avx512_bf16 /proc/cpuinfo && echo yes || echo no)," \
    "amx_bf16: $(grep -qw amx_bf16 /proc/cpuinfo && echo yes || echo no)"
  echo "gpu: $(nvidia-smi -L 2>/dev/null | head -1 || echo none)"
  echo "cudnn: ${cudnn:-not found}"
  [ "$BACKEND" = cuda ] || echo "backend: $BACKEND (PL_SITTING_BACKEND): the GPU steps run on it, their verdicts measure it"
} | tee -a "$summary"

# bench_train's rows are named train/<model>@cuda/<recipe> on the GPU and
# train/<model>/<recipe> on the CPU; its summary prints "  <row model>
# <recipe> N samples/s ...".
suffix=$([ "$BACKEND" = cuda ] && echo @cuda)

# rate LOG MODEL RECIPE: the summary's samples/s, or nothing.
rate() {
  awk -v m="$2$suffix" -v r="$3" '$1 == m && $2 == r && $4 == "samples/s" { print $3; exit }' "$1" 2>/dev/null
}

# ratio A B: A / B to two decimals ("" when either is missing or B is 0).
ratio() {
  [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b }'
}

# at_least X BAR: whether X >= BAR (false when X is empty).
at_least() { [ -n "$1" ] && awk -v x="$1" -v b="$2" 'BEGIN { exit !(x >= b) }'; }

# last_column FILE NAME: the named column of steps.csv's last row.
last_column() {
  awk -F, -v c="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == c) k = i; next } { v = $k } END { if (k) print v }' \
    "$1" 2>/dev/null
}

# The CLI runs whose config.json the peer reads and whose steps.csv holds
# the device's allocation: $WORK/runs/<model>-<size>-<recipe>. The default
# size at bench_train's batch (128; the gpt 32, its nanoGPT baby shape);
# the gpu size as the CLI's --size gpu preset has it.
# The GPU machine's image has neither Debian's Fashion-MNIST nor its Jargon
# File: as bench_train does, a stand-in of the same shape (a step's cost
# does not depend on the values): 1024 28x28 images in IDX files, and
# 400000 characters of printable ASCII (bench_train's stand-in vocabulary).
images_data() {
  if [ -d /usr/share/datasets/fashion-mnist ]; then echo fashion-mnist; return; fi
  local d=$WORK/images
  if [ ! -s "$d/t10k-labels-idx1-ubyte" ]; then
    mkdir -p "$d"
    LC_ALL=C awk -v d="$d" 'function be32(f, v) { printf "%c%c%c%c", int(v / 16777216) % 256, int(v / 65536) % 256, int(v / 256) % 256, v % 256 > f }
      BEGIN { srand(7); n = 1024
        for (s = 0; s < 2; ++s) {
          img = d "/" (s ? "t10k" : "train") "-images-idx3-ubyte"; lab = d "/" (s ? "t10k" : "train") "-labels-idx1-ubyte"
          be32(img, 2051); be32(img, n); be32(img, 28); be32(img, 28)
          for (i = 0; i < n * 784; ++i) printf "%c", 1 + int(rand() * 254) > img
          be32(lab, 2049); be32(lab, n)
          for (i = 0; i < n; ++i) printf "%c", i % 10 > lab
          close(img); close(lab) } }' </dev/null
  fi
  echo "$d"
}
text_data() {
  if [ -e /usr/share/doc/jargon-text/jargon.txt.gz ]; then echo jargon; return; fi
  [ -s "$WORK/text.txt" ] ||
    LC_ALL=C awk 'BEGIN { srand(7); for (i = 0; i < 400000; ++i) printf "%c", 32 + int(rand() * 95) }' </dev/null >"$WORK/text.txt"
  echo "text:$WORK/text.txt"
}

cli_run() {  # cli_run MODEL SIZE RECIPE
  local model=$1 size=$2 recipe=$3 dir=$WORK/runs/$1-$2-$3
  local data batch=128 opt=()
  data=$(images_data)
  # bench_train's gpt step: AdamW lr 1e-3, weight decay 0.1, clip 1.0.
  [ "$model" = gpt ] && data=$(text_data) batch=32 opt=(--optimizer adamw --lr 1e-3 --weight-decay 0.1 --clip 1.0)
  local sized=(--batch "$batch")
  [ "$size" = default ] || sized=(--size "$size")
  rm -rf "$dir"
  step "cli_${model}_${size}_${recipe}" 30 "$B/bin/precision-lab-cli" run --backend "$BACKEND" --model "$model" \
    --dataset "$data" "${sized[@]}" --recipe "$recipe" "${opt[@]}" --steps 10 --eval-batches 1 --stats-every 1000 \
    --keep-initial off --seed 7 --out "$dir"
}

ours() {
  local both=both models="mlp cnn transformer gpt"
  [ "$BACKEND" = cuda ] || both=cpu
  # Default sizes, every recipe; the CPU rows first (bench_train's order).
  step bench_default 240 "$B/bin/bench_train" --backend=$both
  cp "$OUT/bench_default.log" "$WORK/bench_default.log"
  local m r fp32 x bad
  for m in $models; do
    fp32=$(rate "$OUT/bench_default.log" "$m" fp32)
    bad=""
    for r in fp16 mixed-fp16 mixed-bf16 fp8 mxfp8 mxfp4 nvfp4; do
      x=$(ratio "$(rate "$OUT/bench_default.log" "$m" $r)" "$fp32")
      if [ -z "$x" ]; then bad+=" $r (no row)"; elif ! at_least "$x" 1.0; then bad+=" $r ${x}x"; fi
    done
    if [ -z "$fp32" ]; then verdict "default_$m" "missed: no fp32 row (see bench_default.log)"
    elif [ -z "$bad" ]; then verdict "default_$m" "met: every low-precision recipe >= 1.0x our fp32 ($fp32 samples/s)"
    else verdict "default_$m" "missed (< 1.0x our fp32 $fp32 samples/s):$bad"; fi
  done

  # The gpu size: the recipes the targets and the peer need (a row's name
  # ends in its options: train/<model>@cuda/<recipe>/min_time:.../real_time).
  # A bench_train without --size would ignore it and time the default sizes.
  if grep -qa -- '--size' "$B/bin/bench_train"; then
    step bench_gpu 150 "$B/bin/bench_train" --backend="$([ "$BACKEND" = cuda ] && echo cuda || echo cpu)" --size=gpu \
      "--benchmark_filter=/(fp32|mixed-bf16|mixed-fp16|fp8)/"
    cp "$OUT/bench_gpu.log" "$WORK/bench_gpu.log"
  else
    echo "bench_gpu: this bench_train has no --size option: the gpu-size rows are not measured" | tee -a "$summary"
    : >"$OUT/bench_gpu.log"
  fi
  local bf16 fp8
  for m in transformer gpt; do
    fp32=$(rate "$OUT/bench_gpu.log" $m fp32)
    bf16=$(rate "$OUT/bench_gpu.log" $m mixed-bf16)
    fp8=$(rate "$OUT/bench_gpu.log" $m fp8)
    x=$(ratio "$bf16" "$fp32")
    if [ -z "$x" ]; then verdict "gpu_${m}_bf16_speed" "missed: no figure (fp32 '${fp32}', mixed-bf16 '${bf16}'; see bench_gpu.log)"
    elif at_least "$x" 2.5; then verdict "gpu_${m}_bf16_speed" "met: mixed-bf16 ${x}x fp32 (>= 2.5x; $bf16 / $fp32 samples/s)"
    else verdict "gpu_${m}_bf16_speed" "missed: mixed-bf16 ${x}x fp32 (< 2.5x; $bf16 / $fp32 samples/s)"; fi
    x=$(ratio "$fp8" "$bf16")
    if [ -z "$x" ]; then verdict "gpu_${m}_fp8_speed" "missed: no figure (fp8 '${fp8}', mixed-bf16 '${bf16}')"
    elif at_least "$x" 1.2; then verdict "gpu_${m}_fp8_speed" "met: fp8 ${x}x mixed-bf16 (>= 1.2x; $fp8 / $bf16 samples/s)"
    else verdict "gpu_${m}_fp8_speed" "missed: fp8 ${x}x mixed-bf16 (< 1.2x; $fp8 / $bf16 samples/s)"; fi
  done

  # Run folders: the default size in fp32 (the peer reads its config.json),
  # the gpu size in fp32 and mixed-bf16: steps.csv's device_allocated is
  # the memory pool's live bytes after each step.
  local a32 a16 bar target
  for m in $models; do cli_run "$m" default fp32; done
  for m in $models; do
    for r in fp32 mixed-bf16; do cli_run "$m" gpu "$r"; done
    a32=$(last_column "$WORK/runs/$m-gpu-fp32/steps.csv" device_allocated)
    a16=$(last_column "$WORK/runs/$m-gpu-mixed-bf16/steps.csv" device_allocated)
    x=$(ratio "$a16" "$a32")
    bar=1.0
    case $m in transformer | gpt) bar=0.65 ;; esac
    target="below fp32$([ "$bar" = 1.0 ] || echo ", <= ${bar}x")"
    if [ -z "$x" ] || [ "$a32" = 0 ]; then
      verdict "gpu_${m}_memory" "missed: no device figure (fp32 '${a32}', mixed-bf16 '${a16}' bytes; the CPU backend reports 0)"
    elif awk -v x="$x" -v b="$bar" -v a="$a16" -v f="$a32" 'BEGIN { exit !(x <= b && a < f) }'; then
      verdict "gpu_${m}_memory" "met: mixed-bf16 $((a16 >> 20)) MiB / fp32 $((a32 >> 20)) MiB = ${x}x ($target)"
    else
      verdict "gpu_${m}_memory" "missed: mixed-bf16 $((a16 >> 20)) MiB / fp32 $((a32 >> 20)) MiB = ${x}x ($target)"
    fi
  done
}

# A Python that imports torch: $PL_TORCH_PYTHON, the image's python3, Debian's.
torch_python() {
  local py
  for py in ${PL_TORCH_PYTHON:-} python3 /usr/bin/python3; do
    if "$py" -c 'import torch' >/dev/null 2>&1; then
      echo "$py"
      return
    fi
  done
}

peer() {
  local py
  py=$(torch_python)
  if [ -z "$py" ]; then
    verdict peer "missed: no Python here imports torch"
    return
  fi
  local runs=() size m logs=()
  for size in default gpu; do
    for m in mlp cnn transformer gpt; do
      # The fp32 folder's config.json (the shape is the recipe's too); made
      # here when the `ours` part did not run on this machine.
      [ -s "$WORK/runs/$m-$size-fp32/config.json" ] || cli_run "$m" "$size" fp32
      [ -s "$WORK/runs/$m-$size-fp32/config.json" ] && runs+=(--run "$size=$WORK/runs/$m-$size-fp32")
    done
    # Ours from the `ours` part's bench_train output, else run here.
    [ -s "$WORK/bench_$size.log" ] && logs+=(--bench-log "$size=$WORK/bench_$size.log")
  done
  # torch.compile where the work is large enough to matter: the gpu size,
  # or the default one when this build's CLI has no gpu size.
  local compiled=gpu
  [ -s "$WORK/runs/transformer-gpu-fp32/config.json" ] || compiled=default
  local device=cuda steps=(--warmup 5 --steps 20 --rounds 3)
  [ "$BACKEND" = cuda ] || device=cpu steps=(--warmup 1 --steps 3 --rounds 1)
  step pytorch_gpu_peer 240 "$py" tests/bench/pytorch_gpu_peer.py --device $device "${runs[@]}" "${logs[@]}" \
    --bench "$B/bin/bench_train" --compile fp32,mixed-bf16 --compile-sizes $compiled --compile-budget 90 "${steps[@]}"
  local line
  line=$(grep -m1 '^verdict peer:' "$OUT/pytorch_gpu_peer.log")
  if [ -n "$line" ]; then verdict peer "${line#verdict peer: }"
  else verdict peer "missed: the peer printed no verdict (see pytorch_gpu_peer.log)"; fi
}

checks() {
  rm -rf "$WORK/lesson"
  step lecture_gpu_pays 120 "$B/bin/precision-lab-cli" lecture gpu-mixed-precision-pays --check --out "$WORK/lesson"
  local rc=$? pass fail
  pass=$(grep -c 'PASS' "$OUT/lecture_gpu_pays.log")
  fail=$(grep -c 'FAIL' "$OUT/lecture_gpu_pays.log")
  if [ $rc -eq 0 ]; then verdict lecture "met: $pass claims PASS ($(grep -ci 'skip' "$OUT/lecture_gpu_pays.log") lines say skipped)"
  else verdict lecture "missed (rc $rc): $fail claims FAIL; $(tail -1 "$OUT/lecture_gpu_pays.log")"; fi

  # The suite's cuda cases: the instances named cuda and the CUDA-only tests.
  step conformance_cuda 120 "$B/bin/test_backend_conformance" --gtest_brief=1 '--gtest_filter=*/cuda:*Cuda*:*CUDA*'
  rc=$?
  local counts passed
  counts=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/conformance_cuda.log" | tr '\n' ' ')
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$OUT/conformance_cuda.log")
  if [ $rc -ne 0 ]; then verdict conformance_cuda "missed (rc $rc): $counts"
  elif [ "${passed:-0}" -eq 0 ]; then verdict conformance_cuda "missed: no cuda case ran (no device?): $counts"
  else verdict conformance_cuda "met: $counts"; fi

  # Captured against uncaptured steps: a test_cuda_graph* binary, else any
  # bundled test binary with a *Captured* test.
  local t ran=0
  for t in "$B"/bin/test_cuda_graph*; do
    [ -x "$t" ] || continue
    step "captured_$(basename "$t")" 90 "$t" --gtest_brief=1
    rc=$?
    verdict captured "$([ $rc -eq 0 ] && echo met || echo "missed (rc $rc)"): $(basename "$t")"
    ran=1
  done
  if [ $ran -eq 0 ]; then
    for t in "$B"/bin/test_*; do
      [ -x "$t" ] || continue
      "$t" --gtest_list_tests '--gtest_filter=*Captured*' 2>/dev/null | grep -q '^  ' || continue
      step "captured_$(basename "$t")" 90 "$t" --gtest_brief=1 '--gtest_filter=*Captured*'
      rc=$?
      verdict captured "$([ $rc -eq 0 ] && echo met || echo "missed (rc $rc)"): $(basename "$t") --gtest_filter=*Captured*"
      ran=1
    done
  fi
  [ $ran -eq 1 ] || verdict captured "not in this bundle (no test_cuda_graph* binary, no *Captured* test)"
}

cpu() {
  local n
  n=$(nproc)
  step "bench_train_${n}a" 120 "$B/bin/bench_train" --threads="$n" --paired=10
  step bench_train_2 120 "$B/bin/bench_train" --threads=2 --paired=10
  step "bench_train_${n}b" 120 "$B/bin/bench_train" --threads="$n" --paired=10
  local mr model recipe
  for mr in "mlp fp32" "mlp mixed-bf16" "mlp fp8" "transformer fp32" "transformer mixed-bf16" "transformer fp8"; do
    read -r model recipe <<<"$mr"
    step "ops${n}_${model}_$recipe" 30 "$B/bin/bench_ops" "$model" "$recipe" "$([ "$model" = mlp ] && echo 1000 || echo 300)"
  done
}

conformance() {
  step conformance 240 "$B/bin/test_backend_conformance" --gtest_brief=1
}

# steps.csv less its measured columns (rss, wall_ms, samples_per_second and
# the device's memory figures).
untimed() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) drop[i] = $i ~ /^(rss|wall_ms|samples_per_second|device_.*)$/ }
           { line = ""; for (i = 1; i <= NF; ++i) if (!drop[i]) line = line $i ","; print line }' "$1"
}

gpu() {
  step bench_train_gpu 150 "$B/bin/bench_train" --backend=both --wide
  [ -x "$B/bin/bench_cuda_gemm" ] && step bench_cuda_gemm 90 "$B/bin/bench_cuda_gemm"
  local k
  for k in 1 2; do
    rm -rf "/tmp/gpu_run$k"
    step "cli_gpu_run$k" 60 "$B/bin/precision-lab-cli" run --backend "$BACKEND" --model mlp --recipe mixed-bf16 \
      --dataset spirals --steps 300 --seed 7 --out "/tmp/gpu_run$k"
  done
  if [ -s /tmp/gpu_run1/steps.csv ] && cmp -s <(untimed /tmp/gpu_run1/steps.csv) <(untimed /tmp/gpu_run2/steps.csv); then
    echo "cli_gpu: the two runs wrote the same steps.csv (timing columns aside)" | tee -a "$summary"
  else
    echo "cli_gpu: the two runs' steps.csv differ, or a run failed" | tee -a "$summary"
  fi
}

for part in "$@"; do
  case $part in
    cpu) cpu ;;
    conformance) conformance ;;
    gpu) gpu ;;
    all) cpu; conformance; gpu ;;
    ours) ours ;;
    peer) peer ;;
    checks) checks ;;
    sitting) ours; peer; checks ;;
  esac
done
# The tool brings back at most 8 files: the logs go back as one archive
# beside the summary.
tar -C "$OUT" -czf "$OUT/logs.tar.gz" --exclude=logs.tar.gz --exclude=sitting.txt . 2>/dev/null &&
  find "$OUT" -name '*.log' -delete
