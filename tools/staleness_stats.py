#!/usr/bin/env python3
"""solve@1 per step of `leap run` metrics at two [run] max_staleness settings, several seeds each:
the mean curve per setting, first / last five steps (mean and standard deviation over seeds), the
summed step intervals, and when each run's solve@1 (mean of three consecutive steps) first reached
each of THRESHOLDS, in steps and in seconds of its own wall time (LEAP's claim is wall time).
Usage: tools/staleness_stats.py [--thresholds 0.6,0.7] K0_METRICS... -- K1_METRICS..."""
import json
import statistics
import sys

WINDOW = 3


def load(path):
    rows = [json.loads(line) for line in open(path)]
    curve = [r["solve_at"][0] for r in rows]
    times = []
    t = 0.0
    for r in rows:
        t += r.get("interval_s", r.get("wall_s", 0))
        times.append(t)
    return curve, times


def reached(curve, times, level):
    """(step, seconds) where the trailing mean of WINDOW steps first reaches `level`, else None."""
    for i in range(WINDOW - 1, len(curve)):
        if statistics.mean(curve[i - WINDOW + 1:i + 1]) >= level:
            return i + 1, times[i]
    return None


def main(argv):
    thresholds = [0.6, 0.7]
    if argv[:1] == ["--thresholds"]:
        thresholds = [float(x) for x in argv[1].split(",")]
        argv = argv[2:]
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    groups = {"first": argv[:cut], "second": argv[cut + 1:]}
    if not groups["first"] or not groups["second"]:
        sys.exit("each setting needs at least one metrics file")
    sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0
    print("| setting | runs | solve@1 first five (mean ± sd) | solve@1 last five (mean ± sd) | wall s per run (mean) |")
    print("|---|---:|---:|---:|---:|")
    curves, loaded = {}, {}
    for name, paths in groups.items():
        runs = loaded[name] = [load(p) for p in paths]
        first = [statistics.mean(c[:5]) for c, _ in runs]
        last = [statistics.mean(c[-5:]) for c, _ in runs]
        print(f"| {name} ({paths[0]}...) | {len(runs)} | {statistics.mean(first):.3f} ± {sd(first):.3f} | "
              f"{statistics.mean(last):.3f} ± {sd(last):.3f} | {statistics.mean(t[-1] for _, t in runs):.0f} |")
        n = min(len(c) for c, _ in runs)
        curves[name] = [statistics.mean(c[i] for c, _ in runs) for i in range(n)]
    print("\nmean solve@1 per step:\n")
    for name, c in curves.items():
        print(f"{name}: " + " ".join(f"{x:.2f}" for x in c))
    print(f"\nfirst step where a run's solve@1 over {WINDOW} consecutive steps reached the level "
          "(mean over the runs that did; seconds of the run's own wall time):\n")
    print("| setting | level | runs that reached it | step (mean) | seconds (mean ± sd) |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in loaded.items():
        for level in thresholds:
            hits = [h for h in (reached(c, t, level) for c, t in runs) if h]
            if hits:
                secs = [s for _, s in hits]
                print(f"| {name} | {level:.2f} | {len(hits)} of {len(runs)} | {statistics.mean(s for s, _ in hits):.1f} | "
                      f"{statistics.mean(secs):.0f} ± {sd(secs):.0f} |")
            else:
                print(f"| {name} | {level:.2f} | 0 of {len(runs)} | - | - |")


if __name__ == "__main__":
    main(sys.argv[1:])
