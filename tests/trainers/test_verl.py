"""leap's verl adapters loaded and called by verl 0.9's own code: the custom reward function by path
(verl's loader), its naive and batch reward managers over a real batch, leap's agent loop through
verl's agent-loop registry (DCP through leap serve's group register), and leap's advantage
estimator through verl's registry and compute_advantage."""
import asyncio
import math
import os

import numpy as np
import pytest
import torch
from conftest import LEARNER, SOURCE, example, fenced, hostile
from omegaconf import OmegaConf

import verl  # noqa: F401 (loads the verl.plugins entry points: leap_client.verl_agent)
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.workers.rollout.replica import TokenOutput

ADAPTER = SOURCE / "python" / "leap_client" / "verl.py"


def batch_of(tokenizer, rows):
    """A DataProto as verl's trainer hands it to a reward manager: (prompt, response, task) rows,
    prompts left-padded, responses right-padded."""
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, return_dict=False)
               for p, _, _ in rows]
    responses = [tokenizer.encode(r) + [tokenizer.eos_token_id] for _, r, _ in rows]
    P, R, pad = max(map(len, prompts)), max(map(len, responses)), tokenizer.pad_token_id
    ids_p = torch.tensor([[pad] * (P - len(p)) + p for p in prompts])
    ids_r = torch.tensor([r + [pad] * (R - len(r)) for r in responses])
    mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (R - len(r))
                         for p, r in zip(prompts, responses)])
    n = len(rows)
    return DataProto.from_dict(
        tensors={"prompts": ids_p, "responses": ids_r, "input_ids": torch.cat([ids_p, ids_r], 1), "attention_mask": mask},
        non_tensors={"data_source": np.array(["leap"] * n, dtype=object),
                     "reward_model": np.array([{"ground_truth": t} for _, _, t in rows], dtype=object),
                     "extra_info": np.array([{} for _ in rows], dtype=object)})


def reward_config(name):
    return OmegaConf.create({"reward": {"custom_reward_function": {"path": str(ADAPTER), "name": name,
                                                                   "reward_kwargs": {}}}})


def test_the_reward_function_through_verls_loader_and_naive_manager(server, tokenizer, monkeypatch):
    monkeypatch.setenv("LEAP_SERVE_URL", server.url)
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    fn = get_custom_reward_fn(reward_config("compute_score"))  # verl imports the file by its path
    manager = NaiveRewardManager(OmegaConf.create({}), tokenizer, fn)
    prompt = "Write relu. An example of the format:\n```cpp\n" + example("relu.cpp") + "```"
    rows = [(prompt, fenced(example("relu.cpp")), "relu"), (prompt, "Sorry, I cannot.", "relu"),
            (prompt, fenced(hostile("relu.wrong_answer.cpp")), "relu"), (prompt, fenced(example("relu.cpp")), "nope")]
    data = batch_of(tokenizer, rows)
    got = [manager.loop.run_until_complete(manager.run_single(data[i:i + 1])) for i in range(len(rows))]
    info = [g["reward_extra_info"] for g in got]
    assert [i["status"] for i in info] == ["ok", "no_candidate", "wrong_answer", "refused"], info
    assert got[0]["reward_score"] >= 1.0 and all(g["reward_score"] == 0.0 for g in got[1:])
    assert all(set(i) == set(info[0]) for i in info)  # verl gathers every key per sample
    assert not any(i["infra_error"] for i in info)


def test_the_batch_manager_scores_a_batch_of_64_in_one_request(server, tokenizer, monkeypatch):
    monkeypatch.setenv("LEAP_SERVE_URL", server.url)
    from verl.workers.reward_manager import get_reward_manager_cls

    fn = get_custom_reward_fn(reward_config("compute_score_batch"))
    manager = get_reward_manager_cls("batch")(tokenizer=tokenizer, num_examine=0, compute_score=fn)
    answers = [(fenced(example("relu.cpp")), "relu"), (fenced(hostile("relu.wrong_answer.cpp")), "relu"),
               ("no code at all", "relu"), (fenced(example("relu.cpp")), "no_such_task")]
    rows = [("Write the kernel.", *answers[i % 4]) for i in range(64)]
    out = manager(batch_of(tokenizer, rows), return_dict=True)
    statuses = out["reward_extra_info"]["status"]
    assert statuses == [["ok", "wrong_answer", "no_candidate", "refused"][i % 4] for i in range(64)], statuses
    scores = out["reward_tensor"].sum(-1).tolist()
    assert all((s >= 1.0) == (i % 4 == 0) for i, s in enumerate(scores))
    assert all(len(v) == 64 for v in out["reward_extra_info"].values())


class ScriptedModel:
    """Stands in for the language model (the one part that cannot run here): each rollout answers
    from its own table, turn by turn."""

    def __init__(self, tokenizer, answers):
        self.tokenizer, self.answers, self.prompts = tokenizer, list(answers), []

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        self.prompts.append(self.tokenizer.decode(prompt_ids))
        text = self.answers.pop(0)
        return TokenOutput(token_ids=self.tokenizer.encode(text) + [self.tokenizer.eos_token_id])


def agent_loop(tokenizer, model, n):
    """leap_agent as verl's AgentLoopWorker builds one: from the registry, through hydra."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 8192, "response_length": 8192, "n": n}},
                            "data": {}})
    return hydra.utils.instantiate(config=_agent_loop_registry["leap_agent"], trainer_config=DictConfigWrap(cfg),
                                   server_manager=model, tokenizer=tokenizer, processor=None, hf_model_type=None,
                                   dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data),
                                   tools=ToolListWrap([]))


def run_group(tokenizer, uid, scripts, task="relu", started=None):
    """Runs len(started or scripts) rollouts of one prompt concurrently (a group of len(scripts))."""
    models = [ScriptedModel(tokenizer, s) for s in scripts]

    async def all_of():
        loops = [agent_loop(tokenizer, m, len(scripts)) for m in models[:started or len(scripts)]]
        return await asyncio.gather(*[
            loop.run({}, raw_prompt=[{"role": "user", "content": f"Write {task}."}], uid=uid,
                     reward_model={"ground_truth": task}, extra_info={"task": task}) for loop in loops])

    return asyncio.run(all_of()), models


GOOD, WRONG = fenced(example("relu.cpp")), fenced(hostile("relu.wrong_answer.cpp"))


def test_the_agent_loop_refines_a_medium_group_with_feedback_until_solved_or_the_turn_limit(
        server, tokenizer, monkeypatch):
    monkeypatch.setenv("LEAP_SERVE_URL", server.url)
    outs, models = run_group(tokenizer, "medium-1", [[GOOD], [GOOD], [WRONG, GOOD], [WRONG, WRONG, WRONG]])
    assert [o.extra_fields["leap_statuses"] for o in outs] == [
        ["ok"], ["ok"], ["wrong_answer", "ok"], ["wrong_answer"] * 3]
    assert {o.extra_fields["leap_difficulty"] for o in outs} == {"medium"}
    assert [o.reward_score > 0 for o in outs] == [True, True, True, False]
    # The next user turn is leap's feedback on the last answer; the feedback tokens are masked 0.
    assert "output was wrong" in models[3].prompts[1] and "You have 2 more attempts" in models[3].prompts[1]
    assert "You have 1 more attempt." in models[3].prompts[2]
    mask = outs[3].response_mask
    runs = sum(1 for k in range(len(mask)) if mask[k] and (k == 0 or not mask[k - 1]))
    assert runs == 3 and 0 in mask
    assert tokenizer.decode([t for t, m in zip(outs[3].response_ids, mask) if not m]).count("output was wrong") == 2


def test_dcp_stops_easy_and_hopeless_groups_after_turn_one(server, tokenizer, monkeypatch):
    monkeypatch.setenv("LEAP_SERVE_URL", server.url)
    easy, _ = run_group(tokenizer, "easy-1", [[GOOD], [GOOD], [GOOD], [WRONG, GOOD]])
    assert [len(o.extra_fields["leap_statuses"]) for o in easy] == [1, 1, 1, 1]
    assert {o.extra_fields["leap_difficulty"] for o in easy} == {"easy"}
    hopeless, _ = run_group(tokenizer, "hopeless-1", [[WRONG, GOOD]] * 4)
    assert [o.extra_fields["leap_statuses"] for o in hopeless] == [["wrong_answer"]] * 4
    assert {o.extra_fields["leap_difficulty"] for o in hopeless} == {"hopeless"}


def test_a_rollout_that_never_reports_does_not_block_its_group(server, tokenizer, monkeypatch):
    monkeypatch.setenv("LEAP_SERVE_URL", server.url)
    # Long enough for the three reports on a loaded machine (the turn-1 evaluations run first).
    monkeypatch.setenv("LEAP_DCP_DEADLINE_S", "8")
    # Three of four rollouts run: two failed, one solved, the fourth voided at the deadline.
    outs, _ = run_group(tokenizer, "lost-1", [[WRONG, GOOD], [WRONG, WRONG, GOOD], [GOOD], [GOOD]], started=3)
    assert [o.extra_fields["leap_statuses"] for o in outs] == [
        ["wrong_answer", "ok"], ["wrong_answer", "wrong_answer", "ok"], ["ok"]]
    import requests
    state = requests.get(server.url + "/v1/groups/lost-1").json()
    assert state["reported"] == 3 and state["decision"] == "refine" and state["difficulty"] == "medium"


def advantages_through_verl(outs, uids, learner_config, monkeypatch):
    """verl's compute_advantage with adv_estimator=leap over the agent loops' outputs, shaped as
    verl's agent-loop worker shapes them (rm_scores: the reward at the last response token)."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage

    monkeypatch.setenv("LEAP_CONFIG", str(learner_config))
    R = max(len(o.response_ids) for o in outs)
    mask = torch.tensor([o.response_mask + [0] * (R - len(o.response_mask)) for o in outs])
    scores = torch.zeros(len(outs), R)
    for i, o in enumerate(outs):
        scores[i, len(o.response_ids) - 1] = o.reward_score
    data = DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": mask,
                                        "responses": torch.zeros(len(outs), R, dtype=torch.long)},
                               non_tensors={"uid": np.array(uids, dtype=object)})
    data = compute_advantage(data, adv_estimator="leap", config=AlgoConfig())
    return data.batch["advantages"], mask


def per_turn(adv_row, mask_row):
    """The advantage of each turn (each run of response_mask = 1), checked constant within it."""
    values, current = [], None
    for a, m in zip(adv_row.tolist(), mask_row.tolist()):
        if m:
            if current is None:
                current = []
            current.append(a)
        elif current is not None:
            values.append(current)
            current = None
    if current is not None:
        values.append(current)
    assert all(max(v) == min(v) for v in values)
    return [v[0] for v in values]


def test_the_estimator_gives_leaps_per_turn_advantages_through_verls_registry(
        server, tokenizer, leap_config, monkeypatch):
    monkeypatch.setenv("LEAP_SERVE_URL", server.url)
    assert get_adv_estimator_fn("leap").__module__ == "leap_client.verl_agent"  # registered by verl's plugin load
    medium, _ = run_group(tokenizer, "adv-medium", [[GOOD], [WRONG, GOOD], [WRONG, WRONG, WRONG], [WRONG, WRONG, GOOD]])
    easy, _ = run_group(tokenizer, "adv-easy", [[GOOD], [GOOD], [GOOD], [WRONG]])
    adv, mask = advantages_through_verl(medium + easy, ["m"] * 4 + ["e"] * 4, leap_config, monkeypatch)
    got = [per_turn(adv[i], mask[i]) for i in range(8)]
    # LEAP's rank reward, per-turn baseline, gamma 0.8 (LEARNER), worked by hand. Medium group: A
    # solved at 1, B at 2, D at 3, C never. Rank: A beats 3 (1), B beats C, D and loses to A (1/3),
    # D beats C (-1/3), C loses to all (-1). Turn 1 is LEAP's discounted reward; turn 2's cohort
    # {B, C, D}: B 1, D 0, C -1; turn 3's {C, D}: D 1, C -1; positive values discounted from the
    # final turn by 0.8 per turn.
    want_medium = [[1.0], [1 / 3 * 0.8, 1.0], [-1.0, -1.0, -1.0], [-1 / 3, 0.0 * 0.8, 1.0]]
    # Easy group: three solved at 1 (each beats D: 1/3), D failed once (-1).
    want_easy = [[1 / 3]] * 3 + [[-1.0]]
    for g, w in zip(got, want_medium + want_easy):
        assert len(g) == len(w) and all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(g, w)), (got, LEARNER)
    # Feedback tokens carry no advantage.
    assert float((adv * (1 - mask)).abs().sum()) == 0.0


def test_an_infra_error_is_voided_never_a_penalty(leap_config, monkeypatch):
    from leap_client.verl_agent import outcome_reward
    # Three rollouts judged (one solved, two failed once), the fourth failed by leap at turn 1.
    rewards = [outcome_reward("ok", 2.0, False), outcome_reward("wrong_answer", 0, False),
               outcome_reward("wrong_answer", 0, False), outcome_reward("infra_error", 0, True)]
    mask = [[1, 1, 0], [1, 1, 0], [1, 1, 0], [1, 1, 0]]
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage
    monkeypatch.setenv("LEAP_CONFIG", str(leap_config))
    scores = torch.tensor([[0, r, 0] for r in rewards], dtype=torch.float32)
    data = DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": torch.tensor(mask),
                                        "responses": torch.zeros(4, 3, dtype=torch.long)},
                               non_tensors={"uid": np.array(["g"] * 4, dtype=object)})
    adv = compute_advantage(data, adv_estimator="leap", config=AlgoConfig()).batch["advantages"]
    assert adv[3].abs().sum() == 0  # leap's fault: no advantage either way
    assert math.isclose(float(adv[0, 0]), 1.0, abs_tol=1e-6)  # ranked among the three judged ones
    assert math.isclose(float(adv[1, 0]), -0.5, abs_tol=1e-6)
    with pytest.raises(ValueError, match="use_kl_in_reward"):
        compute_advantage(data, adv_estimator="leap", config=AlgoConfig(use_kl_in_reward=True))
    os.environ.pop("LEAP_CONFIG", None)
