#!/usr/bin/env bash
# Packs what scripts/device_sitting.sh runs on a lent GPU machine (the
# `device` tool: 16 Xeon cores and an NVIDIA GPU, nothing installable, a few
# minutes of device time) into .device-bundle/, built here:
#   bash scripts/device_bundle.sh
# then, through the device tool, from the repository root:
#   run(command="bash scripts/device_sitting.sh ours", carry=[".device-bundle"], timeout_s=420)
#   run(command="bash scripts/device_sitting.sh peer checks", carry=[".device-bundle"], timeout_s=420)
# (docs/gpu-sitting.md). The bundle holds the release build's benchmarks,
# the conformance suite, the GPU-only test binaries where the build has
# them (test_cuda_graph*), the CUDA module and the CLI, and
# the libraries they need that the machine's
# image lacks (oneDNN, OpenCL's loader, Google Benchmark, libgomp). glibc,
# libstdc++ and CUDA's own libraries are the machine's: its image is newer
# than Debian 12, and cuDNN there needs its own libstdc++. About 50 MiB, under
# the tool's 64 MiB; .git/info/exclude keeps it out of git.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh build release  # every target, the benchmarks and the CLI among them

out=.device-bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
grep -qx '/.device-bundle/' .git/info/exclude 2>/dev/null || echo '/.device-bundle/' >>.git/info/exclude

r=build/release
bins=("$r/tests/bench/bench_train" "$r/tests/bench/bench_ops" "$r/tests/bench/bench_gemm"
  "$r/tests/test_backend_conformance" "$r/app/precision-lab-cli")
# Built only where nvcc was found; the GPU-only tests only where they exist.
# (tests/bench/pytorch_gpu_peer.py travels with the working tree.)
for b in "$r/tests/bench/bench_cuda_gemm" "$r/engine/backend/cuda/libpl_cuda.so" "$r"/tests/test_cuda_graph*; do
  [ -e "$b" ] && bins+=("$b")
done
cp "${bins[@]}" "$out/bin/"

# The libraries to carry: those of the binaries' dependencies that are not
# glibc's, the C++ runtime or CUDA's.
keep='^(libdnnl|libOpenCL|libbenchmark|libgomp)\.'
for b in "${bins[@]}"; do
  ldd "$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ $name =~ $keep ]]; then cp -L "$path" "$out/lib/$name"; fi
done

du -sh "$out"
ls "$out/bin" "$out/lib"
