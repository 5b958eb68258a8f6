#!/usr/bin/env bash
# Retakes the README's screenshots from a build, offscreen, at 1280x720 (a
# projector) and 1600x1000, into docs/. Names: NAME.png at the README's size,
# NAME-720p.png / NAME-1000p.png at the other one.
#   scripts/screenshots.sh [BUILD_DIR] [OUT_DIR]     (default build/release docs)
# Needs no display: the offscreen platform is given each screen size by a
# screen configuration file (tests/ui/screen_*.json, as the layout test).
# Runs train for real (a few minutes on two cores in all); each lesson is shot
# when its runs end, with its claims checked.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
out=${2:-$root/docs}
app=$build/app/precision-lab
[[ -x $app ]] || { echo "screenshots.sh: no $app (build the precision-lab target)" >&2; exit 1; }
mkdir -p "$out"
# Runs journal into a scratch data home, never the user's.
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
export XDG_DATA_HOME=$data XDG_RUNTIME_DIR=$data

screen_720=$root/tests/ui/screen_1280x720.json
screen_1000=$root/tests/ui/screen_1600x1000.json

# shot SCREEN_FILE OUT.png ARGS...: the window (or --view) into OUT.png.
shot() {
  local screen=$1 file=$2
  shift 2
  echo "screenshots.sh: $file"
  QT_QPA_PLATFORM="offscreen:configfile=$screen" timeout 600 "$app" "$@" --screenshot "$out/$file" \
    2> >(grep -v -e propagateSizeHints -e 'does not support raise' >&2)
}

# Both sizes of one picture: BASE at the README's size, the other suffixed.
both() {
  local readme=$1 base=$2
  shift 2
  if [[ $readme == 720 ]]; then
    shot "$screen_720" "$base.png" "$@"
    shot "$screen_1000" "$base-1000p.png" "$@"
  else
    shot "$screen_1000" "$base.png" "$@"
    shot "$screen_720" "$base-720p.png" "$@"
  fi
}

# The main window: a five-recipe comparison training live.
# shellcheck disable=SC2054  # the commas are one argument: the recipes
compare=(--compare fp32,fp16,mixed-fp16,mixed-bf16,fp8 --steps 600 --start)
both 1000 screenshot "${compare[@]}" --screenshot-after-ms 8000
# The Compare tab once the comparison has ended.
both 1000 screenshot-compare "${compare[@]}" --view compare --screenshot-after-ms 300000
# The same comparison in difference-to-FP32 mode (each run minus FP32, over
# FP32's own noise band).
both 1000 screenshot-compare-difference "${compare[@]}" --view compare-difference --screenshot-after-ms 300000

# Lessons in presentation view, shot when their runs end (claims checked).
for lesson in why-loss-scaling fp4-blocks scale-sawtooth overflow-caught memory-activations master-weights \
              fp16-accumulation layernorm-softmax-fp16 lm-fp16-adam lm-loss-scaling lm-norms-fp16 lm-attention-memory; do
  both 720 "lecture-$lesson" --lecture "$lesson" --presentation --start --screenshot-after-ms 300000
done
# A solver lesson in presentation view, shot when its solves end.
both 720 lecture-solve-the-wall --lecture solve-the-wall --presentation --start --screenshot-after-ms 300000
# A lesson in the usual view, after its runs (setup panel, tables, runs).
both 720 lecture-why-loss-scaling-window --lecture why-loss-scaling --start --screenshot-after-ms 300000

# History: an app run killed with SIGKILL mid-run, reopened from its folder.
QT_QPA_PLATFORM="offscreen:configfile=$screen_1000" "$app" --recipe mixed-fp16 --steps 5000 --start \
  --screenshot /dev/null --screenshot-after-ms 600000 2>/dev/null &
victim=$!
sleep 6
kill -9 "$victim" 2>/dev/null || true
wait "$victim" 2>/dev/null || true
both 1000 history --view history

# The format explorer and the block view (MXFP4, the example values, an
# outlier times 1000): written by the lecture test, at both sizes.
if [[ -x $build/tests/test_ui_lecture ]]; then
  echo "screenshots.sh: block-view.png, block-view-720p.png, format-explorer.png"
  PL_SCREENSHOT_DIR=$out QT_QPA_PLATFORM=offscreen "$build/tests/test_ui_lecture" \
    --gtest_filter='BlockView.Screenshot' --gtest_brief=1 >/dev/null
else
  echo "screenshots.sh: no $build/tests/test_ui_lecture: block-view.png and format-explorer.png not retaken" >&2
fi
echo "screenshots.sh: done; look at each picture in $out before committing it"
