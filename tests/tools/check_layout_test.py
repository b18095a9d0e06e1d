#!/usr/bin/env python3
"""tools/check_layout.py on small trees: it passes a tree that keeps the map's rules and names
the cycle, the forbidden include, the long file and the long function of one that does not."""
import pathlib
import subprocess
import sys
import tempfile

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "check_layout.py"


def run(files):
    with tempfile.TemporaryDirectory() as d:
        for path, text in files.items():
            p = pathlib.Path(d, path)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        r = subprocess.run([sys.executable, str(TOOL), "--root", d], capture_output=True, text=True)
        return r.returncode, r.stderr


good = {"common/a.h": "#pragma once\n", "tasks/t.h": '#include "common/a.h"\n', "lm/m.cpp": '#include "common/a.h"\n'}
rc, err = run(good)
assert rc == 0, err

rc, err = run({**good, "common/a.h": '#include "tasks/t.h"\n'})
assert rc == 1 and "include cycle between folders: common -> tasks -> common" in err, err
assert "common/ may not include tasks/" in err, err

rc, err = run({**good, "lm/m.cpp": '#include "memory/x.h"\n', "memory/x.h": "\n"})
assert rc == 1 and "lm/m.cpp includes memory/x.h: lm/ may not include memory/" in err, err

rc, err = run({**good, "tasks/long.cpp": "\n" * 501})
assert rc == 1 and "tasks/long.cpp has 501 lines (limit 500)" in err, err

rc, err = run({**good, "newthing/x.cpp": '#include "common/a.h"\n'})
assert rc == 1 and "newthing/ is not in the module map" in err, err

rc, err = run({**good, "lm/m.cpp": '#include "tests/support/x.h"\n', "tests/support/x.h": "\n"})
assert rc == 1 and "a module includes tests/" in err, err
body = "int f() {\n" + "  g();\n" * 85 + "}\n"
rc, err = run({**good, "lm/long.cpp": body})
assert rc == 1 and "lm/long.cpp:1: a function of 87 lines (limit 80)" in err, err
rc, err = run({**good, "lm/long.cpp": "// Long: one recipe read in order.\n" + body})
assert rc == 0, err
print("check_layout_test: 8 trees as expected")
