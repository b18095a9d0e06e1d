#!/usr/bin/env bash
# The judge's escape check under load (GPU): `leap eval --backend cuda` over a candidate folder of
# honest kernels, idle and then beside each kind of load the false `stream_escape` verdicts were
# seen with (sessions 23, 29, 33), so that one call says which load moves the judge's observation:
#   idle      nothing else
#   cpu       one busy loop per core at nice 0 (the machine's cores taken)
#   cpu-nice  the same at nice 10 (what the compile farm's `[compile] nice` leaves the judge)
#   judge     a second `leap eval` over the same folder at once: another judge and its runners on
#             the same GPU (timing stays exclusive through the GPU lock)
# Per phase: records, ok, escape verdicts (stream_escape), and the excess (judge's wall less the runner's report less
# the overhead) over the ok records. Records in OUT/e-PHASE.jsonl.
# Usage: bench/escape-under-load.sh OUT [CANDIDATES=examples/cuda] [PHASES="idle cpu cpu-nice judge"]
# (LEAP: the binary; BACKEND=cpu: the same on the CPU backend, whose check is timing_forged)
set -euo pipefail
out=${1:?usage: bench/escape-under-load.sh OUT [CANDIDATES] [PHASES]}
cands=${2:-examples/cuda}
phases=${3:-idle cpu cpu-nice judge}
leap=${LEAP:-./build/leap}
mkdir -p "$out"
load=()
stop_load() {
  [ "${#load[@]}" -eq 0 ] || kill "${load[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  load=()
}
trap stop_load EXIT
backend=${BACKEND:-cuda}
eval_into() { "$leap" eval --quiet --backend "$backend" --candidates "$cands" --out "$1" > "${1%.jsonl}.txt" 2>&1; }
for phase in $phases; do
  case "$phase" in
    idle) ;;
    cpu | cpu-nice)
      n=$([ "$phase" = cpu ] && echo 0 || echo 10)
      for _ in $(seq "$(nproc)"); do
        nice -n "$n" bash -c 'while :; do :; done' &
        load+=("$!")
      done ;;
    judge)
      eval_into "$out/e-judge-beside.jsonl" &
      load+=("$!") ;;
    *) echo "escape-under-load.sh: unknown phase '$phase'" >&2; exit 2 ;;
  esac
  eval_into "$out/e-$phase.jsonl" || { echo "phase $phase: leap eval failed:"; tail -5 "$out/e-$phase.txt"; }
  if [ "$phase" = judge ]; then wait "${load[@]}" || true; load=(); else stop_load; fi
done
# shellcheck disable=SC2086  # the phases, one argument each
python3 - "$out" $phases <<'PY'
import json, os, statistics, sys
out, phases = sys.argv[1], sys.argv[2:]
print("| phase | records | ok | escape verdicts | other | excess p50 us (ok) | excess p90 us (ok) | excess max us (ok) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
escapes = []
files = [(p, f"{out}/e-{p}.jsonl") for p in phases]
if "judge" in phases:
    files.append(("judge (the other)", f"{out}/e-judge-beside.jsonl"))
for name, path in files:
    if not os.path.exists(path):
        print(f"| {name} | no records | | | | | | |")
        continue
    rs = [json.loads(l) for l in open(path)]
    ok = [r for r in rs if r["status"] == "ok"]
    esc = [r for r in rs if r.get("check") in ("stream_escape", "timing_forged")]
    ex = sorted(r.get("wall_excess_us", 0) for r in ok)
    q = lambda f: ex[min(len(ex) - 1, int(f * len(ex)))] if ex else 0
    print(f"| {name} | {len(rs)} | {len(ok)} | {len(esc)} | {len(rs) - len(ok) - len(esc)} | "
          f"{statistics.median(ex) if ex else 0:.1f} | {q(0.9):.1f} | {max(ex) if ex else 0:.1f} |")
    escapes += [(name, r) for r in esc]
for name, r in escapes:
    print(f"\n{name}: {r['candidate']}: {r['feedback'][:600]}")
PY
