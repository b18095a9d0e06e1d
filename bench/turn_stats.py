#!/usr/bin/env python3
"""Per-step refinement figures of `leap run` directories (docs/lm.md's two-turn demo):
solve@1, solve@T and turn 2's pass rate (passed / turn-2 evaluations) per step, from each run's
metrics.jsonl and outcomes.jsonl; with several runs (seeds), one column per run and their means
over the first and last five steps.

Usage: bench/turn_stats.py RUN_DIR [RUN_DIR ...]
"""
import json
import sys
from collections import defaultdict


def load(run):
    metrics = [json.loads(line) for line in open(f"{run}/metrics.jsonl")]
    turn2 = defaultdict(lambda: [0, 0])  # step -> [passed, evaluated]
    for line in open(f"{run}/outcomes.jsonl"):
        o = json.loads(line)
        if o["turn"] == 2:
            turn2[o["step"]][1] += 1
            turn2[o["step"]][0] += o["status"] == "ok"
    return [(m["solve_at"][0], m["solve_at"][-1], turn2[m["step"]]) for m in metrics]


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def main(runs):
    data = [load(r) for r in runs]
    steps = min(len(d) for d in data)
    print("| step | " + " | ".join(f"run {i + 1}: solve@1 / solve@T / turn-2 pass" for i in range(len(runs))) + " |")
    print("|---:|" + "---|" * len(runs))
    for s in range(steps):
        cells = [f"{d[s][0]:.2f} / {d[s][1]:.2f} / {d[s][2][0]}/{d[s][2][1]}" for d in data]
        print(f"| {s + 1} | " + " | ".join(cells) + " |")
    first, last = range(0, min(5, steps)), range(max(0, steps - 5), steps)

    def rate(rows):
        passed = sum(r[2][0] for r in rows)
        n = sum(r[2][1] for r in rows)
        return f"{passed}/{n} = {passed / n:.2f}" if n else "0/0"

    print()
    print("| run | solve@1 first / last five | solve@T first / last five | turn-2 pass first / last five |")
    print("|---|---:|---:|---:|")
    for i, d in enumerate(data):
        f = [d[s] for s in first]
        l = [d[s] for s in last]
        print(f"| {runs[i]} | {mean([r[0] for r in f]):.2f} / {mean([r[0] for r in l]):.2f} | "
              f"{mean([r[1] for r in f]):.2f} / {mean([r[1] for r in l]):.2f} | {rate(f)} / {rate(l)} |")
    if len(data) > 1:
        pick = lambda rows, k: mean([r[k] for d in data for r in rows(d)])
        fr = lambda d: [d[s] for s in first]
        lr = lambda d: [d[s] for s in last]
        print(f"| mean | {pick(fr, 0):.2f} / {pick(lr, 0):.2f} | {pick(fr, 1):.2f} / {pick(lr, 1):.2f} | "
              f"{rate([r for d in data for r in fr(d)])} / {rate([r for d in data for r in lr(d)])} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
