#!/usr/bin/env bash
# What [eval] slow_stop_ratio saves: `leap eval` on one candidate folder with the ratio off (0), then
# at R, in one call; per candidate the speedup, trials before timing, calls and the judge's time,
# and the sums with their ratio (docs/benchmarks.md, "Slow candidates").
# Usage: bench/slow-candidates.sh OUT [CANDIDATES=examples/cuda] [BACKEND=cuda]   (R=2: the ratio; LEAP: the binary)
set -euo pipefail
out=${1:?usage: bench/slow-candidates.sh OUT [CANDIDATES] [BACKEND]}
cands=${2:-examples/cuda}
backend=${3:-cuda}
leap=${LEAP:-./build/leap}
mkdir -p "$out"
for r in 0 "${R:-2}"; do
  printf '[eval]\nslow_stop_ratio = %s\n' "$r" > "$out/ratio-$r.toml"
  "$leap" eval --quiet --backend "$backend" --config "$out/ratio-$r.toml" --candidates "$cands" --out "$out/e-$r.jsonl" \
    > "$out/e-$r.txt" 2>&1 || { tail -5 "$out/e-$r.txt"; exit 1; }
done
python3 - "$out/e-0.jsonl" "$out/e-${R:-2}.jsonl" "${R:-2}" <<'PY'
import json, sys
def load(p):
    return {r["candidate"]: r for r in map(json.loads, open(p))}
off, on, ratio = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
ms = lambda r, k: r["stages"][k] / 1000
print(f"| candidate | status off / on | speedup off / on | trials off / on | calls off / on | "
      f"correctness ms off / on | timing ms off / on | judge ms off / on |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
tot = {k: [0.0, 0.0] for k in ("correctness_us", "timing_us", "eval_us")}
calls = [0, 0]
for name in sorted(off):
    a, b = off[name], on.get(name)
    if b is None:
        continue
    for k in tot:
        tot[k][0] += a["stages"][k]; tot[k][1] += b["stages"][k]
    calls[0] += a["calls"]; calls[1] += b["calls"]
    print(f"| {name} | {a['status']} / {b['status']} | {a['speedup']:.3f} / {b['speedup']:.3f} | "
          f"{a.get('trial_calls', '-')} / {b.get('trial_calls', '-')} | {a['calls']} / {b['calls']} | "
          f"{ms(a, 'correctness_us'):.1f} / {ms(b, 'correctness_us'):.1f} | {ms(a, 'timing_us'):.1f} / "
          f"{ms(b, 'timing_us'):.1f} | {ms(a, 'eval_us'):.1f} / {ms(b, 'eval_us'):.1f} |")
print(f"| **sum** | | | | {calls[0]} / {calls[1]} | {tot['correctness_us'][0]/1e3:.1f} / {tot['correctness_us'][1]/1e3:.1f} | "
      f"{tot['timing_us'][0]/1e3:.1f} / {tot['timing_us'][1]/1e3:.1f} | {tot['eval_us'][0]/1e3:.1f} / {tot['eval_us'][1]/1e3:.1f} |")
ok = lambda d: sum(r["status"] == "ok" for r in d.values())
print(f"\nslow_stop_ratio 0 vs {ratio}: {ok(off)}/{len(off)} vs {ok(on)}/{len(on)} ok; judge time "
      f"{tot['eval_us'][0]/1e6:.2f} s vs {tot['eval_us'][1]/1e6:.2f} s: "
      f"{tot['eval_us'][0]/max(tot['eval_us'][1], 1):.2f}x; calls {calls[0]} vs {calls[1]}")
PY
