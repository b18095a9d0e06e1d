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


FUNCTION = re.compile(r"^( {0,2})[A-Za-z_~][^;=]*\)\s*(const\s*)?(override\s*)?(noexcept\s*)?\{$")
CONTROL = re.compile(r"^\s*(if|for|while|switch|else|do|namespace|class|struct|enum|union)\b")


def long_functions(text, limit):
    """(first line, length, signature) of functions longer than `limit` lines without a reason: a
    comment right above them that says "Long:" why."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FUNCTION.match(lines[i])
        if not m or CONTROL.match(lines[i]):
            i += 1
            continue
        close = m.group(1) + "}"
        j = i + 1
        while j < len(lines) and not (lines[j].startswith(close) and lines[j][len(close):len(close) + 1] in ("", ";", ")", " ")):
            j += 1
        k = i - 1
        reason = False
        while k >= 0 and lines[k].strip().startswith("//"):
            reason = reason or "Long:" in lines[k]
            k -= 1
        if j - i + 1 > limit and not reason:
            out.append((i + 1, j - i + 1, lines[i].strip()))
        i = j + 1
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
    for m, files in mods.items():
        if m == "tests":  # a test reads top to bottom as the scenario it checks
            continue
        for f in files:
            for line, n, sig in long_functions(f.read_text(errors="replace"), a.max_function_lines):
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
        print(f"check_layout: {len(mods)} folders, no include cycle, no file over {a.max_lines} lines, no function "
              f"over {a.max_function_lines} without a reason", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
