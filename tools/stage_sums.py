#!/usr/bin/env python3
"""Where a `leap eval --out` run's time went: the sum of each stage over its records, the run's
span (first compile to last verdict), when the first evaluation started and the last build ended.

Usage: tools/stage_sums.py RECORDS.jsonl [MORE.jsonl ...]   (one column per file)
"""
import json
import sys

STAGES = ["compile_us", "eval_us", "correctness_us", "timing_us", "load_us", "gpu_lock_wait_us",
          "runner_wait_us", "candidate_calls_us", "runner_start_us", "compile_host_us", "compile_device_us"]


def summary(path):
    recs = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    if not recs:
        raise SystemExit(f"{path}: no records")
    st = [r.get("stages", {}) for r in recs]
    t0 = min(s.get("compile_start_s", 0) for s in st)
    row = {k: sum(s.get(k, 0.0) for s in st) / 1e6 for k in STAGES}
    row["records"] = len(recs)
    row["ok"] = sum(r.get("status") == "ok" for r in recs)
    row["builds (cache misses)"] = sum(not r.get("cache_hit", False) for r in recs)
    row["span s"] = max(s.get("eval_end_s", 0) for s in st) - t0
    row["first evaluation starts s"] = min(s.get("eval_start_s", 0) for s in st) - t0
    row["last build ends s"] = max(s.get("compile_end_s", 0) for s in st) - t0
    return row


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    rows = [summary(p) for p in sys.argv[1:]]
    print("| sum over records, s | " + " | ".join(sys.argv[1:]) + " |")
    print("|---|" + "---:|" * len(rows))
    for k in rows[0]:
        cells = [f"{r[k]:.1f}" if isinstance(r[k], float) else str(r[k]) for r in rows]
        print(f"| {k.removesuffix('_us')} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
