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
# A signature over several lines is a function's too, and so is a constructor's initialiser list.
multi = ("bool Judgement::await_call(const Command& c, size_t index,\n"
         "                           double* waited_us) {\n" + "  g();\n" * 85 + "}\n")
rc, err = run({**good, "lm/multi.cpp": multi})
assert rc == 1 and "lm/multi.cpp:1: a function of 88 lines (limit 80)" in err, err
ctor = "Foo::Foo(int a)\n    : a_(a), b_(a) {\n" + "  g();\n" * 85 + "}\n"
rc, err = run({**good, "lm/ctor.cpp": ctor})
assert rc == 1 and "lm/ctor.cpp:1: a function of 88 lines" in err, err
# A namespace, a struct or a lambda at namespace level is no function.
rc, err = run({**good, "lm/ns.cpp": "namespace x {\n" + "int a;\n" * 90 + "}\n",
               "lm/s.h": "struct S {\n" + "  int a;\n" * 90 + "};\n"})
assert rc == 0, err
# Python functions, wherever they are (tests/ aside); a decorator and a "# Long:" comment above.
py = "def main():\n" + "    x = 1\n" * 85 + "\n\ndef short():\n    return 1\n"
rc, err = run({**good, "bench/b.py": py})
assert rc == 1 and "bench/b.py:1: a function of 86 lines (limit 80)" in err, err
rc, err = run({**good, "bench/b.py": "# Long: the steps in order.\n@decorated\n" + py})
assert rc == 0, err
rc, err = run({**good, "tests/t.py": py})
assert rc == 0, err
# The judge's rooms: a room includes only what ROOMS allows, and never the top level.
judge = {"judge/judgement.h": '#include "judge/timing/t.h"\n', "judge/timing/t.h": "\n",
         "judge/device/d.h": '#include "judge/timing/t.h"\n'}
rc, err = run({**good, **judge})
assert rc == 0, err
rc, err = run({**good, **judge, "judge/timing/t.h": '#include "judge/device/d.h"\n'})
assert rc == 1 and "judge/timing/t.h includes judge/device/d.h: judge/timing/ may not include device/" in err, err
rc, err = run({**good, **judge, "judge/device/d.h": '#include "judge/judgement.h"\n'})
assert rc == 1 and "judge/device/ may not include the top level" in err, err
# docs/architecture.md's module table against the tree.
table = ("## The map\n\n| folder | owns | CMake targets | may include | includes |\n|---|---|---|---|---|\n"
         "| `common/` | c | t | - | - |\n| `tasks/` | t | t | common | common |\n| `lm/` | l | t | common | common |\n"
         "\n## Next\n\n| `other/` | not the map | - | - | - |\n")
rc, err = run({**good, "docs/architecture.md": table})
assert rc == 0, err
rc, err = run({**good, "docs/architecture.md": table.replace("| `lm/` | l | t | common | common |\n", "")})
assert rc == 1 and "no row for lm/" in err, err
rc, err = run({**good, "docs/architecture.md": table.replace("| t | t | common | common |", "| t | t | common | - |")})
assert rc == 1 and "tasks/ includes common (the table says -)" in err, err
# The judge's C++ follows .clang-format; the scripts pass shellcheck (docs/ aside).
fmt = (TOOL.parents[1] / ".clang-format").read_text()
rc, err = run({**good, ".clang-format": fmt, "judge/timing/t.h": "int  f( int x ){return x;}\n"})
assert rc == 1 and "clang-format: judge/timing/t.h" in err, err
rc, err = run({**good, ".clang-format": fmt, "judge/timing/t.h": "int f(int x) { return x; }\n"})
assert rc == 0, err
rc, err = run({**good, "bench/run.sh": "#!/bin/bash\nexport X=$(date)\n"})
assert rc == 1 and "shellcheck: bench/run.sh:2" in err and "SC2155" in err, err
rc, err = run({**good, "docs/old/run.sh": "#!/bin/bash\nexport X=$(date)\n"})
assert rc == 0, err
print("check_layout_test: 26 trees as expected")
