#!/usr/bin/env python3
"""`leap bench serve`: requests/s and latency of `leap serve` for N concurrent clients, beside a
KernelBench-style service (bench/baselines/kernelbench_service.py: load_inline build + eval per request)
on the same candidates in the same run. Every request carries a distinct source (a comment with
its number), so neither service answers from a cache: each is compiled and evaluated.

  bench/serve_bench.py [--backend cpu|cuda] [--clients 8] [--requests 64] [--baseline N]
                       [--evaluators N[,N...]] [--batch N] [--build build]

--batch N adds a row for the trainers' path: the same number of requests (other distinct
sources) sent as /v1/batch requests of N items each, --clients of them at once (verl's batch
reward manager sends one per training batch).

Request k is example k mod E (E examples, one per task): with --requests and --baseline both
multiples of E, both services get the same mix of tasks (the default baseline: the least multiple
of E that is at least --clients, sent by --clients clients at once, as leap serve's are).
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import requests

ROOT = pathlib.Path(__file__).resolve().parents[1]


def start(cmd, pattern, log, env=None):
    """Starts a service; its stderr goes to the file `log` (a pipe nobody reads would stall its logging)."""
    err = open(log, "w")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    line = p.stdout.readline()
    m = re.search(pattern, line)
    if not m:
        p.kill()
        p.wait()
        sys.exit(f"serve_bench: {cmd[0]} did not start: {line!r} {pathlib.Path(log).read_text()[-2000:]}")
    return p, m.group(1)


def drive(post, bodies, clients):
    """Sends every body with `clients` concurrent clients; returns (wall s, latencies s, replies)."""
    def one(body):
        t = time.perf_counter()
        reply = post(body)
        return time.perf_counter() - t, reply

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        results = list(pool.map(one, bodies))
    return time.perf_counter() - t0, [r[0] for r in results], [r[1] for r in results]


def drive_batches(url, bodies, size, clients):
    """Sends the bodies as /v1/batch requests of `size` items, `clients` at once; each item's latency
    is from its batch's request to its line. Returns (wall s, latencies s, records)."""
    def one(chunk):
        t, got = time.perf_counter(), []
        body = {"candidates": [{k: b[k] for k in ("task", "name", "source")} for b in chunk]}
        with requests.post(url + "/v1/batch", json=body, stream=True, timeout=3600) as r:
            for line in r.iter_lines():
                if line:
                    got.append((time.perf_counter() - t, json.loads(line)))
        return got

    chunks = [bodies[i:i + size] for i in range(0, len(bodies), size)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        results = [x for got in pool.map(one, chunks) for x in got]
    return time.perf_counter() - t0, [r[0] for r in results], [r[1] for r in results]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def stage_tables(lr, lw, evaluators):
    """Where one leap serve run's requests spent their time (the outcome records' stages): what bounds it."""
    parts = ["retired_wait_us", "runner_wait_us", "load_us", "correctness_us", "timing_us", "kept_verify_us",
             "gpu_lock_wait_us"]
    keys = ["queue_wait_us", "compile_us", "eval_us"] + parts + ["other_us"]
    stages = [r.get("stages", {}) for r in lr if isinstance(r, dict)]
    for x in stages:  # the judge's time outside the named stages: reference, calibration, hand-offs
        x["other_us"] = max(x.get("eval_us", 0) - sum(x.get(k, 0) for k in parts), 0)
    if stages:
        # The judge's necessary work: the candidates' own time in the calls a verdict needs (its
        # correctness trials and timed calls), as a share of the judges' time on the requests.
        needed = sum(r.get("stages", {}).get("candidate_calls_us", 0) + r.get("candidate_timing", {}).get("total_us", 0)
                     for r in lr if isinstance(r, dict))
        print(f"\nleap serve's stages over its {len(stages)} requests (ms; judges busy "
              f"{sum(x.get('eval_us', 0) for x in stages) / 1e6 / (lw * max(evaluators, 1)):.0%} of the wall time; "
              f"necessary work {needed / max(sum(x.get('eval_us', 0) for x in stages), 1):.0%} of the judges' time: "
              f"the candidates' own time in their correctness trials and timed calls):\n")
        print("| stage | p50 ms | mean ms | max ms | sum s |")
        print("|---|---:|---:|---:|---:|")
        for k in keys:
            xs = [x.get(k, 0) / 1000 for x in stages]
            print(f"| {k[:-3]} | {pct(xs, 0.5):.1f} | {sum(xs) / len(xs):.1f} | {max(xs):.1f} | {sum(xs) / 1000:.2f} |")
        # The tasks that cost the judge most: which stage, and how many timed calls of what length.
        per_task = {}
        for r in lr:
            if isinstance(r, dict) and r.get("stages"):
                per_task.setdefault(r.get("task", "?"), []).append(r)
        cost = sorted(per_task.items(), key=lambda kv: -sum(x["stages"].get("eval_us", 0) for x in kv[1]))
        print("\nthe 10 tasks that took the judge longest (means over their requests; ms unless said):\n")
        print("| task | requests | eval | correctness | timing | timed calls | call us | reference us | sum s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for task, rs in cost[:10]:
            def mean(f):
                return sum(f(x) for x in rs) / len(rs)
            ct = lambda x: x.get("candidate_timing", {})  # noqa: E731
            print(f"| {task} | {len(rs)} | {mean(lambda x: x['stages'].get('eval_us', 0)) / 1000:.1f} "
                  f"| {mean(lambda x: x['stages'].get('correctness_us', 0)) / 1000:.1f} "
                  f"| {mean(lambda x: x['stages'].get('timing_us', 0)) / 1000:.1f} "
                  f"| {mean(lambda x: ct(x).get('samples', 0)):.0f} | {mean(lambda x: ct(x).get('median_us', 0)):.1f} "
                  f"| {mean(lambda x: x.get('reference_timing', {}).get('median_us', 0)):.1f} "
                  f"| {sum(x['stages'].get('eval_us', 0) for x in rs) / 1e6:.2f} |")
        by_status = {}
        for r in lr:
            by_status[r.get("status", "?")] = by_status.get(r.get("status", "?"), 0) + 1
        print("\nstatuses: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())))
        # Any request not ok: the first feedback of each (task, status), so a failure names its cause.
        seen = set()
        for r in lr:
            key = (r.get("task"), r.get("status"))
            if r.get("status") != "ok" and key not in seen:
                seen.add(key)
                print(f"- {key[0]}: {key[1]}: {str(r.get('feedback', r))[:300]}")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--baseline", type=int, default=-1,
                    help="requests sent to the KernelBench-style service (0: none; default: the least multiple of "
                         "the number of examples that is at least --clients: the same clients at once and the same "
                         "mix of tasks as leap serve's)")
    ap.add_argument("--evaluators", default="0",
                    help="leap serve's judges (0: the config's); a list (1,2): one leap serve run and row for each")
    ap.add_argument("--batch", type=int, default=0, help="also send the requests as /v1/batch requests of N items")
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--python", default="/usr/bin/python3", help="Python with torch for the baseline service")
    ap.add_argument("--include", action="append", default=[], help="further include folders for the baseline's builds")
    ap.add_argument("--logs", default="/tmp/serve-bench", help="folder for the services' logs")
    return ap.parse_args()


def requests_of(a):
    """The requests (a distinct source each, the examples in turn) and the examples they cycle over."""
    ext = ".cu" if a.backend == "cuda" else ".cpp"
    examples = sorted((ROOT / "examples" / a.backend).glob("*" + ext))
    examples = [e for e in examples if e.name.count(".") == 1]  # one per task (no *.tuned.cu)
    if a.baseline < 0:
        a.baseline = -(-a.clients // len(examples)) * len(examples)
    reqs = []
    for k in range(max(a.requests, a.baseline)):
        e = examples[k % len(examples)]
        reqs.append({"task": e.name[: -len(ext)], "name": f"r{k}{ext}", "source": e.read_text() + f"\n// request {k}\n"})
    return reqs, examples


def serve_run(a, judges, reqs):
    """One leap serve with `judges` judges driven by the clients (and in batches with --batch): its rows,
    (judges, records, wall) and the served tasks' descriptions."""
    rows = []
    # A compile cache of its own: sources an earlier run compiled would otherwise be cache hits.
    cache = tempfile.mkdtemp(prefix="leap-serve-bench-cache-")
    env = dict(os.environ, LEAP_DATA_DIR=str(ROOT), LEAP_CACHE_DIR=cache)
    cmd = [str(pathlib.Path(a.build) / "leap"), "serve", "--port", "0", "--no-cache", "--backend", a.backend]
    if judges:
        cmd += ["--evaluators", str(judges)]
    os.makedirs(a.logs, exist_ok=True)
    leap, url = start(cmd, r"listening on (http://\S+:\d+)", os.path.join(a.logs, "leap-serve.log"), env)
    try:
        info = {t: requests.get(f"{url}/v1/tasks/{t}").json() for t in {r["task"] for r in reqs}}
        evaluators = requests.get(url + "/health").json()["evaluators"]
        post = lambda b: requests.post(url + "/v1/eval", json={k: b[k] for k in ("task", "name", "source")},  # noqa: E731
                                       timeout=3600).json()
        print(f"serve_bench: leap serve ({evaluators} judge(s)), {a.requests} requests, {a.clients} clients...",
              file=sys.stderr)
        lw, ll, lr = drive(post, reqs[: a.requests], a.clients)
        batch_row = None
        if a.batch > 0:
            fresh = [dict(r, source=r["source"] + f"// batched, {judges} judge(s)\n") for r in reqs[: a.requests]]
            print(f"serve_bench: leap serve /v1/batch, {a.requests} requests in batches of {a.batch}, "
                  f"{a.clients} at once...", file=sys.stderr)
            batch_row = ("leap serve, %d judge(s), /v1/batch of %d" % (evaluators, a.batch), a.requests,
                         *drive_batches(url, fresh, a.batch, a.clients))
    finally:
        leap.terminate()
        leap.wait()
        shutil.rmtree(cache, ignore_errors=True)
    rows.append((f"leap serve, {evaluators} judge(s)", a.requests, sum(r.get("status") == "ok" for r in lr), lw, ll))
    if batch_row:
        name, n, bw, bl, br = batch_row
        rows.append((name, n, sum(r.get("status") == "ok" for r in br), bw, bl))
    return rows, (evaluators, lr, lw), info


def baseline_run(a, reqs, info):
    """The KernelBench-style service on the first --baseline requests: its row."""
    base_cmd = [a.python, str(ROOT / "bench" / "baselines" / "kernelbench_service.py"), "--port", "0", "--backend", a.backend,
                "--include", str(ROOT / "include"), "--include", "/usr/include"]
    for inc in a.include:
        base_cmd += ["--include", inc]
    base, port = start(base_cmd, r"listening on (\d+)", os.path.join(a.logs, "kernelbench-service.log"))
    try:
        def post_base(b):
            t = info[b["task"]]
            body = {"task": b["task"], "source": b["source"], "torch_code": t["torch_code"],
                    "inputs": [i for i in t["inputs"]], "params": t.get("params", {})}
            try:
                return requests.post(f"http://127.0.0.1:{port}/eval", json=body, timeout=3600).json()
            except requests.RequestException as e:  # the service died: every request still gets a row
                return {"correct": False, "error": f"service: {e}"}

        sub = reqs[: a.baseline]
        print(f"serve_bench: KernelBench-style service, {len(sub)} requests, {a.clients} clients...",
              file=sys.stderr)
        bw, bl, br = drive(post_base, sub, a.clients)
    finally:
        base.terminate()
        base.wait()
    for err in sorted({str(r.get("error", r))[:300] for r in br if not r.get("correct")}):
        print(f"serve_bench: baseline not correct: {err}", file=sys.stderr)
    return ("KernelBench-style (load_inline per request)", len(sub), sum(bool(r.get("correct")) for r in br), bw, bl)


def main():
    a = parse_args()
    reqs, examples = requests_of(a)
    runs, rows, info = [], [], {}
    for judges in [int(x) for x in str(a.evaluators).split(",")]:
        run_rows, run, info = serve_run(a, judges, reqs)
        rows += run_rows
        runs.append(run)
    if a.baseline > 0:
        rows.append(baseline_run(a, reqs, info))
    base = [r for r in rows if r[0].startswith("KernelBench")]
    base_rate = base[0][1] / base[0][3] if base else 0
    print(f"\nleap bench serve: {a.backend} backend, {a.clients} concurrent clients, distinct sources (no cache answers); "
          f"on {os.cpu_count()} cores\n")
    print("| service | requests | correct | wall s | requests/s | p50 latency s | p99 latency s | vs baseline |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, n, ok, wall, lat in rows:
        rate = n / wall
        vs = f"{rate / base_rate:.1f}x" if base_rate else "-"
        print(f"| {name} | {n} | {ok} | {wall:.1f} | {rate:.2f} | {pct(lat, 0.5):.2f} | {pct(lat, 0.99):.2f} | {vs} |")
    if a.baseline and (a.requests % len(examples) or a.baseline % len(examples)):
        print(f"\nThe services' task mixes differ ({len(examples)} examples; {a.requests} and {a.baseline} requests, "
              f"not both multiples): the ratio compares different work.")
    if 0 < a.baseline < a.clients:
        print(f"\nThe baseline served {a.baseline} request(s) at once, leap serve {a.clients}: the baseline builds "
              f"candidates in parallel, so its requests/s (and the ratio) are not measured at the same concurrency.")
    for evaluators, lr, lw in runs:
        print(f"\n### leap serve with {evaluators} judge(s)")
        stage_tables(lr, lw, evaluators)
    return 0


if __name__ == "__main__":
    sys.exit(main())
