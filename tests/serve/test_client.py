"""The Python client against a real `leap serve` (CPU backend, loopback)."""
import json
import threading
import time

import pytest
import requests

from conftest import SOURCE, example, expectations, hostile
from leap_client import Client, LeapServeError, build_prompt, extract_candidate, next_user_message

EXAMPLES = sorted(p.name for p in (SOURCE / "examples" / "cpu").glob("*.cpp"))


def test_every_builtin_example_is_ok(server):
    c = Client(server.url)
    outs = c.evaluate_many([{"task": n[:-4], "source": example(n), "name": n} for n in EXAMPLES], concurrency=8)
    assert len(outs) == len(EXAMPLES)
    for n, o in zip(EXAMPLES, outs):
        assert o.status == "ok", (n, o.feedback)
        assert o.speedup > 0 and o.candidate_us > 0 and o.reference_us > 0
        assert "correct" in o.feedback_text
    again = c.evaluate("relu", example("relu.cpp"))
    assert again.ok and again.cached  # the same (task, source, settings): answered from the results


HOSTILE = ["relu.compile_error.cpp", "relu.wrong_answer.cpp", "relu.segfault.cpp", "relu.forge_reply.cpp",
           "relu.mutate_input.cpp", "relu.signal_parent.cpp", "relu.half_output.cpp", "relu.non_utf8_exception.cpp",
           "relu.write_file.cpp", "relu.forge_timing.cpp"]


def test_hostile_candidates_get_their_status(server):
    c = Client(server.url)
    outs = c.evaluate_many([{"task": "relu", "source": hostile(n), "name": n} for n in HOSTILE], concurrency=4)
    for n, o in zip(HOSTILE, outs):
        assert (o.status, o.check) in expectations(hostile(n)), (n, o.status, o.check, o.feedback)
        assert o.feedback_text
    assert Client(server.url).evaluate("relu", example("relu.cpp")).ok  # the service still serves


def test_bad_requests_get_their_4xx(server):
    url = server.url
    r = requests.post(url + "/v1/eval", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "JSON" in r.json()["error"]
    r = requests.post(url + "/v1/eval", data=b"\xff\xfe{}", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    r = requests.post(url + "/v1/eval", data=b"x" * (10 * 1024 * 1024), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    r = requests.post(url + "/v1/eval", json={"task": "no_such_task", "source": "int x;"})
    assert r.status_code == 400 and r.json()["field"] == "task"
    r = requests.post(url + "/v1/eval", json={"task": "relu", "source": 5})
    assert r.status_code == 400 and r.json()["field"] == "source"
    r = requests.post(url + "/v1/eval", json={"task": "relu", "source": "x", "settings": {"trials": 0}})
    assert r.status_code == 400 and r.json()["field"] == "settings.trials"
    r = requests.post(url + "/v1/eval", json={"task": "relu", "source": "x", "colour": "red"})
    assert r.status_code == 400 and r.json()["field"] == "colour"
    r = requests.post(url + "/v1/batch", json={"candidates": [{"task": "relu", "source": "x"}, {"task": 3}]})
    assert r.status_code == 400 and r.json()["field"] == "candidates[1].task"
    assert requests.get(url + "/v1/results/ev-nope").status_code == 404
    assert requests.get(url + "/v1/nothing").status_code == 404
    with pytest.raises(LeapServeError) as e:
        Client(url).evaluate("relu", "x", settings={"timing_budget_ms": -1})
    assert e.value.status == 400 and e.value.field == "settings.timing_budget_ms"


def test_async_status_results_and_batch_stream(server):
    c = Client(server.url)
    # relu: calls of microseconds, so every trial runs before timing (a clearly slow candidate's
    # would be cut to 2: [eval] slow_stop_ratio).
    id_ = c.submit("relu", example("relu.cpp"), settings={"trials": 2})
    assert c.status(id_)["state"] in ("queued", "running", "done")
    o = c.result(id_)
    four = c.evaluate("relu", example("relu.cpp"), settings={"trials": 4})
    assert o.ok and four.ok and not four.cached  # other settings: evaluated again
    assert (o.record["trial_calls"], four.record["trial_calls"]) == (2, 4)
    items = [{"task": n[:-4], "source": example(n)} for n in ["softmax.cpp", "silu.cpp", "sigmoid.cpp"]]
    items.append({"task": "relu", "source": hostile("relu.wrong_answer.cpp")})
    outs = list(c.batch(items, settings={"trials": 3}))
    assert sorted(o.record["index"] for o in outs) == [0, 1, 2, 3]
    by_index = {o.record["index"]: o for o in outs}
    assert [by_index[i].status for i in range(3)] == ["ok"] * 3 and by_index[3].status == "wrong_answer"


def test_tasks_prompt_and_multiturn_helpers(server):
    c = Client(server.url)
    names = [t.name for t in c.tasks()]
    assert "relu" in names and len(names) == 32
    t = c.task("layer_norm")
    assert t.inputs and t.outputs and "torch" in t.torch_code
    prompt = build_prompt(t)
    assert "leap_kernel" in prompt and "layer_norm" in prompt and t.torch_code.strip() in prompt
    answer = "Here it is:\n```cpp\n" + example("relu.cpp") + "```\nDone."
    src = extract_candidate(answer)
    assert src.strip() == example("relu.cpp").strip()
    o = c.evaluate("relu", hostile("relu.wrong_answer.cpp"))
    msg = next_user_message(o, turn=1, max_turns=3)
    assert "wrong" in msg and "2 more attempts" in msg


def test_kernelgym_shape(server):
    url = server.url
    ref = requests.get(url + "/v1/tasks/relu").json()["torch_code"]
    body = {"task_id": "gym-relu-1", "reference_code": ref.replace("\n", "\r\n") + "\n\n", "kernel_code": example("relu.cpp"),
            "backend": "triton", "num_correct_trials": 3, "num_perf_trials": 20, "toolkit": "kernelbench"}
    r = requests.post(url + "/evaluate", json=body)
    assert r.status_code == 200 and r.json() == {"task_id": "gym-relu-1", "status": "pending"}
    for _ in range(600):
        s = requests.get(url + "/status/gym-relu-1").json()
        assert s["status"] in ("pending", "processing", "completed")
        if s["status"] == "completed":
            break
        time.sleep(0.05)
    res = requests.get(url + "/results/gym-relu-1").json()
    assert res["compiled"] is True and res["correctness"] is True and res["speedup"] > 0
    assert res["kernel_runtime"] > 0 and res["reference_runtime"] > 0 and res["metadata"]["leap_status"] == "ok"
    bad = dict(body, task_id="gym-bad", kernel_code=hostile("relu.compile_error.cpp"))
    assert requests.post(url + "/evaluate", json=bad).status_code == 200
    for _ in range(600):
        res = requests.get(url + "/results/gym-bad")
        if res.status_code == 200:
            break
        time.sleep(0.05)
    res = res.json()
    assert res["compiled"] is False and res["error_code"] == "COMPILATION_ERROR"
    r = requests.post(url + "/evaluate", json=dict(body, task_id="gym-x", reference_code="import torch\nprint(1)\n"))
    assert r.status_code == 400 and r.json()["field"] == "reference_code"


def test_metrics_and_health(server):
    Client(server.url).evaluate("relu", example("relu.cpp"))
    h = requests.get(server.url + "/health").json()
    assert h["status"] == "ok" and h["evaluators"] == 2
    text = requests.get(server.url + "/metrics").text
    for name in ["leap_serve_queue_depth", "leap_serve_in_flight", "leap_serve_evaluations_per_second",
                 'leap_serve_evaluations_total{status="ok"}', "leap_serve_compile_cache_hit_ratio",
                 'leap_serve_latency_seconds_bucket{le="+Inf"}']:
        assert name in text, name


def test_verl_and_openrlhf_adapters(server, monkeypatch):
    monkeypatch.setenv("LEAP_SERVE_URL", server.url)
    import leap_client.verl as verl
    verl._client = None
    good = verl.compute_score("leap", "```cpp\n" + example("relu.cpp") + "```", "relu")
    assert good["status"] == "ok" and good["score"] >= 1.0 and not good["infra_error"]
    wrong = verl.compute_score("leap", "```cpp\n" + hostile("relu.wrong_answer.cpp") + "```", "relu")
    assert wrong["score"] == 0.0 and wrong["status"] == "wrong_answer"
    none = verl.compute_score("leap", "no code here", "relu")
    assert none["status"] == "no_candidate" and set(none) == set(good)  # verl gathers every key per sample
    unknown = verl.compute_score("leap", "```cpp\n" + example("relu.cpp") + "```", "no_such_task")
    assert unknown["status"] == "refused" and unknown["score"] == 0.0 and set(unknown) == set(good)
    # verl's batch reward manager: one /v1/batch request, results in order with the same keys; a
    # batch holding an unknown task is scored sample by sample.
    answers = ["```cpp\n" + example("relu.cpp") + "```", "no code", "```cpp\n" + hostile("relu.wrong_answer.cpp") + "```"]
    batch = verl.compute_score_batch(["leap"] * 3, answers, ["relu"] * 3)
    assert [b["status"] for b in batch] == ["ok", "no_candidate", "wrong_answer"] and all(set(b) == set(good) for b in batch)
    batch = verl.compute_score_batch(["leap"] * 2, [answers[0], answers[0]], ["relu", "no_such_task"])
    assert [b["status"] for b in batch] == ["ok", "refused"], batch
    # verl imports custom_reward_function.path by file location, outside any package.
    import importlib.util
    spec = importlib.util.spec_from_file_location("custom_module", SOURCE / "python" / "leap_client" / "verl.py")
    by_path = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(by_path)
    assert by_path.compute_score("leap", "```cpp\n" + example("relu.cpp") + "```", "relu")["status"] == "ok"

    from leap_client.openrlhf import make_server
    shim = make_server(Client(server.url), "127.0.0.1", 0)
    threading.Thread(target=shim.serve_forever, daemon=True).start()
    try:
        port = shim.server_address[1]
        queries = ["```cpp\n" + example("relu.cpp") + "```", "nothing", "```cpp\n" + hostile("relu.segfault.cpp") + "```"]
        r = requests.post(f"http://127.0.0.1:{port}/reward", json={"query": queries, "prompts": [""] * 3,
                                                                  "labels": ["relu"] * 3})
        rewards = r.json()["rewards"]
        assert rewards[0] >= 1.0 and rewards[1] == 0.0 and rewards[2] == 0.0
        # OpenRLHF's query is prompt + response: a prompt's worked example is not the answer's kernel,
        # and an item naming no task of leap's scores 0 without failing the others.
        prompt = "Here is an example kernel:\n```cpp\n" + example("relu.cpp") + "```\nNow write relu.\n"
        queries = [prompt + "Sorry, I cannot write this kernel.", prompt + "```cpp\n" + example("relu.cpp") + "```",
                   "```cpp\n" + example("relu.cpp") + "```"]
        r = requests.post(f"http://127.0.0.1:{port}/reward", json={"query": queries, "prompts": [prompt, prompt, ""],
                                                                  "labels": ["relu", "relu", "no_such_task"]})
        assert r.status_code == 200, r.text
        assert r.json()["rewards"] == [0.0, r.json()["rewards"][1], 0.0] and r.json()["rewards"][1] >= 1.0, r.json()
    finally:
        shim.shutdown()
