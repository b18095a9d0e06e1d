"""LEAP inside verl's multi-turn rollout (verl 0.9): an agent loop and an advantage estimator.

- `leap_agent`, a verl agent loop (verl 0.9's interface for multi-turn rollouts; its
  BaseInteraction was removed with the old rollout): the model answers, leap serve judges the
  answer, the verdict's feedback is the next user turn. A trajectory ends when solved, at the turn
  limit, when leap fails to judge it, or when DCP says stop: after turn 1 every rollout reports to
  leap serve's group register under verl's `uid` (the G rollouts of one prompt share it) and waits
  for the group's decision (LEAP's thresholds from the service's [learner] settings, decided when
  all G reported or at the deadline). The trajectory's reward is its final turn's outcome: the
  speedup if solved, 0 if not, -1 if leap failed it (its advantage is then 0: never a penalty).
- `leap`, a verl advantage estimator (`algorithm.adv_estimator=leap`): LEAP's rank rewards with
  per-turn advantages, computed by the learner's own code (libleap_credit, leap_client/credit.py)
  from the group's outcomes: the turns of a trajectory are its runs of response_mask = 1 (the
  feedback turns between them are masked 0), its outcome the reward at its last token.

Settings: LEAP_SERVE_URL (and LEAP_SERVE_TOKEN) name the service; LEAP_CONFIG a leap configuration
whose [learner] table sets the reward (the same file `leap serve --config` reads, so DCP and the
reward agree); LEAP_DCP_DEADLINE_S how long a group waits for a lost rollout (300).
verl imports this module through the `verl.plugins` entry point of the leap-client package, or
VERL_USE_EXTERNAL_MODULES=leap_client.verl_agent; the agent loop is chosen per sample by the
dataset's `agent_name` ("leap_agent") or `actor_rollout_ref.rollout.agent.default_agent_loop`."""
from __future__ import annotations

import asyncio
import os
from typing import Any, Dict, List, Optional
from uuid import uuid4

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
from verl.trainer.ppo.core_algos import register_adv_est

from .credit import Turn, step_advantages
from .multiturn import next_user_text
from .verl import _get_client, _task_of, compute_score

_VOIDED = -1.0  # the reward of a trajectory leap failed to judge: left out of its group's credit


def outcome_reward(status: str, speedup: float, voided: bool) -> float:
    """A trajectory's reward from its final turn: the speedup if solved, 0 if not, -1 if voided."""
    if voided:
        return _VOIDED
    return max(float(speedup), 1e-6) if status == "ok" else 0.0


def turn_of_reward(reward: float) -> Turn:
    return Turn(correct=reward > 0, speedup=max(reward, 0.0), infra=reward < 0)


def _learner_settings() -> str:
    path = os.environ.get("LEAP_CONFIG")
    if not path:
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()


@register("leap_agent")
class LeapAgentLoop(AgentLoopBase):
    """LEAP's multi-turn refinement with DCP across the group (module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.response_length = self.rollout_config.response_length
        self.group_size = int(self.rollout_config.n)
        self.deadline_s = float(os.environ.get("LEAP_DCP_DEADLINE_S", "300"))
        self.client = _get_client()  # one session for every rollout of this process

    async def _judge(self, task: str, answer: str) -> Dict[str, Any]:
        return await self.loop.run_in_executor(None, lambda: compute_score("leap", answer, task, {"task": task}))

    async def _decision(self, group: str, result: Dict[str, Any]) -> Dict[str, Any]:
        """The group's DCP decision after this rollout's turn 1. With one rollout per prompt (e.g.
        validation) there is no group to decide on: one turn."""
        if self.group_size < 2:
            return {"decision": "stop", "difficulty": "", "max_turns": 1}
        voided = result["infra_error"] or result["status"] == "refused"
        return await self.loop.run_in_executor(None, lambda: self.client.dcp_decision(
            group, self.group_size, result["status"] == "ok", voided, self.deadline_s))

    async def run(self, sampling_params: Dict[str, Any], **kwargs) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        task = _task_of((kwargs.get("reward_model") or {}).get("ground_truth"), kwargs.get("extra_info"))
        group = str(kwargs.get("uid") or uuid4().hex)
        ids = await self.ct_build_initial_tokens(messages)
        mask: List[int] = []
        logprobs: Optional[List[float]] = None
        results: List[Dict[str, Any]] = []
        metrics: Dict[str, Any] = {}
        decision: Dict[str, Any] = {}
        max_turns = 1
        while True:
            out = await self.server_manager.generate(request_id=uuid4().hex, prompt_ids=ids,
                                                     sampling_params=sampling_params)
            merged, mask, lp = await self.ct_merge_assistant_token(
                ids, out.token_ids, mask, logprobs if (logprobs or out.log_probs) else None,
                assistant_logprobs=out.log_probs or None)
            ids, logprobs = merged.token_ids, lp if lp is not None else logprobs
            answer = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            result = await self._judge(task, answer)
            results.append(result)
            turn = len(results)
            if turn == 1:
                decision = await self._decision(group, result)
                max_turns = int(decision.get("max_turns", 1)) if decision["decision"] == "refine" else 1
            voided = result["infra_error"] or result["status"] == "refused"
            if result["status"] == "ok" or voided or turn >= max_turns or len(mask) >= self.response_length:
                break
            messages.append({"role": "assistant", "content": answer})
            previous = list(messages)
            messages.append({"role": "user", "content": next_user_text(result["feedback"], turn, max_turns)})
            merged, mask, lp = await self.ct_merge_context_msg(previous, messages, ids, mask, logprobs)
            ids, logprobs = merged.token_ids, lp if logprobs is not None else None
            if len(mask) >= self.response_length:
                break
        last = results[-1]
        response_ids = ids[len(ids) - len(mask):]
        output = AgentLoopOutput(
            prompt_ids=ids[: len(ids) - len(mask)],
            response_ids=response_ids[: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=outcome_reward(last["status"], last["speedup"], last["infra_error"] or last["status"] == "refused"),
            num_turns=2 * len(results) + 1,
            metrics=metrics,
            extra_fields={"turn_scores": [r["score"] for r in results],
                          "leap_statuses": [r["status"] for r in results],
                          "leap_difficulty": decision.get("difficulty", ""),
                          "leap_infra_error": bool(last["infra_error"])},
        )
        return output


def _turn_spans(mask: torch.Tensor) -> List[tuple]:
    """(start, end) of each run of 1s: the assistant's turns."""
    spans, start = [], None
    for k, m in enumerate(mask.tolist()):
        if m and start is None:
            start = k
        elif not m and start is not None:
            spans.append((start, k))
            start = None
    if start is not None:
        spans.append((start, len(mask)))
    return spans


@register_adv_est("leap")
def compute_leap_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index=None, config=None,
                           **kwargs) -> tuple:
    """LEAP's per-turn advantages (module docstring); returns (advantages, returns) as verl's
    estimators do, the returns equal to the advantages (no critic)."""
    if config is not None and bool(getattr(config, "use_kl_in_reward", False)):
        raise ValueError("adv_estimator=leap reads each trajectory's outcome from its reward: set "
                         "algorithm.use_kl_in_reward=False (use the actor's KL loss instead)")
    if index is None:
        raise ValueError("adv_estimator=leap needs verl's uid (the group of each rollout)")
    rewards = token_level_rewards.sum(-1).tolist()
    groups: Dict[Any, List[int]] = {}
    for row, uid in enumerate(index):
        groups.setdefault(uid, []).append(row)
    spans = [_turn_spans(response_mask[row]) for row in range(response_mask.shape[0])]
    step = [[[Turn(False)] * (max(len(spans[row]), 1) - 1) + [turn_of_reward(rewards[row])] for row in rows]
            for rows in groups.values()]
    credit = step_advantages(step, _learner_settings())
    advantages = torch.zeros_like(token_level_rewards)
    for rows, per_rollout in zip(groups.values(), credit):
        for row, per_turn in zip(rows, per_rollout):
            for (start, end), a in zip(spans[row], per_turn):
                advantages[row, start:end] = a
    advantages = advantages * response_mask
    return advantages, advantages
