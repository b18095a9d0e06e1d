#!/usr/bin/env python3
"""tools/compare_medians.py on hand-made runs: per-candidate ratios to the first run, their median
per run, candidates not ok in every run left out and counted; no common candidate is an error."""
import json
import pathlib
import subprocess
import sys
import tempfile

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "compare_medians.py"


def rec(name, median, status="ok"):
    return json.dumps({"candidate": name, "status": status, "candidate_timing": {"median_us": median}})


with tempfile.TemporaryDirectory() as d:
    p = [pathlib.Path(d, f"{i}.jsonl") for i in range(4)]
    p[0].write_text("\n".join([rec("a", 100), rec("b", 200), rec("c", 50)]) + "\n")
    p[1].write_text("\n".join([rec("a", 110), rec("b", 200), rec("c", 50, "wrong_answer")]) + "\n")
    p[2].write_text("\n".join([rec("a", 90), rec("b", 260)]) + "\n")
    p[3].write_text(rec("z", 1) + "\n")
    r = subprocess.run([sys.executable, str(TOOL), str(p[0]), str(p[1]), str(p[2])], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in r.stdout.splitlines()[2:] if line.startswith("| ")}
    assert rows["a"] == ["100", "110", "90", "1.100", "0.900"], rows
    assert rows["b"] == ["200", "200", "260", "1.000", "1.300"], rows
    assert "c" not in rows, rows
    assert "median ratio to run 1 1.050" in r.stdout and "median ratio to run 1 1.100" in r.stdout, r.stdout
    assert "2 candidates in every run; 1 left out" in r.stdout, r.stdout
    r = subprocess.run([sys.executable, str(TOOL), str(p[0]), str(p[3])], capture_output=True, text=True)
    assert r.returncode != 0 and "no candidate is correct in every run" in r.stderr, (r.returncode, r.stderr)
print("compare_medians: ok")
