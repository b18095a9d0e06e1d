#!/usr/bin/env python3
"""The module map's rules, checked: no include cycle between top-level folders, no source file over
the line limit, no function over its limit without a "Long:" reason in the comment above it, and
every folder's includes within what docs/architecture.md allows.

Usage: tools/check_layout.py [--root DIR] [--table] [--max-lines N]
  --table  print the module table (folder, lines, what it includes) in Markdown
Exit 1 with the offending cycle, file or include when a rule is broken.
"""
import argparse
import pathlib
import re
import subprocess
import sys

SOURCES = (".cpp", ".h", ".cu", ".cuh")
SKIP = {"build", "build-gpu", "runs", ".git", ".deps", "docs", "python", "deploy", "slurm", "configs", "examples"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# What each folder may include (docs/architecture.md); "*": anything but tests/.
ALLOWED = {
    "common": set(),
    "include": set(),
    "tasks": {"common"},
    "sandbox": {"common"},
    "compile_farm": {"common", "tasks", "sandbox"},
    "judge": {"common", "tasks", "sandbox", "compile_farm"},
    "evaluation": {"common", "tasks", "compile_farm"},
    "prompt": {"common", "tasks"},
    "lm": {"common"},
    "memory": {"common"},
    "policy": {"common", "tasks", "prompt", "lm"},
    "learner": {"common", "tasks", "policy", "memory"},
    "coordinator": {"common", "tasks"},
    "worker": {"common", "tasks", "policy", "evaluation"},
    "loop": {"common", "tasks", "policy", "evaluation", "coordinator", "learner", "worker"},
    "agent": {"common", "tasks", "prompt", "lm", "memory", "evaluation"},
    "serve": {"common", "tasks", "evaluation", "learner", "prompt"},
    "report": {"common", "memory"},
    "bench": {"*"},
    "apps": {"*"},
    "tests": {"*", "tests"},
}

# The rooms inside a folder (docs/architecture.md, "The judge's rooms"): what each may include of
# its folder. The folder's own top level (the sequence of phases) may include every room; a room
# never includes the top level.
ROOMS = {
    "judge": {
        "timing": set(),
        "device": {"timing"},
        "check": {"device", "timing", "runner"},
        "pool": {"device", "timing", "runner"},
        "runner": set(),
    },
}


def room_violations(root, mods):
    """'file includes X: room/ may not include other/' for each include between rooms that ROOMS
    does not allow, and each include of the folder's top level from a room."""
    out = []
    for folder, rooms in ROOMS.items():
        for f in mods.get(folder, []):
            rel = f.relative_to(root / folder).parts
            if len(rel) < 2:
                continue
            room = rel[0]
            for inc in INCLUDE.findall(f.read_text(errors="replace")):
                parts = inc.split("/")
                if parts[0] != folder:
                    continue
                target = parts[1] if len(parts) > 2 else "the top level"
                if target == room:
                    continue
                if room not in rooms:
                    out.append(f"{f.relative_to(root)}: {folder}/{room}/ is not a room of {folder}/ (tools/check_layout.py ROOMS)")
                elif target not in rooms[room]:
                    allowed = ", ".join(sorted(rooms[room])) or "no other room"
                    out.append(f"{f.relative_to(root)} includes {inc}: {folder}/{room}/ may not include "
                               f"{target if target == 'the top level' else target + '/'} (it may include: {allowed})")
    return out


TABLE_ROW = re.compile(r"^\| `([a-z_]+)/` \|(.*)\|\s*$")


def doc_table_errors(doc, graph):
    """The module table of docs/architecture.md against the tree: a row per folder, its "may
    include" column the map's rule and its "includes" column what the code includes."""
    rows = {}
    text = doc.read_text()
    text = text[text.find("## The map"):]
    text = text[:text.find("\n## ", 1)] if "\n## " in text[1:] else text
    for line in text.splitlines():
        m = TABLE_ROW.match(line)
        if m:
            cells = [c.strip() for c in m.group(2).split("|")]
            rows[m.group(1)] = cells
    out = []
    words = lambda cell: set() if cell in ("-", "") else {w.strip() for w in cell.split(",")}
    for m in sorted(set(graph) | set(rows)):
        if m not in rows:
            out.append(f"{doc.name}: no row for {m}/ in the module table")
            continue
        if m not in graph:
            out.append(f"{doc.name}: the module table has a row for {m}/, which the tree does not have")
            continue
        cells = rows[m]
        if len(cells) < 4:
            out.append(f"{doc.name}: the row of {m}/ has {len(cells) + 1} columns, not 5")
            continue
        may, inc = words(cells[2]), words(cells[3])
        want_may = {"any" if x == "*" else x for x in ALLOWED.get(m, set())}
        want_inc = {k for k in graph[m] if m == "tests" or k != "tests"}
        if may != want_may:
            out.append(f"{doc.name}: {m}/ may include {', '.join(sorted(want_may)) or '-'} (the table says "
                       f"{cells[2]})")
        if inc != want_inc:
            out.append(f"{doc.name}: {m}/ includes {', '.join(sorted(want_inc)) or '-'} (the table says {cells[3]})")
    return out

# Folders whose C++ follows .clang-format (the layout check runs clang-format over them).
FORMATTED = ["judge"]


def format_errors(root):
    """clang-format's complaints about the FORMATTED folders, and shellcheck's (warnings and errors)
    about the project's scripts (docs/ holds records of past runs, not the product)."""
    out = []
    cpp = [str(f.relative_to(root)) for d in FORMATTED for f in sorted((root / d).rglob("*")) if f.suffix in SOURCES]
    scripts = [str(f.relative_to(root)) for f in sorted(root.rglob("*.sh"))
               if not any(p in SKIP - {"deploy", "slurm", "python", "examples", "configs"} or p.startswith(".")
                          for p in f.relative_to(root).parts[:-1])]
    for tool, flags, files in (("clang-format", ["--dry-run", "-Werror"], cpp),
                               ("shellcheck", ["-S", "warning", "-f", "gcc"], scripts)):
        if not files:
            continue
        try:
            r = subprocess.run([tool, *flags, *files], capture_output=True, text=True, cwd=root)
        except FileNotFoundError:
            out.append(f"{tool} is not installed (deploy/install-deps.sh installs it)")
            continue
        if r.returncode:
            lines = [x for x in (r.stdout + r.stderr).splitlines() if ": error:" in x or ": warning:" in x]
            out.extend(f"{tool}: {x}" for x in lines[:20])
            if not lines:
                out.append(f"{tool} failed: {(r.stdout + r.stderr)[-300:]}")
    return out


def modules(root):
    """folder -> list of source files (tests/ and include/ are folders like the others)."""
    out = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in SKIP and not p.name.startswith(".")):
        files = [f for f in d.rglob("*") if f.suffix in SOURCES and "fixtures" not in f.parts]
        if files:
            out[d.name] = files
    return out


def edges(root, mods):
    """folder -> {folder it includes: example include line}."""
    names = set(mods)
    graph = {m: {} for m in mods}
    for m, files in mods.items():
        for f in files:
            for inc in INCLUDE.findall(f.read_text(errors="replace")):
                top = inc.split("/", 1)[0]
                if "/" in inc and top in names and top != m:
                    graph[m].setdefault(top, f"{f.relative_to(root)} includes {inc}")
    return graph


CONTROL = re.compile(r"^\s*(if|for|while|switch|else|do|namespace|class|struct|enum|union|extern|template\s*<[^>]*>\s*(class|struct))\b")
ACCESS = re.compile(r"^\s*(public|private|protected)\s*:\s*$")


def _code(line):
    """The line without a trailing // comment (a string holding // is rare in a signature)."""
    return line.split("//", 1)[0].rstrip()


def _reason_above(lines, k):
    """Whether the comment block that ends at line k (going up) says "Long:"."""
    reason = False
    while k >= 0 and (lines[k].strip().startswith("//") or lines[k].strip().startswith("#")
                      or lines[k].strip().startswith("@")):
        reason = reason or "Long:" in lines[k]
        k -= 1
    return reason


def cpp_functions(text):
    """(first line index, last line index) of each function defined at namespace or class level:
    a statement that starts at an indent of at most two, whose signature may span several lines,
    and ends with "{" after a ")" (constructors' initialiser lists included)."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        code = _code(lines[i])
        if not code.endswith("{"):
            i += 1
            continue
        s = i  # the statement's first line: back over lines that do not end another statement
        while s > 0:
            prev = _code(lines[s - 1]).strip()
            if (not prev or prev.endswith((";", "{", "}")) or prev.startswith(("#", "//", "/*", "*"))
                    or ACCESS.match(prev)):
                break
            s -= 1
        first = lines[s]
        indent = len(first) - len(first.lstrip(" "))
        stmt = " ".join(_code(x).strip() for x in lines[s:i + 1])
        head = stmt.split("(", 1)[0]
        if (indent > 2 or "(" not in stmt or "=" in head or not head.strip() or CONTROL.match(stmt)
                or not re.search(r"\)[^()]*\{$", stmt) and not re.search(r"\)\s*:.*\{$", stmt)):
            i += 1
            continue
        close = first[:indent] + "}"
        j = i + 1
        while j < len(lines) and not (lines[j].startswith(close) and lines[j][len(close):len(close) + 1] in ("", ";", ")", " ")):
            j += 1
        out.append((s, min(j, len(lines) - 1)))
        i = j + 1
    return out


PY_DEF = re.compile(r"^(\s*)(async\s+)?def\s+\w+")


def py_functions(text):
    """(first line index, last line index) of each Python function: from its def to its last line
    indented deeper than the def."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        m = PY_DEF.match(line)
        if not m:
            continue
        indent, last = len(m.group(1)), i
        for j in range(i + 1, len(lines)):
            if not lines[j].strip():
                continue
            if len(lines[j]) - len(lines[j].lstrip()) <= indent and not lines[j].lstrip().startswith(("#", ")")):
                break
            last = j
        out.append((i, last))
    return out


def long_functions(text, limit, python=False):
    """(first line, length, signature) of functions longer than `limit` lines without a reason: a
    comment right above them that says "Long:" why."""
    lines = text.split("\n")
    out = []
    for first, last in (py_functions if python else cpp_functions)(text):
        n = last - first + 1
        if n > limit and not _reason_above(lines, first - 1):
            out.append((first + 1, n, " ".join(x.strip() for x in lines[first:first + 3])))
    return out


def function_files(root, mods):
    """The C++ of every module and the Python of the whole tree (the client, the runner, the tools),
    except tests/: a test reads top to bottom as the scenario it checks."""
    out = [f for m, files in mods.items() if m != "tests" for f in files]
    skip = {"build", "build-gpu", "runs", ".git", ".deps", "tests", "node_modules"}
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).parts
        if not any(p in skip or p.startswith((".", "build")) for p in rel[:-1]) and "fixtures" not in rel:
            out.append(f)
    return out


def find_cycle(graph):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for k in sorted(graph[n]):
            if state.get(k) == 1:
                return stack[stack.index(k):] + [k]
            if k not in state:
                c = visit(k)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--max-lines", type=int, default=500)
    ap.add_argument("--max-function-lines", type=int, default=80)
    a = ap.parse_args()
    root = pathlib.Path(a.root)
    mods = modules(root)
    graph = edges(root, mods)
    ok = True
    # tests/ may include anything; nothing may include tests/.
    core = {m: {k: v for k, v in g.items() if k != "tests"} for m, g in graph.items() if m != "tests"}
    for m, g in graph.items():
        if m != "tests" and "tests" in g:
            print(f"check_layout: {g['tests']}: a module includes tests/", file=sys.stderr)
            ok = False
    for m, g in core.items():
        allowed = ALLOWED.get(m)
        if allowed is None:
            print(f"check_layout: {m}/ is not in the module map (tools/check_layout.py ALLOWED, docs/architecture.md)",
                  file=sys.stderr)
            ok = False
            continue
        for k, where in sorted(g.items()):
            if "*" not in allowed and k not in allowed:
                print(f"check_layout: {where}: {m}/ may not include {k}/ (it may include: "
                      f"{', '.join(sorted(allowed)) or 'nothing'})", file=sys.stderr)
                ok = False
    for v in room_violations(root, mods):
        print(f"check_layout: {v}", file=sys.stderr)
        ok = False
    doc = root / "docs" / "architecture.md"
    if doc.exists():
        for e in doc_table_errors(doc, graph):
            print(f"check_layout: {e}", file=sys.stderr)
            ok = False
    for e in format_errors(root):
        print(f"check_layout: {e}", file=sys.stderr)
        ok = False
    cycle = find_cycle(core)
    if cycle:
        print("check_layout: include cycle between folders: " + " -> ".join(cycle), file=sys.stderr)
        for x, y in zip(cycle, cycle[1:]):
            print(f"  {core[x][y]}", file=sys.stderr)
        ok = False
    for m, files in mods.items():
        for f in files:
            n = f.read_text(errors="replace").count("\n")
            if n > a.max_lines:
                print(f"check_layout: {f.relative_to(root)} has {n} lines (limit {a.max_lines})", file=sys.stderr)
                ok = False
    for f in function_files(root, mods):
        if True:
            for line, n, sig in long_functions(f.read_text(errors="replace"), a.max_function_lines, f.suffix == ".py"):
                print(f"check_layout: {f.relative_to(root)}:{line}: a function of {n} lines (limit "
                      f"{a.max_function_lines}) with no \"Long:\" reason in its comment: {sig[:80]}", file=sys.stderr)
                ok = False
    if a.table:
        print("| folder | lines | files | includes | may include |")
        print("|---|---:|---:|---|---|")
        for m, files in mods.items():
            lines = sum(f.read_text(errors="replace").count("\n") for f in files)
            may = ", ".join(sorted(ALLOWED.get(m, {"?"}))).replace("*", "any") or "-"
            print(f"| `{m}/` | {lines} | {len(files)} | {', '.join(sorted(graph[m])) or '-'} | {may} |")
    if ok:
        print(f"check_layout: {len(mods)} folders, no include cycle, the judge's rooms kept, no file over {a.max_lines} "
              f"lines, no function over {a.max_function_lines} without a reason, {', '.join(FORMATTED)} formatted, "
              f"the scripts shellcheck-clean, docs/architecture.md's table current", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
