#!/usr/bin/env python3
"""tools/staleness_stats.py on hand-made metrics: first / last five steps per setting, wall time per
run, and the first step (and second of wall time) where the trailing mean of three steps reaches a
level; a level never reached says so; a setting without files is refused."""
import json
import pathlib
import subprocess
import sys
import tempfile

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "staleness_stats.py"


def write(path, curve, interval):
    path.write_text("".join(json.dumps({"step": i + 1, "solve_at": [v, v], "interval_s": interval}) + "\n"
                            for i, v in enumerate(curve)))


with tempfile.TemporaryDirectory() as d:
    p = [pathlib.Path(d, f"{i}.jsonl") for i in range(3)]
    write(p[0], [0.2, 0.4, 0.6, 0.8, 0.8, 0.8], 10.0)   # 3-step means: .4 .6 .733 .8
    write(p[1], [0.2, 0.2, 0.4, 0.6, 0.6, 0.6], 5.0)    # .267 .4 .533 .6
    write(p[2], [0.0, 0.0, 0.0, 0.0, 0.0, 0.2], 5.0)    # never .6
    r = subprocess.run([sys.executable, str(TOOL), "--thresholds", "0.6,0.7", str(p[0]), "--", str(p[1]), str(p[2])],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    summary = {l.split("|")[1].split("(")[0].strip(): [c.strip() for c in l.split("|")[2:-1]]
               for l in lines if l.startswith("| first (") or l.startswith("| second (")}
    assert summary["first"] == ["1", "0.560 ± 0.000", "0.680 ± 0.000", "60"], summary
    assert summary["second"][0] == "2" and summary["second"][3] == "30", summary
    reach = {(l.split("|")[1].strip(), l.split("|")[2].strip()): [c.strip() for c in l.split("|")[3:-1]]
             for l in lines if l.startswith("| first |") or l.startswith("| second |")}
    assert reach[("first", "0.60")] == ["1 of 1", "4.0", "40 ± 0"], reach      # steps 2-4, at 40 s
    assert reach[("first", "0.70")] == ["1 of 1", "5.0", "50 ± 0"], reach
    assert reach[("second", "0.60")] == ["1 of 2", "6.0", "30 ± 0"], reach     # only run 1, step 6
    assert reach[("second", "0.70")] == ["0 of 2", "-", "-"], reach
    r = subprocess.run([sys.executable, str(TOOL), str(p[0]), "--"], capture_output=True, text=True)
    assert r.returncode != 0 and "at least one metrics file" in r.stderr, (r.returncode, r.stderr)
print("staleness_stats: ok")
