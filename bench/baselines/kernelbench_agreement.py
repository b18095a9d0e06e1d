#!/usr/bin/env python3
"""Agreement of leap's verdicts with KernelBench's own harness, on the same kernels.

For every leap candidate `CANDIDATES/<task>.cu` of an imported KernelBench suite (leap tasks import
kernelbench SRC --out SUITE), this writes the equivalent KernelBench answer: a `ModelNew` that
subclasses the problem's `Model` (same parameters) and calls the same kernel source through
torch.utils.cpp_extension.load_inline with a binding to leap's ABI (inputs, then the module's
state_dict tensors in order; outputs allocated with the shapes the import recorded), self-contained
(the few lines of leap/candidate.h it uses inline, PyTorch's DLPack header). It runs KernelBench's
`eval_kernel_against_ref` from the user's checkout on each file, and `leap eval` on the same files
(`--leap-abi`: on the .cu candidates instead), and prints per problem both correctness verdicts and
both speedups, the disagreements, and the throughput of both harnesses (candidates/s) on the same
set in the same run. Triton answers (`--triton DIR`, `<task>.py`: a `ModelNew` appended to the
problem's file) are judged the same way, KernelBench with its `triton` backend.

  kernelbench_agreement.py --kernelbench SRC --suite SUITE [--candidates examples/kernelbench/cuda]
                           [--triton examples/kernelbench/triton]
                           [--leap build/leap] [--trials 5] [--perf-trials 100] [--out DIR]
Needs a GPU, the PyTorch that built the suite, and SRC/src (KernelBench's package).
"""
import argparse
import concurrent.futures
import importlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from kernelbench_load_inline import BINDING, CALL  # noqa: E402  (torch tensors to leap's DLTensors, PyTorch's stream)

EXTENSION = '''
# ---- the candidate, the KernelBench way: the same kernel source through load_inline
import torch as _torch
from torch.utils.cpp_extension import load_inline as _load_inline

_KERNEL = {kernel!r}
_BINDING = {binding!r}
_ext = _load_inline(name={ext_name!r}, cpp_sources=["#include <torch/extension.h>\\nint run(std::vector<torch::Tensor> inputs, std::vector<torch::Tensor> outputs);"],
                    cuda_sources=[_KERNEL + "\\n" + _BINDING], functions=["run"], extra_include_paths={includes!r},
                    verbose=False)
'''

# What the answers take of leap/candidate.h, so that neither harness needs leap's headers: PyTorch's
# DLPack header for DLTensor. Where leap's own header is already in (leap's host pass) it is skipped.
PRELUDE = r"""#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/dlpack.h>
#include <stdint.h>
#include <vector>
#ifndef LEAP_CANDIDATE_H
#define LEAP_ENTRY extern "C"
#define LEAP_DATA(type, tensor) ((type*)((char*)(tensor)->data + (tensor)->byte_offset))
static inline int64_t leap_numel(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}
#endif
"""

# The same call on PyTorch's current stream, whichever compiler builds it (leap's NVRTC split
# compiles host code without __CUDACC__).
SELF_BINDING = "#define LEAP_STREAM(t) ((void*)at::cuda::getCurrentCUDAStream().stream())\n" + CALL


def self_contained(kernel):
    return PRELUDE + re.sub(r"^\s*#\s*include\s*<leap/candidate\.h>[^\n]*$", "", kernel, flags=re.M)


MODEL_NEW = EXTENSION + '''
_OUTPUTS = {outputs!r}


class ModelNew(Model):
    def forward(self, *inputs):
        dev = inputs[0].device
        outs = [_torch.empty(shape, dtype=_torch.float32, device=dev) for shape in _OUTPUTS]
        params = [t.contiguous() for t in self.state_dict().values()]
        rc = _ext.run([x.contiguous() for x in inputs] + params, outs)
        if rc != 0:
            raise RuntimeError("leap_kernel returned %d" % rc)
        return outs[0] if len(outs) == 1 else tuple(outs)
'''


def problem_file(src, level, file):
    for base in (src / f"level{level}", src / "KernelBench" / f"level{level}"):
        if (base / file).is_file():
            return base / file
    raise FileNotFoundError(f"{file} (level {level}) under {src}")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", required=True, type=pathlib.Path, help="the KernelBench checkout")
    ap.add_argument("--suite", required=True, type=pathlib.Path, help="leap tasks import kernelbench --out of it")
    ap.add_argument("--candidates", type=pathlib.Path, default=ROOT / "examples" / "kernelbench" / "cuda")
    ap.add_argument("--triton", type=pathlib.Path, default=ROOT / "examples" / "kernelbench" / "triton",
                    help="Triton ModelNew answers, <task>.py (appended to the problem's file); '' for none")
    ap.add_argument("--leap", default=str(ROOT / "build" / "leap"))
    ap.add_argument("--leap-config", type=pathlib.Path, help="leap eval's --config (e.g. [sandbox] evaluators = 2)")
    ap.add_argument("--include", action="append", default=[], help="include folders (DLPack) for load_inline")
    ap.add_argument("--leap-abi", action="store_true",
                    help="leap evaluates the .cu candidates in its own ABI (default: the same ModelNew files as KernelBench)")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--perf-trials", type=int, default=100)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("kernelbench-agreement"))
    ap.add_argument("--build-jobs", type=int, default=0,
                    help="build the load_inline extensions this many at a time before KernelBench's eval "
                         "(0: one at a time inside it, as KernelBench does); eval then finds them built")
    ap.add_argument("--time-limit", type=float, default=0, help="stop KernelBench's evals after this many seconds")
    ap.add_argument("--inputs-on-gpu", action="store_true",
                    help="KernelBench's get_inputs() draws on the GPU (torch.set_default_device): at its current "
                         "sizes a CPU draw of 1.6 G elements takes seconds, seven times per eval")
    ap.add_argument("--phase", choices=["all", "prepare", "leap", "build", "compare"], default="all",
                    help="prepare: leap eval and the load_inline builds (their times kept in OUT); compare: "
                         "KernelBench's evals and the table (a machine whose calls are time-limited runs them apart)")
    return ap.parse_args()


def kernelbench_eval(checkout):
    """KernelBench's eval_kernel_against_ref from the user's checkout (never copied into leap), without its
    package __init__, which imports the LLM-query helpers (openai, litellm) the eval does not use. Its eval
    imports pydantic (for one result type) and requests; where the GPU machine's Python lacks them, minimal
    stand-ins (a result type with the declared defaults; an empty module)."""
    try:
        import pydantic  # noqa: F401
    except ImportError:
        import copy
        stub = type(sys)("pydantic")

        class BaseModel:
            def __init__(self, **kw):
                for klass in reversed(type(self).__mro__):
                    for k in getattr(klass, "__annotations__", {}):
                        if hasattr(klass, k):
                            setattr(self, k, copy.deepcopy(getattr(klass, k)))
                for k, v in kw.items():
                    setattr(self, k, v)

        stub.BaseModel = BaseModel
        sys.modules["pydantic"] = stub
    try:
        import requests  # noqa: F401
    except ImportError:
        sys.modules["requests"] = type(sys)("requests")
    pkg = type(sys)("kernelbench")
    pkg.__path__ = [str(checkout / "src" / "kernelbench")]
    sys.modules["kernelbench"] = pkg
    try:
        importlib.import_module("kernelbench.utils")
    except ImportError:
        # Its utils import the LLM clients (dotenv, openai, litellm); the eval needs one function
        # from it, the GPU's vendor, which is provided here when those are not installed.
        utils = type(sys)("kernelbench.utils")

        def get_gpu_vendor(device=None):
            import torch
            if not torch.cuda.is_available():
                return "unknown"
            name = torch.cuda.get_device_name(torch.cuda.current_device() if device is None else device).upper()
            return "nvidia" if "NVIDIA" in name else "amd" if ("AMD" in name or "MI3" in name) else "unknown"

        utils.get_gpu_vendor = get_gpu_vendor
        sys.modules["kernelbench.utils"] = utils
    return importlib.import_module("kernelbench.eval").eval_kernel_against_ref


class Answers:
    """The candidates whose problem imported, and the KernelBench answer of each (what both harnesses
    judge unless --leap-abi)."""

    def __init__(self, a):
        self.a = a
        report = json.loads((a.suite / "import-report.json").read_text())
        self.files = {r["name"]: (int(level), r["file"]) for level, rec in report["levels"].items() for r in rec["imported"]}
        self.cands = sorted(p for p in a.candidates.glob("*.cu") if p.stem in self.files)
        self.tritons = sorted(p for p in a.triton.glob("*.py") if p.stem in self.files) if str(a.triton) else []
        if not self.cands and not self.tritons:
            sys.exit(f"no candidate of {a.candidates} or {a.triton} names a task of {a.suite}")
        self.includes = [str(ROOT / "include")] + a.include

    def fields(self, cand):
        toml = tomllib.loads((self.a.suite / cand.stem / "task.toml").read_text())
        sizes = toml.get("sizes", {}).get("cuda", {})
        shapes = [[int(sizes.get(d, d)) for d in o["shape"]] for o in toml["outputs"]]
        if self.a.leap_abi:
            return dict(kernel=cand.read_text(), binding=BINDING, ext_name=f"leap_agree_{cand.stem}",
                        includes=self.includes, outputs=shapes)
        return dict(kernel=self_contained(cand.read_text()), binding=SELF_BINDING, ext_name=f"leap_agree_{cand.stem}",
                    includes=[], outputs=shapes)

    def problem(self, cand):
        level, file = self.files[cand.stem]
        return problem_file(self.a.kernelbench, level, file).read_text()

    def answer(self, cand):
        if cand.suffix == ".py":  # a Triton answer: the problem's module with its ModelNew
            return self.problem(cand) + "\n\n" + cand.read_text()
        return self.problem(cand) + MODEL_NEW.format(**self.fields(cand))

    def leap_name(self, cand):
        """The answer's file name in leap's run (its record's `candidate`)."""
        return cand.stem + (".triton.py" if cand.suffix == ".py" else ".cu" if self.a.leap_abi else ".py")


def run_leap(a, answers, leap_out):
    """The whole set through one leap eval; its wall time."""
    chosen = a.out / "candidates"
    shutil.rmtree(chosen, ignore_errors=True)
    chosen.mkdir()
    for c in answers.cands:
        if a.leap_abi:
            shutil.copy(c, chosen / c.name)
        else:
            (chosen / answers.leap_name(c)).write_text(answers.answer(c))
    for c in answers.tritons:
        (chosen / answers.leap_name(c)).write_text(answers.answer(c))
    t0 = time.perf_counter()
    subprocess.run([a.leap, "eval", "--backend", "cuda", "--tasks", str(a.suite), "--candidates", str(chosen),
                    "--out", str(leap_out), "--quiet"] + (["--config", str(a.leap_config)] if a.leap_config else []),
                   check=True)
    return time.perf_counter() - t0


def prebuild(a, answers):
    """The same load_inline call in a process of its own, in the build folder eval will use, --build-jobs
    at a time; their wall time."""
    def build(cand):
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=str((a.out / "build" / cand.stem).resolve()), MAX_JOBS="1")
        p = subprocess.run([sys.executable, "-c", EXTENSION.format(**answers.fields(cand))], env=env,
                           capture_output=True, text=True)
        return cand.stem, p.returncode, p.stderr[-300:]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(a.build_jobs) as pool:
        for stem, rc, err in pool.map(build, answers.cands):
            if rc:
                print(f"build of {stem} failed: {err}", file=sys.stderr)
    build_s = time.perf_counter() - t0
    print(f"load_inline builds: {len(answers.cands)} in {build_s:.1f} s, {a.build_jobs} at a time", file=sys.stderr)
    return build_s


def run_kernelbench(a, answers, leap, evaluate):
    """KernelBench's eval of every answer (within --time-limit): rows (problem, leap's record, KernelBench's
    result) and the evals' time."""
    rows, kb_s, evals_start = [], 0.0, time.perf_counter()
    everything = answers.tritons + answers.cands
    for i, cand in enumerate(everything):
        task = cand.stem
        backend = "triton" if cand.suffix == ".py" else "cuda"
        if a.time_limit and time.perf_counter() - evals_start > a.time_limit:
            print(f"time limit: KernelBench's eval stopped after {i} of {len(everything)}", file=sys.stderr)
            break
        custom = answers.answer(cand)
        t0 = time.perf_counter()
        try:
            r = evaluate(answers.problem(cand), custom, seed_num=42, num_correct_trials=a.trials,
                         num_perf_trials=a.perf_trials, measure_performance=True,
                         build_dir=str(a.out / "build" / task), backend=backend)
            kb = {"compiled": r.compiled, "correct": r.correctness, "runtime_ms": r.runtime, "ref_ms": r.ref_runtime,
                  "error": str(r.metadata)[:200] if not r.correctness else ""}
        except Exception as e:  # noqa: BLE001 - the harness's own failure is a row, not the end
            kb = {"compiled": False, "correct": False, "runtime_ms": -1, "ref_ms": -1, "error": str(e)[:200]}
        kb_s += time.perf_counter() - t0
        lr = leap.get(answers.leap_name(cand), {})
        rows.append((task + (" [triton]" if backend == "triton" else ""), lr, kb))
        print(f"{rows[-1][0]}: leap {lr.get('status')} {lr.get('speedup', 0):.3f}, KernelBench "
              f"{'correct' if kb['correct'] else 'incorrect'} {kb['ref_ms']}/{kb['runtime_ms']} ms {kb['error'][:120]}",
              file=sys.stderr, flush=True)
    return rows, kb_s


def print_table(rows):
    print("| problem | leap | KernelBench | agree | leap speedup | KernelBench speedup | ratio | note |")
    print("|---|---|---|---|---:|---:|---:|---|")
    agree = timed = close = judged = 0
    for task, lr, kb in rows:
        ok_leap = lr.get("status") == "ok"
        # A harness's own failure (leap's infra_error, KernelBench's harness error) is no verdict.
        no_verdict = lr.get("status") in (None, "infra_error") or (not kb["compiled"] and kb["runtime_ms"] == -1
                                                                     and "compil" not in kb["error"].lower())
        same = ok_leap == bool(kb["correct"])
        judged += not no_verdict
        agree += same and not no_verdict
        ls = lr.get("speedup", 0.0) if ok_leap else 0.0
        ks = kb["ref_ms"] / kb["runtime_ms"] if kb["correct"] and kb["runtime_ms"] > 0 else 0.0
        ratio = ls / ks if ls > 0 and ks > 0 else 0.0
        if ratio:
            timed += 1
            close += abs(ratio - 1) <= 0.10
        note = "no verdict: " + (lr.get("feedback", "")[:80] or kb["error"][:80]).replace("|", "/") if no_verdict \
            else "" if same else (lr.get("check") or lr.get("feedback", "")[:80] or kb["error"][:80]).replace("|", "/")
        print(f"| {task} | {lr.get('status', 'missing')} | {'correct' if kb['correct'] else 'incorrect'} | "
              f"{'-' if no_verdict else 'yes' if same else 'NO'} | {ls:.3f} | {ks:.3f} | {ratio:.2f} | {note} |")
    print(f"\nCorrectness verdicts agree on {agree} of {judged} judged by both ({len(rows) - judged} without a verdict); speedups within 10 % on {close} of {timed} timed by both.")


def main():
    a = parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    evaluate = kernelbench_eval(a.kernelbench)
    answers = Answers(a)
    leap_out, prepared = a.out / "leap.jsonl", a.out / "prepared.json"
    state = json.loads(prepared.read_text()) if prepared.is_file() and a.phase in ("build", "compare") else {}
    leap_s = run_leap(a, answers, leap_out) if a.phase in ("all", "prepare", "leap") else state.get("leap_s", 0.0)
    leap = {r["candidate"]: r for r in map(json.loads, leap_out.read_text().splitlines())}
    build_s = state.get("build_s", 0.0)
    if a.build_jobs > 0 and a.phase in ("all", "prepare", "build"):
        build_s = prebuild(a, answers)
    if a.phase in ("prepare", "leap", "build"):
        state.update(leap_s=leap_s)
        if a.phase != "leap":
            state.update(build_s=build_s, build_jobs=a.build_jobs)
        prepared.write_text(json.dumps(state))
        return 0
    if a.phase == "compare":
        if "build_s" not in state:
            sys.exit(f"{prepared}: no prepared run (run --phase prepare, or leap and build, first)")
        a.build_jobs = state["build_jobs"]
    if a.inputs_on_gpu:
        import torch
        torch.set_default_device("cuda")
    rows, eval_s = run_kernelbench(a, answers, leap, evaluate)
    kb_s = build_s + eval_s
    n_all = len(answers.tritons) + len(answers.cands)
    print(f"\nKernelBench agreement: {len(rows)} answers ({len(answers.cands)} inline CUDA, {len(answers.tritons)} Triton); "
          f"leap eval {leap_s:.1f} s for {n_all} ({n_all / leap_s:.2f} candidates/s), KernelBench eval_kernel_against_ref {kb_s:.1f} s for {len(rows)} "
          f"({len(rows) / kb_s:.2f} candidates/s; load_inline builds {build_s:.1f} s of it, "
          f"{a.build_jobs or 1} at a time{'; inputs drawn on the GPU' if a.inputs_on_gpu else ''}); "
          f"leap/KernelBench throughput ratio {(n_all / leap_s) / (len(rows) / kb_s):.1f}x\n")
    print_table(rows)
    (a.out / "agreement.json").write_text(json.dumps([{"task": t, "leap": l, "kernelbench": k} for t, l, k in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
