#!/usr/bin/env python3
"""Imports KernelBench-format problems as leap tasks; `leap tasks import kernelbench` runs it.

A problem file defines a `Model(nn.Module)`, module-level size constants, `get_inputs()` and
`get_init_inputs()`. For each one this writes DIR/<task>/task.toml and the reference module,
traced (or scripted) to TorchScript with its parameters and buffers inside:
reference.<backend>.pt, made on this machine (cpu, and cuda where PyTorch sees a GPU).
The module's parameters and buffers become further read-only inputs of the task, after the
forward's inputs, in state_dict order (docs/candidate-abi.md).

CPU sizes: when the inputs at the problem's own sizes exceed --cpu-elements elements,
every module-level integer constant >= 16 is divided by the same power of two until they fit,
none below 16 (or, when that cannot fit, below 1); smaller constants (channels, kernel sizes,
strides) are kept.
"""
import argparse
import ast
import contextlib
import fnmatch
import gc
import inspect
import json
import math
import os
import re
import resource
import sys
import traceback
import warnings

DTYPES = {}  # torch dtype -> leap dtype name, filled once torch is imported
FACTORIES = ("randn", "rand", "randint", "zeros", "ones", "empty", "full", "arange", "tensor")


def first_line(e):
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    return (lines[0] if lines else type(e).__name__)[:200]


def fail(msg):
    print(f"kernelbench import: {msg}", file=sys.stderr)
    sys.exit(2)


def numbered(name):
    """KernelBench's order: by the problem's number (1_, 2_, ..., 10_), then by name."""
    m = re.match(r"(\d+)_", name)
    return (int(m.group(1)) if m else 1 << 30, name)


def problem_files(src, levels, pattern):
    """(level, path) of every problem, from SRC/levelN, SRC/KernelBench/levelN, or SRC itself."""
    found = []
    for level in levels:
        for base in (os.path.join(src, f"level{level}"), os.path.join(src, "KernelBench", f"level{level}")):
            if os.path.isdir(base):
                found += [(level, os.path.join(base, f)) for f in sorted(os.listdir(base), key=numbered) if f.endswith(".py")]
                break
    if not found and os.path.isdir(src):  # a plain folder of problems: level 1
        found = [(1, os.path.join(src, f)) for f in sorted(os.listdir(src), key=numbered) if f.endswith(".py")]
    return [(lv, p) for lv, p in found if fnmatch.fnmatch(os.path.basename(p), pattern)]


def task_name(level, path):
    stem = os.path.splitext(os.path.basename(path))[0].lower()
    return f"kb{level}_" + re.sub(r"[^a-z0-9]+", "_", stem).strip("_")


def load_module(source, path, overrides=None):
    """Executes the problem file one top-level statement at a time, a size constant replaced as
    soon as it is assigned: constants derived from it (bias_shape = (out_channels, 1, 1)) follow."""
    ns = {"__name__": "kernelbench_problem", "__file__": path}
    overrides = overrides or {}
    for node in ast.parse(source, path).body:
        exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), ns)
        targets = node.targets if isinstance(node, ast.Assign) else []
        for t in targets:
            if isinstance(t, ast.Name) and t.id in overrides:
                ns[t.id] = overrides[t.id]
    for needed in ("Model", "get_inputs", "get_init_inputs"):
        if needed not in ns:
            raise ImportError(f"no {needed} defined")
    return ns


def size_constants(ns, source):
    """Module-level integer constants assigned in the file (not imported names)."""
    names = set(re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=", source, re.M))
    return {k: ns[k] for k in names if isinstance(ns.get(k), int) and not isinstance(ns.get(k), bool)}


@contextlib.contextmanager
def meta_factories(torch):
    """torch's tensor factories make meta tensors (shapes only, nothing allocated) inside."""
    saved = {f: getattr(torch, f) for f in FACTORIES if hasattr(torch, f)}

    def meta(f):
        def make(*a, **k):
            k["device"] = "meta"
            return saved[f](*a, **k)
        return make

    try:
        for f in ("randn", "rand", "randint", "zeros", "ones", "empty", "full"):
            setattr(torch, f, meta(f))
        yield
    finally:
        for f, fn in saved.items():
            setattr(torch, f, fn)


def meta_run(torch, ns):
    """Inputs, the model's state and its outputs on the meta device; outputs None where an op has
    no meta kernel."""
    with meta_factories(torch):
        inputs = ns["get_inputs"]()
        try:
            model = ns["Model"](*ns["get_init_inputs"]()).to("meta")
            state = list(model.state_dict().values())
            with torch.no_grad():
                outs = model(*inputs)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        except Exception:  # noqa: BLE001 - an op without a meta kernel
            state, outs = None, None
    return inputs, state, outs


def count_elements(torch, run):
    """Elements of the inputs, and of every tensor the problem makes (inputs, parameters, outputs),
    from a meta_run: nothing is allocated. Where the problem's ops allow no forward pass on the
    meta device, the inputs alone."""
    inputs, state, outs = run
    n_inputs = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
    made = [t for t in (state or []) + (outs or []) if isinstance(t, torch.Tensor)]
    return n_inputs, n_inputs + sum(t.numel() for t in made)


def shapes_of(torch, run):
    """Every tensor's shape in a meta_run (inputs, state, outputs: the order of a build's
    tensors), or None where its forward pass failed."""
    inputs, state, outs = run
    if state is None or not all(isinstance(t, torch.Tensor) for t in inputs + outs):
        return None
    return [tuple(t.shape) for t in inputs + state + outs]


def scaled_overrides(torch, source, path, budget):
    """The size constants to override and the scale, and the tensors' shapes at the file's own
    sizes where the scale is above 1 (None where no meta forward pass runs)."""
    ns = load_module(source, path)
    consts = size_constants(ns, source)
    own = meta_run(torch, ns)
    # Inputs within the budget, and everything the problem makes (parameters and outputs too:
    # a matmul with a small K has 1 M input elements and a 268 M-element output) within 8x it,
    # so that an import's memory stays bounded whatever the problem.
    def fits(counts):
        return counts[0] <= budget and counts[1] <= 8 * budget

    if fits(count_elements(torch, own)):
        return {}, 1, None
    big = {k: v for k, v in consts.items() if v >= 16}
    # First keep every scaled constant >= 16 (channel counts stay divisible by group counts and
    # heads); only when that cannot fit, let them go down to 1.
    for floor in (16, 1):
        for shift in range(1, 24):
            s = 1 << shift
            over = {k: max(floor, v // s) for k, v in big.items()}
            if fits(count_elements(torch, meta_run(torch, load_module(source, path, over)))):
                return over, s, shapes_of(torch, own)
    raise ValueError("cannot scale the inputs under the CPU budget")


def distribution_of(torch, t):
    if t.dtype in (torch.int32, torch.int64):
        lo, hi = int(t.min()), int(t.max())
        return {"kind": "uniform", "low": lo, "high": hi + 1}
    x = t.detach().double()
    lo, hi = float(x.min()), float(x.max())
    if lo >= 0 and hi < 1:
        return {"kind": "uniform", "low": 0.0, "high": 1.0}
    return {"kind": "normal", "mean": 0.0, "std": 1.0} if abs(float(x.mean())) < 0.2 else {
        "kind": "normal", "mean": round(float(x.mean()), 3), "std": round(float(x.std()), 3)}


def draw(torch, dist, like):
    """Fresh values from `dist`, as leap's judge draws them, shaped and typed like `like`."""
    if dist["kind"] == "uniform" and not like.is_floating_point():
        return torch.randint(int(dist["low"]), int(dist["high"]), like.shape, dtype=like.dtype, device=like.device)
    if dist["kind"] == "uniform":
        return torch.rand_like(like) * (dist["high"] - dist["low"]) + dist["low"]
    return torch.randn_like(like) * dist.get("std", 1.0) + dist.get("mean", 0.0)


def copies_an_input(torch, model, inputs, dists, seed):
    """True when, on fresh draws from `dists`, an output is one of the inputs unchanged (a copy
    would pass: ReLU of torch.rand); raises when the forward is not finite there."""
    torch.manual_seed(seed)
    xs = [draw(torch, d, t) for d, t in zip(dists, inputs)]
    with torch.no_grad():
        outs = model(*xs)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    for o in outs:
        if o.is_floating_point() and not bool(torch.isfinite(o).all()):
            raise ValueError("the forward is not finite on inputs drawn from " + str(dists))
    return any(o.shape == x.shape and o.dtype == x.dtype and bool(torch.equal(o, x)) for o in outs for x in xs)


def widened(dist, k=1):
    """A draw that is not non-negative: uniform [0, h) becomes [-k h, k h); others are kept."""
    if dist["kind"] == "uniform" and isinstance(dist["low"], float) and dist["low"] >= 0:
        return {"kind": "uniform", "low": -k * dist["high"], "high": k * dist["high"]}
    return dist


def same(torch, a, b):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and torch.allclose(x.double(), y.double(), atol=1e-5, rtol=1e-5, equal_nan=True)
        for x, y in zip(a, b))


def toml_value(v):
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    return str(v)


def init_json(init):
    """Model(...)'s arguments as JSON (a KernelBench-format answer's ModelNew gets the same), or
    None when one is not plain data (numbers, strings, lists)."""
    try:
        return json.dumps(init)
    except (TypeError, ValueError):
        return None


def build(torch, path, source, device, seed, budget):
    """The problem's reference module on one device, checked; its tensors at that device's sizes."""
    overrides, scale, own = ({}, 1, None) if device != "cpu" else scaled_overrides(torch, source, path, budget)
    ns = load_module(source, path, overrides)
    # Tensors made where they are used: KernelBench's GPU sizes reach 1.6 G elements per input,
    # minutes of CPU random numbers per problem (only shapes and distributions are kept).
    on_device = torch.device(device) if device != "cpu" and hasattr(torch, "set_default_device") \
        else contextlib.nullcontext()
    with on_device:
        torch.manual_seed(seed)
        init = list(ns["get_init_inputs"]())
        model = ns["Model"](*init).eval().to(device)
        torch.manual_seed(seed + 1)
        inputs = ns["get_inputs"]()
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise ValueError("get_inputs() returns a value that is not a tensor")
    inputs = [t.to(device) for t in inputs]
    with torch.no_grad():
        first = model(*inputs)
        again = model(*inputs)
        if not same(torch, first, again):
            raise ValueError("forward is not deterministic (random ops inside forward)")
        torch.manual_seed(seed + 2)
        with on_device:
            other = [t.to(device) for t in ns["get_inputs"]()]
        expect = model(*other)
        module, how = torchscript_of(torch, model, inputs, other, expect)
    outs = first if isinstance(first, (tuple, list)) else (first,)
    for o in outs:
        if not isinstance(o, torch.Tensor):
            raise ValueError("forward returns a value that is not a tensor")
    params = list(model.state_dict().items())
    for label, t in [(f"input {i}", x) for i, x in enumerate(inputs)] + [(k, v) for k, v in params] + \
            [(f"output {i}", o) for i, o in enumerate(outs)]:
        if t.dtype not in DTYPES:
            raise ValueError(f"{label} has dtype {t.dtype}, which leap tasks do not carry")
    arg_names = [p for p in inspect.signature(ns["Model"].forward).parameters if p != "self"]
    if len(arg_names) != len(inputs) or any(n.startswith("*") for n in arg_names):
        arg_names = [f"x{i}" for i in range(len(inputs))]
    with on_device:
        dists, note = input_draws(torch, model, inputs, seed)
    return {"module": module, "how": how, "scale": scale, "own_shapes": own,
            "tensors": named_tensors(arg_names, inputs, dists, params, outs), "note": note,
            "init_inputs": init_json(init),
            "doc": inspect.getdoc(ns["Model"]) or "",
            "inputs": len(inputs), "parameters": len(params), "outputs": len(outs)}


def torchscript_of(torch, model, inputs, other, expect):
    """The model traced (or, where the trace disagrees on `other` inputs, scripted) and how; ValueError
    when neither reproduces `expect`."""
    module, how, why = None, None, []
    try:
        traced = torch.jit.trace(model, tuple(inputs), check_trace=False)
        if same(torch, traced(*other), expect):
            module, how = traced, "traced"
        else:
            why.append("the trace disagrees with the model on other inputs (data-dependent control flow)")
    except Exception as e:  # noqa: BLE001 - any failure means: try scripting
        why.append("tracing failed: " + first_line(e))
    if module is None:
        try:
            scripted = torch.jit.script(model)
            if same(torch, scripted(*other), expect):
                module, how = scripted, "scripted"
            else:
                why.append("the scripted module disagrees with the model")
        except Exception as e:  # noqa: BLE001
            why.append("scripting failed: " + first_line(e))
    if module is None:
        raise ValueError("; ".join(why))
    return module, how


def input_draws(torch, model, inputs, seed):
    """Each input's distribution, and a note where it had to be widened."""
    dists = [distribution_of(torch, t) for t in inputs]
    note = ""
    if copies_an_input(torch, model, inputs, dists, seed + 3):
        # The operation is the identity on KernelBench's draw (ReLU of torch.rand): a copy of the
        # input would pass. A symmetric draw, wider until the forward is no copy there (HardTanh
        # clamps to [-1, 1]), if the forward is defined on it.
        still = True
        for k in (1, 2, 4):
            wide = [widened(d, k) for d in dists]
            try:
                still = wide == dists or copies_an_input(torch, model, inputs, wide, seed + 4)
            except ValueError as e:
                raise ValueError("the forward returns an input unchanged on its inputs' draw, and " + str(e)) from e
            if not still:
                break
        if still:
            raise ValueError("the forward returns one of its inputs unchanged on its inputs' draw: "
                             "a copy would pass")
        drawn = next(w for w, d in zip(wide, dists) if w != d)  # a widened uniform draw
        low, high = drawn["low"], drawn["high"]
        dists, note = wide, f"inputs drawn from [{low:g}, {high:g}): on [0, 1) the forward returns an input unchanged"
    return dists, note


def named_tensors(arg_names, inputs, dists, params, outs):
    """(section, name, tensor, extra) of each input (the forward's arguments, then the module's
    parameters by state_dict name) and output."""
    tensors, used = [], set()
    for n, t, d in zip(arg_names, inputs, dists):
        used.add(n)
        tensors.append(("inputs", n, t, {"distribution": d}))
    for k, t in params:
        n = "p_" + re.sub(r"[^A-Za-z0-9]+", "_", k)
        while n in used:
            n += "_"
        used.add(n)
        tensors.append(("inputs", n, t, {"parameter": k}))
    for i, o in enumerate(outs):
        tensors.append(("outputs", "out" if len(outs) == 1 else f"out{i}", o, {}))
    return tensors


def import_problem(torch, level, path, out_dir, devices, seed, budget, fp32_tol):
    """One task for every device given: a module per device, one task.toml with a size table each."""
    source = open(path, encoding="utf-8").read()
    name = task_name(level, path)
    builds = {}
    for device in devices:
        try:
            builds[device] = build(torch, path, source, device, seed, budget)
        except Exception as e:
            raise ValueError(f"{device}: {e}" if len(devices) > 1 else str(e)) from e
    first = builds[devices[0]]
    signature = lambda b: [(s, n, t.dtype, t.dim()) for s, n, t, _ in b["tensors"]]  # noqa: E731
    for device, b in builds.items():  # the same tensors everywhere; only the sizes may differ
        if signature(b) != signature(first):
            raise ValueError(f"the tensors on {device} differ from those on {devices[0]}")
    task_dir = os.path.join(out_dir, name)
    os.makedirs(task_dir, exist_ok=True)
    for device, b in builds.items():
        b["module"].save(os.path.join(task_dir, f"reference.{device}.pt"))
    doc = first["doc"].splitlines()
    title = doc[0] if doc and doc[0] else f"KernelBench level {level}: {os.path.basename(path)}"
    quote = "'" * 3
    lines = [f"name = {toml_value(name)}", f"level = {level}", f"description = {toml_value(title)}",
             'reference = "torchscript"',
             "torch_code = " + quote + "\n" + source.replace(quote, '"' * 3) + "\n" + quote, ""]
    for section, tname, t, extra in first["tensors"]:
        lines.append(f"[[{section}]]")
        lines.append(f"name = {toml_value(tname)}")
        lines.append("shape = [" + ", ".join(toml_value(f"{tname}_{k}") for k in range(t.dim())) + "]")
        lines.append(f"dtype = {toml_value(DTYPES[t.dtype])}")
        lines += [f"{k} = {toml_value(v)}" for k, v in extra.items()]
        lines.append("")
    # KernelBench's check: torch.allclose with atol = rtol = 1e-2 (v0 and v0.1, the published
    # results; its latest eval uses 1e-4 for float32): the same numbers make both harnesses agree.
    lines += ["[tolerance]", f"float32 = {{ atol = {fp32_tol!r}, rtol = {fp32_tol!r} }}",
              "float16 = { atol = 0.01, rtol = 0.01 }", "bfloat16 = { atol = 0.01, rtol = 0.01 }", ""]
    for device, b in builds.items():
        lines.append(f"[sizes.{device}]")
        lines += [f"{tname}_{k} = {int(d)}" for _, tname, t, _ in b["tensors"] for k, d in enumerate(t.shape)]
        lines.append("")
    own = builds.get("cpu", {}).get("own_shapes")
    if own and [len(x) for x in own] == [t.dim() for _, _, t, _ in first["tensors"]]:
        # The problem's own sizes (KernelBench's: GPU sizes), shown beside the scaled ones.
        lines.append("[problem_sizes]")
        lines += [f"{tname}_{k} = {int(d)}" for (_, tname, _, _), shape in zip(first["tensors"], own)
                  for k, d in enumerate(shape)]
        lines.append("")
    inits = {device: b["init_inputs"] for device, b in builds.items() if b["init_inputs"] is not None}
    if inits:
        # At the sizes leap runs (a scaled CPU problem's constants are scaled in them too).
        lines.append("[init_inputs]")
        lines += [f"{device} = {toml_value(text)}" for device, text in inits.items()]
        lines.append("")
    with open(os.path.join(task_dir, "task.toml"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return {"name": name, "how": first["how"], "scale": builds.get("cpu", first)["scale"], "devices": list(builds),
            "inputs": first["inputs"], "parameters": first["parameters"], "outputs": first["outputs"],
            "note": first["note"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("--out", required=True)
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--problems", default="*.py")
    ap.add_argument("--libtorch-version", default="", help="the LibTorch leap's judge loads modules with")
    ap.add_argument("--device", default="", help="cpu, cuda or cpu,cuda (default: cpu, and cuda when PyTorch sees a GPU)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--cpu-elements", type=int, default=1 << 20,
                    help="inputs' elements on the CPU at most (and 8x this for inputs, parameters and outputs)")
    ap.add_argument("--fp32-tolerance", type=float, default=0.01,
                    help="atol = rtol for float32 outputs (KernelBench v0/v0.1: 0.01; its latest eval: 1e-4)")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")  # tracer warnings: whether the trace generalises is checked
    try:
        import torch
    except ImportError:
        fail(f"{sys.executable} has no PyTorch: install it (Debian: python3-torch) or pass --python")
    ours = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if a.libtorch_version:
        theirs = ".".join(a.libtorch_version.split(".")[:2])
        if ours != theirs:
            fail(f"PyTorch {torch.__version__} ({sys.executable}) cannot make modules for leap's LibTorch "
                 f"{a.libtorch_version}: use the Python whose torch matches it (--python)")
    DTYPES.update({torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
                   torch.bfloat16: "bfloat16", torch.int32: "int32", torch.int64: "int64"})
    devices = a.device.split(",") if a.device else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for d in devices:
        if d not in ("cpu", "cuda") or (d == "cuda" and not torch.cuda.is_available()):
            fail(f"--device: '{d}' is not a device this PyTorch can use (cpu, cuda)")
    device = ",".join(devices)
    try:
        levels = [int(x) for x in a.levels.split(",") if x]
    except ValueError:
        fail(f"--levels takes numbers like 1,2,3, not '{a.levels}'")
    if not os.path.isdir(a.src):
        fail(f"{a.src} is not a folder")
    files = problem_files(a.src, levels, a.problems)
    if not files:
        fail(f"no problem files under {a.src} (levels {a.levels}, problems {a.problems})")
    os.makedirs(a.out, exist_ok=True)
    report = {"torch": torch.__version__, "device": device, "levels": {}}
    for k, (level, path) in enumerate(files, 1):
        # Progress on stderr, line by line (a level takes minutes; also when piped).
        print(f"[{k}/{len(files)}] L{level} {os.path.basename(path)}", file=sys.stderr, flush=True)
        rec = report["levels"].setdefault(str(level), {"imported": [], "failed": []})
        try:
            r = import_problem(torch, level, path, a.out, devices, a.seed, a.cpu_elements, a.fp32_tolerance)
            r["file"] = os.path.basename(path)
            rec["imported"].append(r)
            print(f"ok      L{level} {os.path.basename(path)} -> {r['name']} ({r['how']}"
                  + (f", sizes / {r['scale']}" if r["scale"] > 1 else "") + ")"
                  + (f"; {r['note']}" if r["note"] else ""), flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported, the import goes on
            reason = str(e).strip().replace("\n", " ")[:400] or type(e).__name__
            if os.environ.get("LEAP_IMPORT_DEBUG"):
                traceback.print_exc()
            rec["failed"].append({"file": os.path.basename(path), "reason": reason})
            print(f"failed  L{level} {os.path.basename(path)}: {reason}", flush=True)
        # A failed trace leaves frames holding GPU tensors in reference cycles; at GPU sizes
        # (8 GiB inputs) a few problems' leftovers fill the device.
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    with open(os.path.join(a.out, "import-report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"\nKernelBench import ({device}, PyTorch {torch.__version__}) into {a.out}, peak memory {peak_mib} MiB:")
    print("| level | imported | failed |\n|---:|---:|---:|")
    for level in sorted(report["levels"]):
        rec = report["levels"][level]
        print(f"| {level} | {len(rec['imported'])} | {len(rec['failed'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
