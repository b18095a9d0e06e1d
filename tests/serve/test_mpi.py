"""`mpirun -np 4 leap serve`: rank 0 the front door, three worker ranks; one killed mid-load."""
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest
import requests

from conftest import BUILD, SOURCE, example
from leap_client import Client

TASKS = ["relu", "gelu", "silu", "sigmoid", "leaky_relu", "softmax", "layer_norm", "rms_norm"]


@pytest.fixture
def cluster(tmp_path):
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun (openmpi-bin) is required"
    cfg = tmp_path / "serve.toml"
    cfg.write_text("[serve]\nworker_timeout_s = 2\ncache = false\n")
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader,tcp")
    # --enable-recovery: the job goes on when a rank dies (the service needs no MPI after its start).
    p = subprocess.Popen([mpirun, "-np", "4", "--oversubscribe", "--enable-recovery", str(BUILD / "leap"), "serve",
                          "--port", "0", "--config", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, start_new_session=True)
    line = p.stdout.readline()
    m = re.search(r"listening on (http://[0-9.]+:\d+)", line)
    assert m, (line, p.stderr.read() if p.poll() is not None else "")
    url = m.group(1)
    for _ in range(300):  # every worker said hello
        if requests.get(url + "/health").json()["workers_alive"] == 3:
            break
        time.sleep(0.1)
    yield p, url
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_killed_worker_rank_loses_no_request(cluster):
    p, url = cluster
    health = requests.get(url + "/health").json()
    assert health["workers_alive"] == 3 and health["evaluators"] == 3
    pids = {w["rank"]: int(re.search(r"pid (\d+)", w["device"]).group(1)) for w in health["workers"]}
    c = Client(url)
    items = [{"task": TASKS[k % len(TASKS)], "name": f"k{k}.cpp",
              "source": example(TASKS[k % len(TASKS)] + ".cpp") + f"\n// {k}\n"} for k in range(48)]
    results = {}

    def run():
        results["outs"] = c.evaluate_many(items, concurrency=16)

    t = threading.Thread(target=run)
    t.start()
    for _ in range(400):  # kill rank 2 while it holds work
        w = next(w for w in requests.get(url + "/health").json()["workers"] if w["rank"] == 2)
        if w["in_flight"] > 0:
            break
        time.sleep(0.02)
    os.kill(pids[2], signal.SIGKILL)
    t.join(timeout=600)
    outs = results["outs"]
    assert len(outs) == 48 and len({o.id for o in outs}) == 48  # every request answered, once
    assert sorted(o.candidate for o in outs) == sorted(i["name"] for i in items)
    assert all(o.status in ("ok", "infra_error") for o in outs), {o.status for o in outs}
    assert sum(o.ok for o in outs) >= 46  # re-sent to the others: at most a twice-lost one is infra_error
    health = requests.get(url + "/health").json()
    assert health["workers_alive"] == 2 and health["workers_lost"] == 1
    assert health["requeued"] >= 1
    assert Client(url).evaluate("relu", example("relu.cpp") + "\n// after\n").ok  # still serving
