#!/usr/bin/env bash
# Precision Lab set-up: installs (idempotently) the Debian packages the build,
# the tests and the app need, configures and builds. Used by the README's two
# commands and by .ci/run.
#   scripts/setup.sh deps            install packages only
#   scripts/setup.sh build [PRESET]  deps + configure + build (default preset: release)
#   scripts/setup.sh test            deps + build + ctest (the README's test command)
#   scripts/setup.sh run [ARGS...]   deps + build + start the GUI
#   scripts/setup.sh fuzz [SECONDS]  clang + the libFuzzer targets, each run SECONDS (default 20) from its seeds
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys use paths relative to the checkout, so another clone of the
# project on the same machine reuses the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"

PKGS=(
  build-essential cmake ninja-build ccache pkg-config git
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev libqt6svg6-dev libgl-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers nlohmann-json3-dev zlib1g-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libopenblas-dev libopenblas0-pthread
  xvfb xauth x11-utils imagemagick
  dataset-fashion-mnist
  jargon-text
  python3-torch python3-numpy
)

# The fuzzers only (clang's libFuzzer and OpenMP runtimes).
FUZZ_PKGS=(clang-14 libclang-rt-14-dev libomp-14-dev)

need_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  printf '%s\n' "${missing[@]}"
}

deps() {
  local missing
  missing=$(need_install "${PKGS[@]}" "$@")
  [ -z "$missing" ] && return 0
  echo "setup: installing: $(echo $missing | tr '\n' ' ')"
  local SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $missing
}

configure() {
  local preset=$1
  if [ ! -f "build/$preset/build.ninja" ]; then
    cmake --preset "$preset"
  fi
}

build() {
  local preset=${1:-release}
  configure "$preset"
  cmake --build --preset "$preset"
}

cmd=${1:-build}
shift || true
case "$cmd" in
  deps)  deps ;;
  build) deps; build "${1:-release}" ;;
  test)
    deps; build release
    ctest --preset release -j "$(nproc)" "$@"
    ;;
  run)
    deps; build release
    if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ] && [ -z "${QT_QPA_PLATFORM:-}" ]; then
      echo "setup: no display found; starting under xvfb-run (set DISPLAY to use a real screen)"
      exec xvfb-run -a -s "-screen 0 1600x1000x24" build/release/app/precision-lab "$@"
    fi
    exec build/release/app/precision-lab "$@"
    ;;
  fuzz)
    deps "${FUZZ_PKGS[@]}"
    configure fuzz
    cmake --build --preset fuzz
    seconds=${1:-20}
    # One libFuzzer process per core at a time (each is single-threaded).
    fuzz_one() {
      local t=$1 corpus log status=0
      # A copy of the seeds: what libFuzzer adds to its corpus stays out of the repo.
      corpus=$(mktemp -d)
      cp tests/fuzz/corpus/$t/* "$corpus"/
      log=build/fuzz/fuzz_$t.log
      build/fuzz/tests/fuzz/fuzz_$t -max_total_time="$seconds" -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="build/fuzz/crash-$t-" "$corpus" >"$log" 2>&1 || status=$?
      rm -rf "$corpus"
      return "$status"
    }
    targets=(idx gzip config preset journal text weights npy matrix_market)
    jobs=$(nproc)
    failed=()
    for ((i = 0; i < ${#targets[@]}; i += jobs)); do
      pids=()
      for t in "${targets[@]:i:jobs}"; do
        echo "fuzz: fuzz_$t for $seconds s"
        fuzz_one "$t" &
        pids+=("$!:$t")
      done
      for p in "${pids[@]}"; do
        t=${p#*:}
        status=0
        wait "${p%%:*}" || status=$?
        echo "fuzz_$t: $(grep -E "stat::number_of_executed_units|ERROR|SUMMARY" build/fuzz/fuzz_$t.log | tr '\n' ' ')"
        if [ "$status" -ne 0 ]; then
          tail -n 40 build/fuzz/fuzz_$t.log >&2
          echo "fuzz: fuzz_$t failed (exit $status); the input is in build/fuzz/crash-$t-*" >&2
          failed+=("$t")
        fi
      done
    done
    [ ${#failed[@]} -eq 0 ] || exit 1
    ;;
  *) echo "usage: scripts/setup.sh deps|build [preset]|test|run [args]|fuzz [seconds]" >&2; exit 2 ;;
esac
