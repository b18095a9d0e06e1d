#!/usr/bin/env python3
"""tools/stage_sums.py on two hand-made runs: each column sums its records' stages (seconds),
counts builds and verdicts, and times the span, the first evaluation and the last build from the
first compile; records that name their mode get a column per mode, and a compile error (no
evaluation started) does not count as the first evaluation; a file without records is an error that
names it."""
import json
import pathlib
import subprocess
import sys
import tempfile

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "stage_sums.py"


def record(status, hit, compile_s, eval_s, start, eval_start, mode=None, **us):
    stages = {"compile_start_s": start, "compile_end_s": start + compile_s, "eval_start_s": eval_start,
              "eval_end_s": eval_start + eval_s, "compile_us": compile_s * 1e6, "eval_us": eval_s * 1e6}
    stages.update({k + "_us": v * 1e6 for k, v in us.items()})
    return json.dumps({"status": status, "cache_hit": hit, "stages": stages, **({"mode": mode} if mode else {})})


def table(stdout):
    lines = stdout.splitlines()
    head = [c.strip() for c in lines[0].split("|")[2:-1]]
    return head, {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in lines[2:]}


with tempfile.TemporaryDirectory() as d:
    a, b, empty = pathlib.Path(d, "a.jsonl"), pathlib.Path(d, "b.jsonl"), pathlib.Path(d, "empty.jsonl")
    a.write_text(record("ok", False, 2.0, 1.5, 100.0, 102.0, gpu_lock_wait=0.5) + "\n" +
                 record("wrong_answer", True, 0.0, 0.5, 100.5, 103.5, gpu_lock_wait=0.25) + "\n")
    b.write_text(record("ok", True, 0.0, 3.0, 10.0, 10.0) + "\n")
    empty.write_text("\n")
    r = subprocess.run([sys.executable, str(TOOL), str(a), str(b)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _, rows = table(r.stdout)
    assert rows["compile"] == ["2.0", "0.0"], rows
    assert rows["eval"] == ["2.0", "3.0"], rows
    assert rows["gpu_lock_wait"] == ["0.8", "0.0"], rows  # 0.75 s, one decimal
    assert rows["records"] == ["2", "1"] and rows["ok"] == ["1", "1"], rows
    assert rows["builds (cache misses)"] == ["1", "0"], rows
    assert rows["span s"] == ["4.0", "3.0"], rows  # a: first compile 100.0 to last verdict 104.0
    assert rows["first evaluation starts s"] == ["2.0", "0.0"], rows
    assert rows["last build ends s"] == ["2.0", "0.0"], rows
    # compile-hiding's records: a column per mode, in the file's order; a compile error's
    # eval_start_s of 0 is not the first evaluation.
    modes = pathlib.Path(d, "modes.jsonl")
    modes.write_text("\n".join([record("compile_error", False, 1.0, 0.0, 50.0, 0.0, mode="serial"),
                                 record("ok", False, 1.0, 2.0, 51.0, 53.0, mode="serial"),
                                 record("ok", True, 0.0, 1.0, 60.0, 60.5, mode="pipelined-warm")]) + "\n")
    r = subprocess.run([sys.executable, str(TOOL), str(modes)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    head, rows = table(r.stdout)
    assert head == [f"{modes} serial", f"{modes} pipelined-warm"], head
    assert rows["records"] == ["2", "1"] and rows["eval"] == ["2.0", "1.0"], rows
    assert rows["first evaluation starts s"] == ["3.0", "0.5"], rows
    r = subprocess.run([sys.executable, str(TOOL), str(empty)], capture_output=True, text=True)
    assert r.returncode != 0 and "empty.jsonl: no records" in r.stderr, (r.returncode, r.stderr)
print("stage_sums: ok")
