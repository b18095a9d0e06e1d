"""The DCP group register's endpoints and /v1/batch's per-item answers (an unknown task, the
trainer's deadline), over HTTP as a trainer calls them."""
import uuid

import pytest
import requests

from conftest import example
from leap_client import Client


def test_a_group_is_decided_when_all_report_and_answers_every_rollout(server):
    url, g = server.url, "grp-" + uuid.uuid4().hex
    c = Client(url)
    first = requests.post(f"{url}/v1/groups/{g}/turn1", json={"group_size": 4, "correct": True}).json()
    assert first["decision"] == "pending" and first["reported"] == 1 and 0 < first["deadline_s"] <= 300
    requests.post(f"{url}/v1/groups/{g}/turn1", json={"group_size": 4, "correct": False})
    requests.post(f"{url}/v1/groups/{g}/turn1", json={"group_size": 4, "correct": False, "infra_error": False})
    last = c.dcp_decision(g, 4, correct=True)
    # Two of four failed: medium under [learner]'s defaults (t_min 2 of 4, all-failed hopeless).
    assert last["decision"] == "refine" and last["difficulty"] == "medium" and last["failed"] == 2
    assert c.group(g)["decision"] == "refine"
    r = requests.post(f"{url}/v1/groups/{g}/turn1", json={"group_size": 4, "correct": True})
    assert r.status_code == 409 and r.json()["field"] == "group"  # a fifth report of four


@pytest.mark.parametrize("body,field", [
    ({"correct": True}, "group_size"),
    ({"group_size": "4", "correct": True}, "group_size"),
    ({"group_size": 4}, "correct"),
    ({"group_size": 4, "correct": 1}, "correct"),
    ({"group_size": 4, "correct": True, "infra_error": "no"}, "infra_error"),
    ({"group_size": 4, "correct": True, "deadline_s": 0}, "deadline_s"),
    ({"group_size": 4, "correct": True, "colour": "red"}, "colour"),
])
def test_a_malformed_report_is_a_400_naming_its_field(server, body, field):
    r = requests.post(f"{server.url}/v1/groups/bad-{uuid.uuid4().hex}/turn1", json=body)
    assert r.status_code == 400 and r.json()["field"] == field, r.text


def test_a_group_dcp_cannot_decide_is_refused_and_an_unknown_one_is_404(server):
    r = requests.post(f"{server.url}/v1/groups/solo/turn1", json={"group_size": 1, "correct": True})
    assert r.status_code == 400 and r.json()["field"] == "group_size"  # the register needs G >= 2
    g = "size-" + uuid.uuid4().hex
    requests.post(f"{server.url}/v1/groups/{g}/turn1", json={"group_size": 4, "correct": True})
    r = requests.post(f"{server.url}/v1/groups/{g}/turn1", json={"group_size": 8, "correct": True})
    assert r.status_code == 409 and r.json()["field"] == "group_size"
    assert requests.get(f"{server.url}/v1/groups/never-{uuid.uuid4().hex}").status_code == 404


def test_a_batch_answers_an_unknown_task_per_item_and_stops_at_the_trainers_deadline(server):
    c = Client(server.url)
    fresh = example("relu.cpp") + f"\n// {uuid.uuid4().hex}\n"  # not in the results cache
    got = {o.record["index"]: o for o in c.batch([{"task": "relu", "source": example("relu.cpp")},
                                                  {"task": "no_such_task", "source": fresh}])}
    assert got[0].status == "ok" and got[1].status == "refused" and "no_such_task" in got[1].feedback
    assert got[1].record["field"] == "candidates[1].task"
    # A deadline shorter than a compile: answered as timed_out, its id kept for later.
    got = list(c.batch([{"task": "relu", "source": fresh}], timeout_s=0.05))
    assert len(got) == 1 and got[0].status == "timed_out" and not got[0].counts
    assert c.result(got[0].record["id"]).status == "ok"
    r = requests.post(server.url + "/v1/batch", json={"candidates": [{"task": "relu", "source": "x"}], "timeout_s": -1})
    assert r.status_code == 400 and r.json()["field"] == "timeout_s"
