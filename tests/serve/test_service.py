"""The service's own behaviour: load with backpressure, tokens, shutdown."""
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import BUILD, SOURCE, example
from leap_client import Client

TASKS = ["relu", "gelu", "silu", "sigmoid", "leaky_relu", "softmax", "layer_norm", "rms_norm"]


def test_64_clients_x_8_requests_every_one_answered_once(make_server):
    # A short queue and no results cache: the clients are refused (429) and must come back, for as
    # long as it takes (how many refusals a loaded machine gives is not what this test is about).
    s = make_server("--evaluators", "2", "--queue-limit", "8", "--no-cache")
    clients = [Client(s.url, backoff_cap_s=2.0, max_retries=100_000) for _ in range(64)]

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
    assert all(o.status == "ok" for _, o in results), [(o.candidate, o.status, o.check, o.feedback)
                                                       for _, o in results if o.status != "ok"]
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


class ResettingProxy:
    """A loopback HTTP/1.1 proxy that forwards a submission to the server and then resets the
    client's connection instead of answering: the server took it, the client cannot know."""

    def __init__(self, upstream, resets):
        self.upstream = upstream.split("//")[1].split(":")
        self.resets, self.posts, self.open = resets, 0, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _message(f):
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = f.readline()
            if not line:
                return None
            head += line
        length = int(re.search(rb"(?im)^content-length:\s*(\d+)", head).group(1)) if b"ontent-" in head.lower() else 0
        return head + f.read(length)

    def _accept(self):
        while True:
            client, _ = self.sock.accept()
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        up = socket.create_connection((self.upstream[0], int(self.upstream[1])))
        self.open += [client, up]
        cf, uf = client.makefile("rb"), up.makefile("rb")
        while (request := self._message(cf)) is not None:
            up.sendall(request)
            answer = self._message(uf)
            if request.startswith(b"POST /v1/evaluate"):
                self.posts += 1
                if self.resets > 0:
                    self.resets -= 1
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    client.close()
                    up.close()
                    return
            client.sendall(answer)
        client.close()
        up.close()

    def close(self):
        # Kept-alive connections too: the server's shutdown would wait out their idle timeout.
        self.sock.close()
        for s in self.open:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_a_submission_whose_connection_broke_is_retried_and_evaluated_once(make_server):
    s = make_server("--evaluators", "1", "--no-cache")
    proxy = ResettingProxy(s.url, resets=2)
    try:
        c = Client(proxy.url)
        out = c.result(c.submit("relu", example("relu.cpp"), name="once.cpp"))
    finally:
        proxy.close()
    assert out.status == "ok" and out.candidate == "once.cpp"
    assert proxy.posts == 3  # two answers cut off after the server had taken the submission
    assert "leap_serve_submitted_total 1\n" in requests.get(s.url + "/metrics").text

    # Without a key a broken POST is not retried: the client cannot know whether it was taken.
    proxy = ResettingProxy(s.url, resets=1)
    try:
        body = {"task": "relu", "source": example("relu.cpp")}
        with pytest.raises(requests.ConnectionError):
            Client(proxy.url)._request("POST", "/v1/evaluate", json=body)
    finally:
        proxy.close()


def test_idempotency_key_answers_the_first_submission(make_server):
    s = make_server("--evaluators", "1", "--no-cache")
    body = {"task": "relu", "source": example("relu.cpp"), "name": "k.cpp"}
    key = {"Idempotency-Key": uuid.uuid4().hex}
    first = requests.post(s.url + "/v1/evaluate", json=body, headers=key)
    again = requests.post(s.url + "/v1/evaluate", json=body, headers=key)
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"] and again.json()["repeated"] is True
    other = requests.post(s.url + "/v1/evaluate", json=dict(body, name="other.cpp"), headers=key)
    assert other.status_code == 422 and other.json()["field"] == "Idempotency-Key"
    bad = requests.post(s.url + "/v1/evaluate", json=body, headers={"Idempotency-Key": "a b"})
    assert bad.status_code == 400 and bad.json()["field"] == "Idempotency-Key"
    fresh = requests.post(s.url + "/v1/evaluate", json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
    assert fresh.status_code == 202 and fresh.json()["id"] != first.json()["id"]
    sync = requests.post(s.url + "/v1/eval", json=body, headers=key)  # the same key on the synchronous call
    assert sync.status_code == 200 and sync.json()["id"] == first.json()["id"]
    assert "leap_serve_submitted_total 2\n" in requests.get(s.url + "/metrics").text


def _slow_client(url, head, stop, closed_at, i):
    """Sends `head`, then a byte every 0.3 s (a request that never ends), until the server closes
    the connection (its time into closed_at[i]) or `stop` is set."""
    host, port = url.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)), timeout=5)
    s.settimeout(0.3)
    t0 = time.monotonic()
    try:
        s.sendall(head)
        while not stop.is_set():
            try:
                s.sendall(b"a")
                if s.recv(4096) == b"":
                    break
            except socket.timeout:
                continue
            except OSError:
                break
        else:
            return
        closed_at[i] = time.monotonic() - t0
    finally:
        s.close()


def test_slow_clients_neither_starve_others_nor_hold_their_connections(make_server, tmp_path):
    cfg = tmp_path / "serve.toml"
    cfg.write_text("[serve]\nread_deadline_s = 2\nthreads = 16\n")
    s = make_server("--config", str(cfg))
    heads = [b"GET /v1/tasks HTTP/1.1\r\nHost: x\r\nX-Slow: ",  # a head that never ends
             b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: 100000\r\n\r\n{\"task\": \""]  # a body that never ends
    n = 24  # more than the server's 16 threads
    stop, closed_at = threading.Event(), [None] * n
    slow = [threading.Thread(target=_slow_client, args=(s.url, heads[i % 2], stop, closed_at, i)) for i in range(n)]
    try:
        for t in slow:
            t.start()
        time.sleep(1)  # every slow client is connected and sending
        t0 = time.monotonic()
        assert requests.get(s.url + "/health", timeout=30).status_code == 200
        assert requests.get(s.url + "/v1/tasks/relu", timeout=30).status_code == 200
        # Without the deadline the slow clients would hold all 16 threads for as long as they send.
        assert time.monotonic() - t0 < 15
        for t in slow:
            t.join(timeout=30)
    finally:
        stop.set()
        for t in slow:
            t.join()
    # Every slow connection was ended by the server, after its deadline and not long after it.
    assert all(c is not None for c in closed_at), closed_at
    assert min(closed_at) >= 1.5 and max(closed_at) < 20, closed_at


def test_a_second_server_on_a_port_in_use_and_ports_out_of_range_are_refused(server):
    port = server.url.rsplit(":", 1)[1]
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE))
    p = subprocess.run([str(BUILD / "leap"), "serve", "--port", port], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode != 0 and f"cannot listen on 127.0.0.1:{port}" in p.stderr, p.stderr
    assert requests.get(server.url + "/health", timeout=10).status_code == 200  # the first one is untouched
    for bad in ("70000", "-1"):
        p = subprocess.run([str(BUILD / "leap"), "serve", "--port", bad], capture_output=True, text=True, env=env,
                           timeout=60)
        assert p.returncode != 0 and "--port" in p.stderr, p.stderr


@pytest.mark.parametrize("path,body,field", [
    ("/v1/evaluate", {"task": 5, "source": "x"}, "task"),
    ("/v1/evaluate", {"task": "relu", "source": ["x"]}, "source"),
    ("/v1/evaluate", {"task": "relu", "source": "x", "name": {}}, "name"),
    ("/v1/evaluate", {"task": "relu", "source": "x", "settings": "fast"}, "settings"),
    ("/v1/evaluate", {"task": "relu", "source": "x", "settings": {"trials": "3"}}, "settings.trials"),
    ("/v1/evaluate", {"task": "relu", "source": "x", "settings": {"seed": -1}}, "settings.seed"),
    ("/v1/evaluate", {"task": "relu", "source": "x", "settings": {"timing_budget_ms": "9"}},
     "settings.timing_budget_ms"),
    ("/v1/eval", {"task": "relu", "source": "x", "timeout_s": "10"}, "timeout_s"),
    ("/v1/batch", {"candidates": "relu"}, "candidates"),
    ("/v1/batch", {"candidates": [7]}, "candidates[0]"),
    ("/evaluate", {"task_id": 5, "kernel_code": "x", "task": "relu"}, "task_id"),
    ("/evaluate", {"task_id": "a", "kernel_code": 5, "task": "relu"}, "kernel_code"),
    ("/evaluate", {"task_id": "a", "kernel_code": "x", "task": "relu", "num_correct_trials": "2"},
     "num_correct_trials"),
    ("/evaluate", {"task_id": "a", "kernel_code": "x", "task": "relu", "force_refresh": "yes"}, "force_refresh"),
])
def test_a_wrong_typed_field_is_a_400_naming_it(server, path, body, field):
    r = requests.post(server.url + path, json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field, r.text


def test_the_token_is_checked_before_a_body_is_read(make_server):
    s = make_server(env={"LEAP_SERVE_TOKEN": "s3cret"})
    host, port = s.url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as c:
        # A body announced but never sent: the answer cannot wait for it.
        c.sendall(b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000000\r\n\r\n")
        c.settimeout(10)
        assert c.recv(4096).startswith(b"HTTP/1.1 401")
