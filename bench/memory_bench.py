#!/usr/bin/env python3
"""leap bench memory: none vs previous vs passive vs active context for `leap agent`, on the same tasks and turns.

Runs `leap agent` with --context none, previous (the graph off: only the previous attempt and its
verdict, what the same agent has without memory: KOPE's memory-off comparison), passive (the full
history, no budget, as KOPE's passive baseline) and active (tiers within --budget) over the same
tasks and turns, and prints per mode the
prompt tokens sent (about 4 bytes a token), the context's share, the wall time, the pass rate and
the mean turn of the first solve.

The model: a real one when given (`--endpoint URL --model NAME`, an OpenAI-compatible server such
as vLLM or SGLang, key from the environment as for `leap agent`; or `--model-dir DIR`, a Hugging
Face folder on leap's own engine): then the pass rates are that model's. Otherwise a scripted model
(tests/agent/scripted_model.py: a table of answers, the same in every mode) that ignores its
prompt, so its pass rates are identical by construction and only the token columns measure
something (KOPE's claim to compare: active selection sends ~93% fewer tokens than passive full
history). Each task's script: an answer without code, a kernel that does not compile, a wrong
kernel where one is at hand, then the task's bundled example on every later turn.

  memory_bench.py [--build build] [--tasks relu,softmax,...] [--turns 5] [--budget 2048]
                  [--endpoint URL --model NAME | --model-dir DIR [--lm-device cuda]] [--backend cuda]
"""
import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--tasks", default="relu,softmax,silu,sigmoid,gelu,layer_norm")
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--budget", type=int, default=2048)
    ap.add_argument("--endpoint", help="an OpenAI-compatible server (http://host:port): a real model's pass rates")
    ap.add_argument("--model", default="", help="the model's name at --endpoint")
    ap.add_argument("--model-dir", help="or a Hugging Face model folder on leap's own engine")
    ap.add_argument("--lm-device", default="cpu", help="the engine's device (--model-dir): cpu or cuda")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"], help="the kernels' backend")
    ap.add_argument("--max-tokens", type=int, default=2048, help="answer tokens at most")
    ap.add_argument("--temperature", type=float, default=0.7)
    a = ap.parse_args()
    if a.endpoint and a.model_dir:
        sys.exit("--endpoint and --model-dir: one model at a time")
    scripted = not (a.endpoint or a.model_dir)
    if scripted and a.backend != "cpu":
        sys.exit("the scripted model answers with the bundled CPU examples: --backend cuda needs --endpoint or --model-dir")
    return a, scripted


def script_of(tasks):
    """The scripted model's answers per task: a refusal, a broken kernel, a wrong one where the hostile
    fixtures have it, then the bundled example."""
    script = {}
    for t in tasks:
        example = ROOT / "examples" / "cpu" / f"{t}.cpp"
        if not example.exists():
            sys.exit(f"no bundled CPU example for task {t}")
        steps = [{"content": "I would need to know more about the hardware first."},
                 {"content": "```cpp\n#include <leap/candidate.h>\nLEAP_ENTRY int leap_kernel(" +
                             "const DLTensor* in, int n_in, DLTensor* out, int n_out, void* s) { return undefined; }\n```"}]
        wrong = ROOT / "tests" / "fixtures" / "hostile" / "cpu" / f"{t}.wrong_answer.cpp"
        if wrong.exists():
            steps.append({"file": str(wrong)})
        steps.append({"file": str(example)})
        script[t] = steps
    return script


def run_mode(a, mode, tmp, script):
    """`leap agent` with one context mode: its attempts' tokens, solves and final kernels' speedup."""
    (tmp / mode).mkdir()
    model = None
    if script is not None:
        (tmp / mode / "script.json").write_text(json.dumps(script))
        model = subprocess.Popen([sys.executable, str(ROOT / "tests/agent/scripted_model.py"), "--script",
                                  str(tmp / mode / "script.json"), "--log", str(tmp / mode / "requests.jsonl")],
                                 stdout=subprocess.PIPE, text=True)
        source = ["--endpoint", f"http://127.0.0.1:{int(model.stdout.readline())}", "--model", "scripted"]
    elif a.endpoint:
        source = ["--endpoint", a.endpoint, "--model", a.model]
    else:
        source = ["--model-dir", a.model_dir, "--lm-device", a.lm_device]
    env = dict(os.environ, LEAP_DATA_DIR=str(ROOT), LEAP_CACHE_DIR=str(tmp / "cache"))
    t0 = time.perf_counter()
    p = subprocess.run([str(pathlib.Path(a.build) / "leap"), "agent", *source, "--backend", a.backend,
                        "--config", str(tmp / "leap.toml"), "--tasks", a.tasks,
                        "--turns", str(a.turns), "--context", mode, "--seed", "1",
                        "--max-tokens", str(a.max_tokens), "--temperature", str(a.temperature),
                        "--budget", str(a.budget if mode == "active" else 10**9),  # passive: the full history
                        "--out", str(tmp / mode / "run")], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if model:
        model.kill()
        model.wait()
    if p.returncode:
        sys.exit(f"leap agent ({mode}) failed:\n{p.stdout}{p.stderr}")
    att = [json.loads(line) for line in (tmp / mode / "run" / "attempts.jsonl").read_text().splitlines()]
    solved = {r["task"] for r in att if r["status"] == "ok"}
    first = {}
    for r in att:
        if r["status"] == "ok":
            first[r["task"]] = min(first.get(r["task"], 99), r["turn"])
    # Each solved task's final kernel: its fastest correct one (the incumbent at the end).
    best = {}
    for r in att:
        if r["status"] == "ok" and r["speedup"] > 0:
            best[r["task"]] = max(best.get(r["task"], 0.0), r["speedup"])
    geomean = math.exp(sum(math.log(v) for v in best.values()) / len(best)) if best else 0.0
    return {"mode": mode, "speedup": f"{geomean:.3f}x" if best else "-", "prompt": sum(r["prompt_tokens"] for r in att),
            "context": sum(r["context_tokens"] for r in att), "attempts": len(att), "wall": wall,
            "solved": len(solved), "turn": f"{sum(first.values()) / len(first):.2f}" if first else "-"}


def main():
    a, scripted = parse_args()
    tasks = a.tasks.split(",")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="leap-bench-memory-"))
    script = script_of(tasks) if scripted else None
    (tmp / "leap.toml").write_text("[sandbox]\ndeadline_s = 4\n[eval]\ntiming_budget_ms = 30\nmin_samples = 5\n")
    rows = [run_mode(a, mode, tmp, script) for mode in ("none", "previous", "passive", "active")]
    passive = next(r for r in rows if r["mode"] == "passive")
    who = ("scripted model (the same answers in every mode)" if scripted else
           f"model {a.model} at {a.endpoint}" if a.endpoint else f"model {a.model_dir} on leap's engine ({a.lm_device})")
    print(f"\nleap bench memory: {len(tasks)} tasks x {a.turns} turns, {a.backend} backend, {who}; active context "
          f"within {a.budget} tokens, passive the full history (as KOPE compares them)\n")
    print("| context | prompt tokens sent | of which context | per attempt | vs passive | solved | mean turn of first solve | "
          "final kernels' speedup (geomean, solved tasks) | wall s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['mode']} | {r['prompt']} | {r['context']} | {r['prompt'] / r['attempts']:.0f} | "
              f"{r['prompt'] / passive['prompt']:.2f}x | {r['solved']}/{len(tasks)} | {r['turn']} | {r['speedup']} | "
              f"{r['wall']:.1f} |")
    if scripted:
        print("\nSolves are the script's, identical in every mode by construction; the token columns are leap's.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
