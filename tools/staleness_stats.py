#!/usr/bin/env python3
"""solve@1 per step of `leap run` metrics at two [run] max_staleness settings, several seeds each:
the mean curve per setting, first / last five steps (mean and standard deviation over seeds) and
the summed step intervals. Usage: tools/staleness_stats.py K0_METRICS... -- K1_METRICS..."""
import json
import statistics
import sys


def load(path):
    rows = [json.loads(line) for line in open(path)]
    return [r["solve_at"][0] for r in rows], sum(r.get("interval_s", r.get("wall_s", 0)) for r in rows)


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    groups = {"first": argv[:cut], "second": argv[cut + 1:]}
    print("| setting | runs | solve@1 first five (mean ± sd) | solve@1 last five (mean ± sd) | wall s per run (mean) |")
    print("|---|---:|---:|---:|---:|")
    curves = {}
    for name, paths in groups.items():
        runs = [load(p) for p in paths]
        first = [statistics.mean(c[:5]) for c, _ in runs]
        last = [statistics.mean(c[-5:]) for c, _ in runs]
        sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0
        print(f"| {name} ({paths[0]}...) | {len(runs)} | {statistics.mean(first):.3f} ± {sd(first):.3f} | "
              f"{statistics.mean(last):.3f} ± {sd(last):.3f} | {statistics.mean(w for _, w in runs):.0f} |")
        n = min(len(c) for c, _ in runs)
        curves[name] = [statistics.mean(c[i] for c, _ in runs) for i in range(n)]
    print("\nmean solve@1 per step:\n")
    for name, c in curves.items():
        print(f"{name}: " + " ".join(f"{x:.2f}" for x in c))


if __name__ == "__main__":
    main(sys.argv[1:])
