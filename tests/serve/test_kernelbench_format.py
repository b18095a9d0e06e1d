"""KernelBench-format answers (a module defining ModelNew) through a real `leap serve`: its own
ctest entry, beside other tests (the serial one holds the load tests)."""
import time

import requests

from conftest import SOURCE
from leap_client import Client


def test_kernelbench_format_answers(server):
    """A ModelNew module through /v1/eval (format stated or told by its source), the batch form and
    KernelGYM's kernel_code; the wrong one gets its verdict."""
    answers = SOURCE / "tests" / "fixtures" / "kernelbench" / "answers"
    honest, wrong = (answers / "relu.py").read_text(), (answers / "relu.wrong_answer.py").read_text()
    c = Client(server.url)
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
