#!/usr/bin/env bash
# leap report in a real browser: real runs (leap bench dcp, two variants over two seeds, roles as threads), the
# report of the bench folder (its grid with seed bands, the runs overlaid), then headless
# Chromium loads it from disk. Checks every chart was laid out with
# drawn marks (DOM after the page's own check ran), that legends sit under their charts and step
# axes show whole steps (tests/report/check_dom.py), and that a screenshot is not blank.
# Usage: report_test.sh LEAP_BINARY SOURCE_DIR      (exit 77: skipped, no Chromium)
set -euo pipefail
leap="$1"
src="$2"
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "SKIP: no Chromium (deploy/install-deps.sh installs Debian's chromium)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A miniature of the grid (4 tasks, one held out; G = 4): every chart has data, in a CI's time.
{ printf '[run]\ntasks = ["relu", "softmax", "gemm_bias_relu", "gelu"]\ntasks_per_step = 3\nseed = 5\n[learner]\ngroup_size = 4\n'
  cat "$src/tests/fixtures/configs/fast-loop.toml"; } > "$work/grid.toml"
"$leap" bench dcp --config "$work/grid.toml" --steps 2 --workers 2 --seeds 2 --eval-every 1 --jobs 2 \
  --variants leap,single-turn --out "$work/bd" > "$work/bench.txt"
"$leap" report "$work/bd" --out "$work/report.html"
grep -q "http://\|https://" <(grep -v 'xmlns="http://www.w3.org/2000/svg"' "$work/report.html") \
  && { echo "FAIL: the report refers to the network"; exit 1; }
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile")
timeout 120 "$browser" "${flags[@]}" --virtual-time-budget=5000 --dump-dom "file://$work/report.html" \
  > "$work/dom.html" 2> "$work/browser.log" || { tail -5 "$work/browser.log"; exit 1; }
charts=$(grep -o 'data-charts="[0-9]*"' "$work/dom.html" | grep -o '[0-9]*' || true)
rendered=$(grep -o 'data-charts-rendered="[0-9]*"' "$work/dom.html" | grep -o '[0-9]*' || true)
echo "charts in the page: ${charts:-none}, laid out with drawn marks: ${rendered:-none}"
# The charts the generated page holds (its <svg data-chart=...> elements), counted from the file itself.
expected=$(grep -o '<svg[^>]*data-chart="[^"]*"' "$work/report.html" | wc -l)
echo "charts in report.html: $expected"
[ "$expected" -gt 0 ] && [ "${charts:-0}" -eq "$expected" ] && [ "${rendered:-0}" -eq "$expected" ] ||
  { echo "FAIL: not every chart rendered"; exit 1; }
python3 "$src/tests/report/check_dom.py" "$work/dom.html"
for id in grid-turn-last grid-turn-1 solve-vs-step solve-vs-wall dcp-split reward-histogram worker-timeline evaluator-busy; do
  marks=$(grep -o "data-chart=\"$id\"[^>]*data-marks-drawn=\"[0-9]*\"" "$work/dom.html" | grep -o '[0-9]*"$' | tr -d '"')
  echo "  $id: ${marks:-0} marks drawn"
  [ "${marks:-0}" -gt 0 ] || { echo "FAIL: chart $id drew nothing"; exit 1; }
done
timeout 120 "$browser" "${flags[@]}" --window-size=900,2400 --screenshot="$work/shot.png" "file://$work/report.html" \
  2>> "$work/browser.log" > /dev/null || { tail -5 "$work/browser.log"; exit 1; }
python3 "$src/tests/report/check_png.py" "$work/shot.png" --min-ink 0.02 --min-colours 12
# A directory that is not a run: a clear error, no report.
if "$leap" report "$work" > "$work/err.txt" 2>&1; then echo "FAIL: report of a non-run succeeded"; exit 1; fi
grep -q "not a run directory" "$work/err.txt" || { cat "$work/err.txt"; exit 1; }
echo "report test passed"
