#!/usr/bin/env bash
# Precision Lab set-up: installs (idempotently) the Debian packages the build,
# the tests and the app need, configures and builds. Used by the README's two
# commands and by .ci/run.
#   scripts/setup.sh deps            install packages only
#   scripts/setup.sh build [PRESET]  deps + configure + build (default preset: release)
#   scripts/setup.sh test            deps + build + ctest (the README's test command)
#   scripts/setup.sh run [ARGS...]   deps + build + start the GUI
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
  xvfb xauth x11-utils imagemagick
  dataset-fashion-mnist
)

need_install() {
  local missing=()
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  printf '%s\n' "${missing[@]}"
}

deps() {
  local missing
  missing=$(need_install)
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
    ctest --preset release "$@"
    ;;
  run)
    deps; build release
    if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ] && [ -z "${QT_QPA_PLATFORM:-}" ]; then
      echo "setup: no display found; starting under xvfb-run (set DISPLAY to use a real screen)"
      exec xvfb-run -a -s "-screen 0 1600x1000x24" build/release/app/precision-lab "$@"
    fi
    exec build/release/app/precision-lab "$@"
    ;;
  *) echo "usage: scripts/setup.sh deps|build [preset]|test|run [args]" >&2; exit 2 ;;
esac
