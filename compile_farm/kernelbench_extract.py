"""What a KernelBench-format answer asks torch.utils.cpp_extension.load_inline to build, read from
its syntax tree: nothing of the answer runs. Run by the compile farm inside its sandbox.

Usage: python3 -I -B kernelbench_extract.py SOURCE DISPLAY_NAME
Prints one JSON object: {"extensions": [{name, cpp_sources, cuda_sources, functions,
extra_cflags, extra_cuda_cflags, line}]}; a syntax error or an argument that is not a literal
(or a module-level name bound to one) is printed as "FILE:LINE:COL: message" with exit code 1.
"""

import ast
import json
import sys

# load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
#             extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, ...)
POSITIONAL = ["name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
              "extra_ldflags", "extra_include_paths"]
IGNORED = {"verbose", "build_directory", "with_cuda", "is_python_module", "with_pytorch_error_handling",
           "keep_intermediates", "use_pch", "extra_ldflags"}


class NotLiteral(Exception):
    pass


def literal(node, names):
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue) and v.format_spec is None and v.conversion == -1:
                parts.append(str(literal(v.value, names)))
            else:
                raise NotLiteral(node)
        return "".join(parts)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(e, names) for e in node.elts]
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return literal(node.left, names) + literal(node.right, names)
    raise NotLiteral(node)


def strings(value, what, line):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise ValueError(f"{line}: load_inline's {what} must be a string or a list of strings")


def main():
    path, display = sys.argv[1], sys.argv[2]
    try:
        tree = ast.parse(open(path, "rb").read(), display)
    except SyntaxError as e:
        print(f"{e.filename}:{e.lineno}:{e.offset}: {e.msg}")
        print((e.text or "").rstrip())
        return 1
    except ValueError as e:
        print(f"{display}: {e}")
        return 1
    names = {}
    for stmt in tree.body:  # module-level names, in order: what a call can see of them
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    try:
                        names[t.id] = literal(stmt.value, names)
                    except NotLiteral:
                        names.pop(t.id, None)
    # `from torch.utils.cpp_extension import load_inline as build`: calls of `build` are load_inline's.
    callees = {"load_inline"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("cpp_extension"):
            callees.update(n.asname for n in node.names if n.name == "load_inline" and n.asname)
    extensions = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        callee = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if callee not in callees:
            continue
        where = f"{display}:{node.lineno}:{node.col_offset + 1}"
        args = dict(zip(POSITIONAL, node.args))
        args.update({k.arg: k.value for k in node.keywords if k.arg})
        try:
            got = {k: literal(v, names) for k, v in args.items() if k not in IGNORED}
        except NotLiteral as e:
            print(f"{where}: load_inline's arguments must be literals or module-level names bound to literals "
                  f"(leap builds the extension before the answer runs); line {e.args[0].lineno} is not")
            return 1
        if got.get("extra_include_paths"):
            print(f"{where}: load_inline's extra_include_paths are not available (only the toolkit's and PyTorch's headers)")
            return 1
        if not isinstance(got.get("name"), str) or not got["name"].isidentifier():
            print(f"{where}: load_inline's name must be a literal identifier")
            return 1
        try:
            extensions.append({
                "name": got["name"], "line": node.lineno,
                "cpp_sources": strings(got.get("cpp_sources"), "cpp_sources", where),
                "cuda_sources": strings(got.get("cuda_sources"), "cuda_sources", where),
                "functions": strings(got.get("functions"), "functions", where),
                "extra_cflags": strings(got.get("extra_cflags"), "extra_cflags", where),
                "extra_cuda_cflags": strings(got.get("extra_cuda_cflags"), "extra_cuda_cflags", where),
            })
        except ValueError as e:
            print(e)
            return 1
    if len({e["name"] for e in extensions}) != len(extensions):
        print(f"{display}: two load_inline calls with the same name")
        return 1
    print(json.dumps({"extensions": extensions}))
    return 0


sys.exit(main())
