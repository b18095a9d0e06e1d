#!/usr/bin/env python3
"""A KernelBench-style evaluation service: the baseline of `leap bench serve`.

POST /eval {"task", "source", "torch_code", "inputs": [{name, dtype, shape}], "params": {...}}:
builds the candidate with torch.utils.cpp_extension.load_inline (one full build per request, as
KernelBench's eval does for every generated kernel), checks it against the PyTorch reference on
5 random inputs (atol = rtol = 1e-2) and times 100 calls after 3 warm-ups (perf_counter on the
CPU, CUDA events on the GPU): KernelBench's eval_kernel_against_ref, in an HTTP server. Answers
{"ok", "correct", "runtime_us", "ref_runtime_us", "error"}. Each request is built and evaluated in
a fresh child process, as batch evaluations of KernelBench run each kernel in a worker process: a
candidate that crashes fails its request, not the service. 'spawn', because children forked from a
server that had imported torch could not initialise CUDA; the child's import of torch costs seconds
beside a build's minute. Nothing is sandboxed or re-verified: the candidate shares its process with
its reference and its timer, which leap's judge never allows.

  kernelbench_service.py --port 0 --backend cpu|cuda --include DIR   (prints "listening on PORT")
"""
import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernelbench_load_inline import BINDING  # noqa: E402  (the same DLTensor binding as the build baseline)

_counter = 0
_lock = threading.Lock()


def evaluate_isolated(req, backend, includes, build_root):
    """evaluate() in a child process; a child that dies without an answer is the request's error."""
    global _counter
    with _lock:
        _counter += 1
        name = f"leap_kbs_{os.getpid()}_{_counter}"
    ctx = multiprocessing.get_context("spawn")
    r, w = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(w, name, req, backend, includes, build_root))
    t0 = time.time()
    child.start()
    w.close()
    try:
        out = r.recv()
    except EOFError:
        out = {"ok": False, "correct": False}
    child.join()
    if "error" not in out and not out.get("ok") and child.exitcode:
        out["error"] = f"the evaluation process died (exit code {child.exitcode})"
    print(f"{req.get('task')}: {'correct' if out.get('correct') else out.get('error', 'incorrect')} "
          f"in {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    return out


def _child(conn, name, req, backend, includes, build_root):
    conn.send(evaluate(name, req, backend, includes, build_root))
    conn.close()


def evaluate(name, req, backend, includes, build_root):
    import torch
    from torch.utils.cpp_extension import load_inline
    build_dir = os.path.join(build_root, name)
    os.makedirs(build_dir)
    out = {"ok": False, "correct": False}
    t0 = time.time()
    try:
        kwargs = dict(name=name, cpp_sources=[BINDING], functions=["run"], extra_include_paths=includes,
                      build_directory=build_dir, verbose=False)
        if backend == "cuda":
            kwargs["cuda_sources"] = [req["source"]]
        else:
            kwargs["cpp_sources"] = [req["source"], BINDING]
        mod = load_inline(**kwargs)
    except Exception as e:  # noqa: BLE001 - a failed build is a result
        out["error"] = "build: " + (str(e).strip().splitlines() or [type(e).__name__])[-1][:200]
        out["build_s"] = time.time() - t0
        return out
    out["build_s"] = time.time() - t0
    dev = "cuda" if backend == "cuda" else "cpu"
    scope = {"torch": torch, **req.get("params", {})}
    exec(req["torch_code"], scope)  # noqa: S102 - the task's own reference, from leap serve
    forward = scope["forward"]
    dtypes = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "int32": torch.int32}

    def inputs():
        return [torch.randn(t["shape"], dtype=dtypes[t["dtype"]], device=dev) for t in req["inputs"]]

    try:
        for _ in range(5):
            xs = inputs()
            ref = forward(*xs)
            refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
            outs = [torch.empty_like(r) for r in refs]
            if mod.run(xs, outs) != 0:
                out["error"] = "leap_kernel returned an error"
                return out
            if not all(torch.allclose(o, r, atol=1e-2, rtol=1e-2) for o, r in zip(outs, refs)):
                out["error"] = "output mismatch"
                out["ok"] = True
                return out
        out["ok"] = out["correct"] = True

        def timed(fn):
            for _ in range(3):
                fn()
            times = []
            for _ in range(100):
                if dev == "cuda":
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    fn()
                    b.record()
                    torch.cuda.synchronize()
                    times.append(a.elapsed_time(b) * 1000)
                else:
                    t = time.perf_counter()
                    fn()
                    times.append((time.perf_counter() - t) * 1e6)
            times.sort()
            return times[len(times) // 2]

        xs = inputs()
        outs = [torch.empty_like(r) for r in refs]
        out["runtime_us"] = timed(lambda: mod.run(xs, outs))
        out["ref_runtime_us"] = timed(lambda: forward(*xs))
    except Exception as e:  # noqa: BLE001 - a crash of the candidate is a result too (if the process survives)
        out["error"] = "run: " + str(e)[:200]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--include", action="append", default=[])
    a = ap.parse_args()
    build_root = tempfile.mkdtemp(prefix="leap-kb-service-")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            payload = json.dumps(evaluate_isolated(req, a.backend, a.include, build_root)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
