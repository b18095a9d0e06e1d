"""The service's own behaviour: load with backpressure, tokens, shutdown."""
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from conftest import BUILD, SOURCE, example
from leap_client import Client

TASKS = ["relu", "gelu", "silu", "sigmoid", "leaky_relu", "softmax", "layer_norm", "rms_norm"]


def test_64_clients_x_8_requests_every_one_answered_once(make_server):
    # A short queue and no results cache: the clients are refused (429) and must come back.
    s = make_server("--evaluators", "2", "--queue-limit", "8", "--no-cache")
    clients = [Client(s.url, backoff_cap_s=2.0) for _ in range(64)]

    def client_run(k):
        ids = []
        for r in range(8):
            task = TASKS[(k + r) % len(TASKS)]
            ids.append(clients[k].submit(task, example(task + ".cpp"), name=f"c{k}-r{r}.cpp",
                                         settings={"trials": 1, "timing_budget_ms": 5, "min_samples": 3}))
        return [(i, clients[k].result(i)) for i in ids]

    with ThreadPoolExecutor(max_workers=64) as pool:
        results = [r for rs in pool.map(client_run, range(64)) for r in rs]
    ids = [i for i, _ in results]
    assert len(results) == 512 and len(set(ids)) == 512  # every request answered, exactly once
    assert all(o.status == "ok" for _, o in results), {o.status for _, o in results}
    assert sorted(o.candidate for _, o in results) == sorted(f"c{k}-r{r}.cpp" for k in range(64) for r in range(8))
    assert sum(c.retries_429 for c in clients) > 0  # the queue filled, and the clients came back
    metrics = requests.get(s.url + "/metrics").text
    assert 'leap_serve_evaluations_total{status="ok"} 512' in metrics


def test_token_required_where_set_and_off_loopback(make_server):
    s = make_server(env={"LEAP_SERVE_TOKEN": "s3cret"})
    assert requests.get(s.url + "/v1/tasks").status_code == 401
    assert requests.get(s.url + "/health").status_code == 200
    assert Client(s.url, token="s3cret").task("relu").name == "relu"
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE))
    env.pop("LEAP_SERVE_TOKEN", None)
    p = subprocess.run([str(BUILD / "leap"), "serve", "--bind", "0.0.0.0", "--port", "0"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 2 and "needs a bearer token" in p.stderr


def test_sigterm_finishes_accepted_work_and_refuses_new(make_server):
    s = make_server("--evaluators", "1", "--no-cache")
    c = Client(s.url, max_retries=0)
    done = []

    def one(k):
        # A timing budget long enough that the drain outlasts the late request below (six
        # evaluations of a few ms each could all finish before it, and the server be gone).
        done.append(c.evaluate(TASKS[k % 4], example(TASKS[k % 4] + ".cpp"), name=f"t{k}.cpp",
                               settings={"timing_budget_ms": 400, "min_samples": 200}))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for _ in range(200):  # all six accepted
        if requests.get(s.url + "/metrics").text.count("leap_serve_submitted_total 6"):
            break
        time.sleep(0.02)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    late = requests.post(s.url + "/v1/evaluate", json={"task": "relu", "source": example("relu.cpp")})
    for t in threads:
        t.join(timeout=120)
    assert len(done) == 6 and all(o.ok for o in done)  # none lost
    assert late.status_code == 503
    assert s.proc.wait(timeout=60) == 0
