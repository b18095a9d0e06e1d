#!/usr/bin/env bash
# What a KernelBench-format candidate's Python runner costs, two ways in one run: forked from the
# judge's zygote (PyTorch imported once per judge; the default) and each runner importing PyTorch
# itself ([sandbox] python_zygote = false). N copies of one honest answer (distinct names; its
# extension, if any, is built once, before either run, and then a cache hit) through `leap eval` with one judge; per
# mode: the run's wall, candidates/s, and per candidate the evaluation (p50), the runner's own start
# (p50) and the judge's wait for a started runner (mean). The judge's start is in the run's wall.
# Each evaluation times ten calls (min_samples = max_samples): the same work in both ways.
# Usage: bench/python-runners.sh [N] [BACKEND]   (cpu: answers/relu.py; cuda: answers_cuda/relu.py)
set -euo pipefail
n=${1:-24}
backend=${2:-cpu}
leap=${LEAP:-build/leap}
answer=tests/fixtures/kernelbench/answers/relu.py
[ "$backend" = cuda ] && answer=tests/fixtures/kernelbench/answers_cuda/relu.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/answers"
for i in $(seq -w 1 "$n"); do cp "$answer" "$work/answers/relu.c$i.py"; done
# Untimed first: the answer's extension and PyTorch's precompiled headers built into the farm's cache
# (once per machine), so that neither timed run pays a build the other does not.
mkdir "$work/first" && cp "$work/answers/relu.c$(printf '%0*d' ${#n} 1).py" "$work/first/"
printf '[eval]\nrequire_custom_kernel = false\nmax_samples = 10\n' > "$work/first.toml"
"$leap" eval --candidates "$work/first" --backend "$backend" --config "$work/first.toml" > "$work/first.log" 2>&1 || {
  cat "$work/first.log"; exit 1; }
for mode in zygote own; do
  {
    # The CPU answer computes with PyTorch; ten timed calls each, so that the evaluation's own work is
    # the same in both ways (timing until the median is precise takes 24-238 calls by the load).
    printf '[eval]\nrequire_custom_kernel = false\nmax_samples = 10\n'
    printf '[sandbox]\npython_zygote = %s\n' "$([ $mode = zygote ] && echo true || echo false)"
  } > "$work/$mode.toml"
  start=$(date +%s.%N)
  "$leap" eval --candidates "$work/answers" --backend "$backend" --config "$work/$mode.toml" \
    --out "$work/$mode.jsonl" > "$work/$mode.log" 2>&1 || { cat "$work/$mode.log"; exit 1; }
  awk -v m="$mode" -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%s %.3f\n", m, a - b }' >> "$work/walls"
done
python3 - "$work" "$n" "$backend" <<'PY'
import json, statistics, sys
work, n, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3]
walls = dict(line.split() for line in open(f"{work}/walls"))
rows, bad = {}, {}
for mode in ("zygote", "own"):
    recs = [json.loads(l) for l in open(f"{work}/{mode}.jsonl")]
    bad[mode] = [r for r in recs if r["status"] != "ok"]
    st = [r["stages"] for r in recs]
    wall = float(walls[mode])
    rows[mode] = (len(recs) - len(bad[mode]), wall, len(recs) / wall, statistics.median(s["eval_us"] for s in st) / 1e3,
                  statistics.median(s["runner_start_us"] for s in st) / 1e3,
                  statistics.mean(s["runner_wait_us"] for s in st) / 1e3)
print(f"{n} copies of one honest answer, backend {backend}, one judge")
print(f"{'runners':<28}{'ok':>5}{'wall s':>9}{'cand/s':>9}{'eval p50 ms':>13}{'start p50 ms':>14}{'wait mean ms':>14}")
names = {"zygote": "forked from a zygote", "own": "each imports PyTorch"}
for mode, (ok, wall, rate, ev, start, wait) in rows.items():
    print(f"{names[mode]:<28}{ok:>5}{wall:>9.2f}{rate:>9.2f}{ev:>13.1f}{start:>14.1f}{wait:>14.1f}")
z, o = rows["zygote"], rows["own"]
print(f"ratios (each imports / forked): wall {o[1] / z[1]:.2f}x, eval p50 {o[3] / z[3]:.2f}x")
print("start: the runner's own account, from its main (its own import) or its fork (none) to ready")
for mode in rows:
    for r in bad[mode]:
        print(f"not ok ({names[mode]}): {r['candidate']}: {r['status']}({r.get('check', '')}): {r.get('feedback', '')[:300]}")
PY
