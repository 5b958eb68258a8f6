#!/bin/sh
# Runs test_monkey in a real window: on $DISPLAY when there is one, else in
# a 1280x720 Xvfb (xvfb-run), else offscreen.
# usage: run_monkey.sh TEST_MONKEY SECONDS [SEED [MORE test_monkey ARGUMENTS]]
#   (SEED "" or "random": a new seed, printed)
set -eu
bin=$1
seconds=$2
seed=${3:-}
[ $# -ge 3 ] && shift 3 || shift $#
[ "$seed" = random ] && seed=
if [ -n "$seed" ]; then
  set -- --seconds "$seconds" --seed "$seed" "$@"
else
  set -- --seconds "$seconds" "$@"
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:handle_abort=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# A real window: ctest's QT_QPA_PLATFORM=offscreen (set for the other UI
# tests) must not reach it.
if [ -n "${DISPLAY:-}" ]; then
  unset QT_QPA_PLATFORM
  exec "$bin" "$@"
elif command -v xvfb-run >/dev/null 2>&1; then
  unset QT_QPA_PLATFORM
  exec xvfb-run -a -s "-screen 0 1280x720x24 -nolisten tcp" "$bin" "$@"
else
  echo "run_monkey.sh: no DISPLAY and no xvfb-run: offscreen" >&2
  QT_QPA_PLATFORM=offscreen exec "$bin" "$@"
fi
