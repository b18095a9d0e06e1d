"""docs/serve.md's trainer recipes work as written: its verl config fragments merge into verl's own
default configuration and resolve to leap's reward function, agent loop and estimator; its leap
serve configuration is what the group register decides with; its OpenRLHF command serves rewards."""
import pathlib
import re
import socket
import subprocess
import sys
import time

import pytest
import requests
from conftest import SOURCE, example, fenced
from omegaconf import OmegaConf

import verl

DOC = (SOURCE / "docs" / "serve.md").read_text()


def blocks(lang):
    return [b.replace("<leap>", str(SOURCE)) for b in re.findall(rf"```{lang}\n(.*?)```", DOC, re.S)]


def verl_defaults():
    """verl's own trainer configuration, as its main() composes it; struct: a key verl does not
    have is an error, as on verl's command line."""
    base = OmegaConf.load(pathlib.Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    OmegaConf.set_struct(base, True)
    return base


def test_the_verl_fragments_merge_into_verls_config_and_resolve_to_leap():
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.config import omega_conf_to_dataclass

    fragments = blocks("yaml")
    assert len(fragments) == 2
    for text in fragments:
        merged = OmegaConf.merge(verl_defaults(), OmegaConf.create(text))
        if "custom_reward_function" in text:
            assert get_custom_reward_fn(merged) is not None  # verl loads the file the doc names
        else:
            assert get_adv_estimator_fn(merged.algorithm.adv_estimator).__module__ == "leap_client.verl_agent"
            assert merged.actor_rollout_ref.rollout.agent.default_agent_loop in _agent_loop_registry
            algo = omega_conf_to_dataclass(merged.algorithm)
            assert algo.use_kl_in_reward is False


def test_the_recipes_leap_serve_decides_with_its_config(tmp_path):
    sys.path.insert(0, str(SOURCE / "tests" / "support"))
    from serve_process import Server
    (line,) = [l for b in blocks("sh") for l in b.splitlines() if "leap serve" in l and "verl-leap" in l]
    config = re.search(r"--config (\S+)", line).group(1)
    s = Server("--config", str(SOURCE / config), "--evaluators", "1")  # the doc's, on the CPU backend
    try:
        state = requests.post(f"{s.url}/v1/groups/doc/turn1", json={"group_size": 2, "correct": False}).json()
        assert state["max_turns"] == 3
    finally:
        s.stop()


def test_the_openrlhf_command_serves_rewards(server):
    (cmd,) = [l for l in DOC.replace("\n", " ").split("`") if l.startswith("python3 -m leap_client.openrlhf")]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = cmd.split()[1:]
    args[args.index("--leap") + 1] = server.url
    args[args.index("--port") + 1] = str(port)
    proc = subprocess.Popen([sys.executable, *args], cwd=SOURCE / "python")
    try:
        for _ in range(600):
            try:
                r = requests.post(f"http://127.0.0.1:{port}/reward", timeout=120,
                                  json={"query": [fenced(example("relu.cpp"))], "prompts": [""], "labels": ["relu"]})
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        assert r.json()["rewards"][0] >= 1.0 and r.json()["scores"] == [1.0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
