#!/usr/bin/env bash
# [eval] profile on a candidate folder (GPU): `leap eval` without, then with the profile, in one
# call; per candidate the longest kernel's counters, its bottleneck, the profiling step's time and
# the candidate's median with / without (the profile runs after the timing: the ratio is noise).
# Usage: bench/profile.sh OUT [CANDIDATES=examples/cuda]   (LEAP: the binary)
set -euo pipefail
out=${1:?usage: bench/profile.sh OUT [CANDIDATES]}
cands=${2:-examples/cuda}
leap=${LEAP:-./build/leap}
mkdir -p "$out"
for p in false true; do
  printf '[eval]\nprofile = %s\n' "$p" > "$out/profile-$p.toml"
  "$leap" eval --quiet --backend cuda --config "$out/profile-$p.toml" --candidates "$cands" --out "$out/e-$p.jsonl" \
    > "$out/e-$p.txt" 2>&1 || { tail -5 "$out/e-$p.txt"; exit 1; }
done
python3 - "$out/e-false.jsonl" "$out/e-true.jsonl" <<'PY'
import json, statistics, sys
off = {r["candidate"]: r for r in map(json.loads, open(sys.argv[1]))}
on = [json.loads(l) for l in open(sys.argv[2])]
print("| candidate | status | kernels | longest kernel | us | occupancy % | DRAM % | memory % | SM % | regs | "
      "shared B | bottleneck | profile s | median us off / on |")
print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
ratios, costs, missing = [], [], []
for r in on:
    ks = r.get("kernels", [])
    a = off.get(r["candidate"])
    med = lambda x: x["candidate_timing"]["median_us"]
    if r["status"] == "ok" and a and a["status"] == "ok" and med(a) > 0:
        ratios.append(med(r) / med(a))
    if not ks:
        missing.append(f'{r["candidate"]}: {r["status"]} {r.get("profile_error", "")[:200]}')
        continue
    k = max(ks, key=lambda k: k["duration_us"])
    costs.append(r["profile_us"] / 1e6)
    print(f'| {r["candidate"]} | {r["status"]} | {len(ks)} | {k["kernel"][:40]} | {k["duration_us"]:.1f} | '
          f'{k["occupancy_pct"]:.0f} | {k["dram_pct"]:.1f} | {k["memory_pct"]:.1f} | {k["sm_pct"]:.1f} | '
          f'{k["registers"]} | {k["shared_bytes"]} | {r["bottleneck"]} | {r["profile_us"]/1e6:.2f} | '
          f'{med(a) if a else 0:.1f} / {med(r):.1f} |')
print(f"\nprofiled {len(costs)} of {len(on)}; profiling step p50 {statistics.median(costs) if costs else 0:.2f} s, "
      f"max {max(costs) if costs else 0:.2f} s; candidate median on/off: p50 "
      f"{statistics.median(ratios) if ratios else 0:.3f}, min {min(ratios) if ratios else 0:.3f}, "
      f"max {max(ratios) if ratios else 0:.3f}")
for m in missing:
    print("not profiled:", m)
PY
