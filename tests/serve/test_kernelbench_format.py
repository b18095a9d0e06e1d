"""KernelBench-format answers (a module defining ModelNew) through a real `leap serve`: its own
ctest entry, beside other tests (the serial one holds the load tests)."""
import time

import pytest
import requests

from conftest import SOURCE, Server
from leap_client import Client


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # Triton's interpreter runs the honest answer's kernel on the CPU: tens of milliseconds a call.
    config = tmp_path_factory.mktemp("serve") / "serve.toml"
    config.write_text("[eval]\ncall_limit_floor_ms = 1000\n")
    s = Server("--evaluators", "1", "--config", str(config))  # one judge: one Python pool to start
    yield s
    rc, out, err = s.stop()
    assert rc == 0, err


def test_kernelbench_format_answers(server):
    """A ModelNew module through /v1/eval (format stated or told by its source), the batch form and
    KernelGYM's kernel_code; the wrong one gets its verdict, and one that leaves the work to PyTorch's
    own operator breaks KernelBench's rule."""
    answers = SOURCE / "tests" / "fixtures" / "kernelbench" / "answers"
    honest, wrong = (SOURCE / "tests" / "fixtures" / "kernelbench" / "triton" / "relu.py").read_text(), (SOURCE / "tests" / "fixtures" / "kernelbench" / "triton" / "relu.wrong_answer.py").read_text()
    torch_only = (SOURCE / "tests" / "fixtures" / "kernelbench" / "rule" / "relu.torch_only.py").read_text()
    c = Client(server.url)
    o = c.evaluate("relu", torch_only)
    assert (o.status, o.check) == ("cheat_detected", "no_custom_kernel"), o.feedback
    assert c.evaluate("relu", honest, format="kernelbench").status == "ok"
    o = c.evaluate("relu", honest)
    assert o.status == "ok", o.feedback
    outs = c.evaluate_many([{"task": "relu", "source": wrong}, {"task": "relu", "source": honest, "format": "kernelbench"}])
    assert [x.status for x in outs] == ["wrong_answer", "ok"]
    r = requests.post(server.url + "/v1/evaluate", json={"task": "relu", "source": honest, "format": "triton"})
    assert r.status_code == 400 and r.json()["field"] == "format"
    body = {"task_id": "gym-modelnew", "task": "relu", "kernel_code": honest}
    assert requests.post(server.url + "/evaluate", json=body).status_code == 200
    for _ in range(1200):
        res = requests.get(server.url + "/results/gym-modelnew")
        if res.status_code == 200:
            break
        time.sleep(0.05)
    res = res.json()
    assert res["compiled"] is True and res["correctness"] is True, res


def test_trainer_adapters_take_modelnew_answers(server, monkeypatch):
    """verl's reward function and OpenRLHF's reward server score a ModelNew answer in a python block."""
    import threading

    answers = SOURCE / "tests" / "fixtures" / "kernelbench" / "answers"
    honest = "Here is my kernel:\n```python\n" + (SOURCE / "tests" / "fixtures" / "kernelbench" / "triton" / "relu.py").read_text() + "```\n"
    torch_only = "```python\n" + (SOURCE / "tests" / "fixtures" / "kernelbench" / "rule" / "relu.torch_only.py").read_text() + "```"
    monkeypatch.setenv("LEAP_SERVE_URL", server.url)
    import leap_client.verl as verl
    verl._client = None
    good = verl.compute_score("leap", honest, "relu")
    assert good["status"] == "ok" and good["score"] >= 1.0, good
    assert verl.compute_score("leap", torch_only, "relu")["status"] == "cheat_detected"

    from leap_client.openrlhf import make_server
    shim = make_server(Client(server.url), "127.0.0.1", 0)
    threading.Thread(target=shim.serve_forever, daemon=True).start()
    try:
        r = requests.post(f"http://127.0.0.1:{shim.server_address[1]}/reward",
                          json={"query": [honest, torch_only], "prompts": ["", ""], "labels": ["relu", "relu"]})
        assert r.json()["rewards"][0] >= 1.0 and r.json()["rewards"][1] == 0.0, r.json()
    finally:
        shim.shutdown()

