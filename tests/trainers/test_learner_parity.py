"""verl's `leap` estimator equals `leap run`'s learner on the same outcomes: a real run (mpirun, the
schedule policy, CPU kernels) records every rollout-turn's outcome and the advantage it was trained
with; its outcomes, shaped as verl's agent loop shapes a trajectory (one row per rollout, a
response_mask run per turn, the final outcome as the reward at its last token), go through verl's
compute_advantage with adv_estimator=leap, step by step."""
import json
import math
import os
import shutil
import subprocess
from collections import defaultdict

import numpy as np
import pytest
import torch
from conftest import SOURCE

from leap_client.verl_agent import outcome_reward
from verl import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo.ray_trainer import compute_advantage

BUILD = os.environ.get("LEAP_BUILD_DIR", str(SOURCE / "build"))
# A per-turn baseline with three turns: cohorts, lone samples and the step's leave-one-out all occur.
CONFIG = """[run]
name = "parity"
backend = "cpu"
steps = 3
tasks_per_step = 4
seed = 3
[learner]
group_size = 4
max_turns = 3
advantage_baseline = "turn"
[policy]
kind = "schedule"
[sandbox]
deadline_s = 1
[eval]
trials = 2
timing_budget_ms = 20
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("parity")
    (root / "leap.toml").write_text(CONFIG)
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE), LEAP_EVALD=f"{BUILD}/leap-evald", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    mpirun = shutil.which("mpirun")
    r = subprocess.run([mpirun, "-np", "3", f"{BUILD}/leap", "run", "--config", str(root / "leap.toml"), "--run-dir",
                        str(root / "run")], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return root


def rows_of(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def test_the_estimator_equals_the_learner_on_a_runs_outcomes(run, monkeypatch):
    monkeypatch.setenv("LEAP_CONFIG", str(run / "leap.toml"))
    trajectories = defaultdict(dict)  # (step, group) -> rollout -> {turn: outcome}
    for o in rows_of(run / "run" / "outcomes.jsonl"):
        trajectories[(o["step"], o["group"])].setdefault(o["rollout"], {})[o["turn"]] = o
    learner = {(a["step"], a["group"], a["rollout"], a["turn"]): a["advantage"]
               for a in rows_of(run / "run" / "advantages.jsonl")}
    steps = sorted({s for s, _ in trajectories})
    assert len(steps) == 3 and len(learner) == sum(len(t) for g in trajectories.values() for t in g.values())
    refined = compared = 0
    for step in steps:
        rows = []  # (step, group, rollout, turns, reward)
        for (s, g), rollouts in sorted(trajectories.items()):
            if s != step:
                continue
            for i, turns in sorted(rollouts.items()):
                last = turns[max(turns)]
                assert all(turns[t]["status"] != "ok" for t in turns if t < max(turns))  # solved ends a rollout
                reward = outcome_reward(last["status"], last["speedup"], last["status"] == "infra_error")
                rows.append((s, g, i, len(turns), reward))
                refined += len(turns) > 1
        # verl's shape: each turn 3 tokens, a masked feedback turn of 2 between turns.
        width = 3 * 5 + 2 * 2
        mask, scores = torch.zeros(len(rows), width, dtype=torch.long), torch.zeros(len(rows), width)
        for r, (_, _, _, f, reward) in enumerate(rows):
            for t in range(f):
                mask[r, 5 * t: 5 * t + 3] = 1
            scores[r, 5 * (f - 1) + 2] = reward
        data = DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": mask,
                                            "responses": torch.zeros(len(rows), width, dtype=torch.long)},
                                   non_tensors={"uid": np.array([f"{s}-{g}" for s, g, _, _, _ in rows], dtype=object)})
        adv = compute_advantage(data, adv_estimator="leap", config=AlgoConfig()).batch["advantages"]
        for r, (s, g, i, f, _) in enumerate(rows):
            for t in range(f):
                got = float(adv[r, 5 * t])
                want = learner[(s, g, i, t + 1)]
                assert math.isclose(got, want, abs_tol=1e-5), (s, g, i, t + 1, got, want)
                compared += 1
    assert refined > 0 and compared == len(learner)  # refinement turns were among them
    # ... and samples alone at their turn, whose advantage is the step's leave-one-out.
    assert sum(m["lone_samples"] for m in rows_of(run / "run" / "metrics.jsonl")) > 0
