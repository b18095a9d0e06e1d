#!/usr/bin/env bash
# How much the schedule templates' choices matter: renders every choice of each template task,
# evaluates them all with leap eval, and prints per task the status counts and the speedup of the
# slowest and fastest correct choice (the baseline is the slowest correct choice, measured in
# the same run). Correct: ok, or correct but below the suite's min_speedup (check too_slow).
# Usage: bench/schedule-spread.sh [--backend cpu|cuda] [--suite S] [--build DIR] [--work DIR]
#                                 [--limits half|gap] [TASK ...]
#        (default: every template task; --suite evaluates with that suite's sizes and limits, e.g.
#        layouts; --build: leap's build folder, default build; --work: keep the sources and records
#        there; --limits: also print a suite's [limits.<backend>.min_speedup_by_task] from this run,
#        half = half the fastest correct choice, gap = in the widest speedup gap below the fastest
#        3-9 correct choices, docs/schedule-templates.md)
set -euo pipefail
cd "$(dirname "$0")/.."
backend=cpu
suite=()
build=build
work=
limits=
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) backend=$2; shift 2 ;;
    --suite) suite=(--tasks "$2"); shift 2 ;;
    --build) build=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --limits) limits=$2; shift 2 ;;
    *) break ;;
  esac
done
tasks=("$@")
[ ${#tasks[@]} -eq 0 ] && tasks=(all)
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
for t in "${tasks[@]}"; do "$build/leap" tasks render "$t" --backend "$backend" --all-to "$work/src" > /dev/null; done
printf '[sandbox]\ndeadline_s = 2\n[eval]\ntrials = 3\ntiming_budget_ms = 100\n' > "$work/bench.toml"
"$build/leap" eval --backend "$backend" "${suite[@]}" --quiet --config "$work/bench.toml" --candidates "$work/src" \
  --out "$work/results.jsonl" > "$work/eval.txt" 2>&1
case "$limits" in ''|half|gap) ;; *) echo "--limits: half or gap, not '$limits'" >&2; exit 2 ;; esac
python3 - "$work/results.jsonl" "$limits" "$backend" <<'PY'
import collections, json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows: by[r["task"]].append(r)
print(f"{'task':<22} {'choices':>7} {'ok':>4} {'compile':>7} {'wrong':>5} {'timeout':>7} {'other':>5}"
      f" {'slowest':>10} {'fastest':>10} {'ratio':>7} {'best row':>9} {'best col':>9}  fastest choice")
# Correct: ok, or correct but under the suite's min_speedup ("too_slow"), so a suite's own limits
# do not hide the choices below them.
def correct(r):
    return r["status"] == "ok" or (r["status"] == "timeout" and r.get("check") == "too_slow" and r.get("speedup", 0) > 0)
ratios = []
speeds = {}  # task -> its correct choices' speedups, fastest first
for task in sorted(by):
    rs = by[task]
    c = collections.Counter(r["status"] for r in rs)
    ok = sorted((r["speedup"], r["candidate"]) for r in rs if correct(r))
    speeds[task] = [sp for sp, _ in reversed(ok)]
    other = len(rs) - c["ok"] - c["compile_error"] - c["wrong_answer"] - c["timeout"]
    counts = f"{task:<22} {len(rs):>7} {c['ok']:>4} {c['compile_error']:>7} {c['wrong_answer']:>5} {c['timeout']:>7} {other:>5}"
    if not ok:
        print(counts + "  (no correct choice)")
        continue
    lo, hi = ok[0][0], ok[-1][0]
    ratios.append(hi / lo)
    best = {o: max([sp for sp, c in ok if c.split(".", 1)[1].startswith(o)], default=0.0) for o in ("row", "column")}
    print(counts + f" {lo:>9.3f}x {hi:>9.3f}x {hi / lo:>6.1f}x {best['row']:>8.3f}x {best['column']:>8.3f}x"
          f"  {ok[-1][1].split('.', 1)[1].rsplit('.', 1)[0]}")
if ratios:
    print(f"\nfastest / slowest correct choice: min {min(ratios):.1f}x, median {sorted(ratios)[len(ratios) // 2]:.1f}x, "
          f"max {max(ratios):.1f}x over {len(ratios)} tasks")
rule, backend = sys.argv[2], sys.argv[3]
if rule:
    print(f"\n[limits.{backend}.min_speedup_by_task]  # --limits {rule}")
    for task in sorted(by):
        s = speeds[task]
        if not s:
            print(f"# {task}: no correct choice")
            continue
        if rule == "half":
            print(f"{task} = {s[0] / 2:.3g}")
            continue
        # k fastest accepted, 3 <= k <= 9: the cut with the largest ratio between neighbours
        cuts = range(3, min(10, len(s)))
        if not cuts:
            print(f"# {task}: {len(s)} correct choices, too few for a gap")
            continue
        k = max(cuts, key=lambda k: s[k - 1] / s[k])
        gap = s[k - 1] / s[k]
        line = f"{task} = {math.sqrt(s[k - 1] * s[k]):.3g}"
        print(line if gap >= 1.1 else f"# {line}  (widest gap {gap:.2f}x < 1.1x: no limit)")
PY
