#!/usr/bin/env python3
"""Where a `leap eval --out` run's time went: the sum of each stage over its records, the run's
span (first compile to last verdict), when the first evaluation started and the last build ended.

Usage: tools/stage_sums.py RECORDS.jsonl [MORE.jsonl ...]   (one column per file)
Records that name their mode (`leap bench compile-hiding --records`) get one column per mode.
"""
import json
import sys

STAGES = ["compile_us", "eval_us", "correctness_us", "timing_us", "load_us", "gpu_lock_wait_us",
          "runner_wait_us", "candidate_calls_us", "runner_start_us", "compile_host_us", "compile_device_us"]


def columns(path):
    """(name, records) per column: the file's, or one per mode where its records name one."""
    recs = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    if not recs:
        raise SystemExit(f"{path}: no records")
    modes = list(dict.fromkeys(r["mode"] for r in recs if "mode" in r))
    if not modes:
        return [(path, recs)]
    return [(f"{path} {m}", [r for r in recs if r.get("mode") == m]) for m in modes]


def summary(recs):
    st = [r.get("stages", {}) for r in recs]
    t0 = min(s.get("compile_start_s", 0) for s in st)
    row = {k: sum(s.get(k, 0.0) for s in st) / 1e6 for k in STAGES}
    row["records"] = len(recs)
    row["ok"] = sum(r.get("status") == "ok" for r in recs)
    row["builds (cache misses)"] = sum(not r.get("cache_hit", False) for r in recs)
    row["span s"] = max(s.get("eval_end_s", 0) for s in st) - t0
    started = [s["eval_start_s"] for s in st if s.get("eval_start_s", 0) > 0]  # a compile error never starts one
    row["first evaluation starts s"] = min(started) - t0 if started else float("nan")
    row["last build ends s"] = max(s.get("compile_end_s", 0) for s in st) - t0
    return row


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    cols = [c for p in sys.argv[1:] for c in columns(p)]
    rows = [summary(recs) for _, recs in cols]
    print("| sum over records, s | " + " | ".join(name for name, _ in cols) + " |")
    print("|---|" + "---:|" * len(rows))
    for k in rows[0]:
        cells = [f"{r[k]:.1f}" if isinstance(r[k], float) else str(r[k]) for r in rows]
        print(f"| {k.removesuffix('_us')} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
