#!/usr/bin/env python3
"""The same candidates' timings across `leap eval --out` runs: each candidate's median (us) in every
run, its ratio to the first run's, and the median of those ratios per run; candidates missing from
any run are left out and counted.

Usage: tools/compare_medians.py BASE.jsonl OTHER.jsonl [MORE.jsonl ...]
"""
import json
import statistics
import sys


def medians(path):
    out = {}
    for line in open(path, encoding="utf-8"):
        if line.strip():
            r = json.loads(line)
            m = r.get("candidate_timing", {}).get("median_us", 0)
            if r.get("status") == "ok" and m > 0:
                out[r["candidate"]] = m
    if not out:
        raise SystemExit(f"{path}: no correct candidate with a median")
    return out


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    runs = [medians(p) for p in sys.argv[1:]]
    common = sorted(set(runs[0]).intersection(*runs[1:]))
    if not common:
        raise SystemExit("no candidate is correct in every run")
    names = sys.argv[1:]
    print("| candidate | " + " | ".join(f"run {i + 1} us" for i in range(len(runs))) + " | " +
          " | ".join(f"run {i + 1} / run 1" for i in range(1, len(runs))) + " |")
    print("|---|" + "---:|" * (2 * len(runs) - 1))
    for c in common:
        print(f"| {c} | " + " | ".join(f"{r[c]:.0f}" for r in runs) + " | " +
              " | ".join(f"{r[c] / runs[0][c]:.3f}" for r in runs[1:]) + " |")
    print()
    for i, (name, r) in enumerate(zip(names, runs)):
        ratio = "" if i == 0 else f": median ratio to run 1 {statistics.median(r[c] / runs[0][c] for c in common):.3f}"
        print(f"run {i + 1}: {name}{ratio}")
    left = sum(len(set(r) - set(common)) for r in runs)
    print(f"{len(common)} candidates in every run; {left} left out (missing or not ok in some run)")


if __name__ == "__main__":
    main()
