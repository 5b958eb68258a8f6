#!/usr/bin/env bash
# One sitting on a lent GPU machine (the `device` tool), from the repository
# root, with the bundle scripts/device_bundle.sh made here carried along:
#   run(command="bash scripts/device_sitting.sh cpu", carry=[".device-bundle"], timeout_s=420)
# What it measures, by the first argument (default cpu):
#   cpu          the CPU performance targets on the machine's cores:
#                bench_train --paired on all of them (16 on the GPU
#                machine; twice) and on 2, and bench_ops on all of them
#                for the mlp and the transformer in fp32, mixed-bf16 and
#                fp8, the recipes that missed there on 2026-11-25 (where
#                each step's time goes, op by op); about 4 minutes
#   conformance  the backend conformance suite, the cuda cases included
#                (about 2 minutes)
#   gpu          bench_train --backend=both --wide, bench_cuda_gemm, and one
#                CLI run on the GPU twice (the same steps.csv); about 4 minutes
#   all          the three, about 10 minutes: more than one run's limit, so
#                only with a fresh machine and a timeout_s of 600
# PL_SITTING_BACKEND=cpu runs the gpu part's CLI runs on the CPU: a way to
# try the script on a machine without a GPU.
# Everything goes to $OUT (one log a step, sitting.txt a summary of what
# ran and how it ended). Each step has its own time limit (`timeout`), so a
# stuck step costs its limit and not the sitting.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-cpu}
B=$PWD/.device-bundle
OUT=${OUT:-/tmp/device-sitting}
mkdir -p "$OUT"
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

# step NAME SECONDS COMMAND...: runs COMMAND with its output in $OUT/NAME.log
# and one line in sitting.txt.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local verdict="rc $rc"
  [ $rc -eq 124 ] && verdict="stopped at its ${limit} s limit"
  printf '%-28s %4d s  %s\n' "$name" $((SECONDS - t0)) "$verdict" | tee -a "$summary"
}

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores;" \
    "avx512_bf16: $(grep -qw avx512_bf16 /proc/cpuinfo && echo yes || echo no)," \
    "amx_bf16: $(grep -qw amx_bf16 /proc/cpuinfo && echo yes || echo no)"
  echo "gpu: $(nvidia-smi -L 2>/dev/null | head -1 || echo none)"
  echo "cudnn: ${cudnn:-not found}"
} | tee -a "$summary"

cpu() {
  local n
  n=$(nproc)
  step "bench_train_${n}a" 120 "$B/bin/bench_train" --threads="$n" --paired=10
  step bench_train_2 120 "$B/bin/bench_train" --threads=2 --paired=10
  step "bench_train_${n}b" 120 "$B/bin/bench_train" --threads="$n" --paired=10
  for mr in "mlp fp32" "mlp mixed-bf16" "mlp fp8" "transformer fp32" "transformer mixed-bf16" "transformer fp8"; do
    set -- $mr
    step "ops${n}_$1_$2" 30 "$B/bin/bench_ops" "$1" "$2" "$([ "$1" = mlp ] && echo 1000 || echo 300)"
  done
}

conformance() {
  step conformance 240 "$B/bin/test_backend_conformance" --gtest_brief=1
}

gpu() {
  step bench_train_gpu 150 "$B/bin/bench_train" --backend=both --wide
  [ -x "$B/bin/bench_cuda_gemm" ] && step bench_cuda_gemm 90 "$B/bin/bench_cuda_gemm"
  for k in 1 2; do
    rm -rf "/tmp/gpu_run$k"
    step "cli_gpu_run$k" 60 "$B/bin/precision-lab-cli" run --backend "${PL_SITTING_BACKEND:-cuda}" --model mlp --recipe mixed-bf16 \
      --dataset spirals --steps 300 --seed 7 --out "/tmp/gpu_run$k"
  done
  # steps.csv less its timing columns (rss, wall_ms, samples_per_second).
  untimed() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) drop[i] = $i ~ /^(rss|wall_ms|samples_per_second)$/ }
             { line = ""; for (i = 1; i <= NF; ++i) if (!drop[i]) line = line $i ","; print line }' "$1"
  }
  if [ -s /tmp/gpu_run1/steps.csv ] && cmp -s <(untimed /tmp/gpu_run1/steps.csv) <(untimed /tmp/gpu_run2/steps.csv); then
    echo "cli_gpu: the two runs wrote the same steps.csv (timing columns aside)" | tee -a "$summary"
  else
    echo "cli_gpu: the two runs' steps.csv differ, or a run failed" | tee -a "$summary"
  fi
}

case $what in
  cpu) cpu ;;
  conformance) conformance ;;
  gpu) gpu ;;
  all) cpu; conformance; gpu ;;
  *) echo "device_sitting: unknown part '$what' (cpu, conformance, gpu or all)" | tee -a "$summary"; exit 2 ;;
esac
# The tool brings back at most 8 files: the logs go back as one archive
# beside the summary.
tar -C "$OUT" -czf "$OUT/logs.tar.gz" --exclude=logs.tar.gz --exclude=sitting.txt . 2>/dev/null &&
  find "$OUT" -name '*.log' -delete
