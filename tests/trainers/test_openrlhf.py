"""leap's OpenRLHF rewards called by OpenRLHF 0.11's own executor (openrlhf.utils.agent's
SingleTurnAgentExecutor): the reward file loaded by path, and the HTTP reward server, each with
queries built as OpenRLHF builds them (prompt + response, decoded with special tokens)."""
import asyncio
import threading
from types import SimpleNamespace

import pytest
from conftest import SOURCE, example, fenced, hostile
from openrlhf.utils.agent import SingleTurnAgentExecutor

REWARD_FILE = SOURCE / "python" / "leap_client" / "openrlhf.py"


class ScriptedEngine:
    """Stands in for OpenRLHF's vLLM engine: answers with a fixed text."""

    def __init__(self, tokenizer, answer):
        self.tokenizer, self.answer = tokenizer, answer

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        ids = self.tokenizer.encode(self.answer) + [self.tokenizer.eos_token_id]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, finish_reason="stop", logprobs=None)])


def execute(executor, tokenizer, user, answer, label):
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": user}], add_generation_prompt=True,
                                           tokenize=False)
    params = SimpleNamespace(max_tokens=4096, logprobs=None)
    return asyncio.run(executor.execute(prompt, label, params, 16384, tokenizer, ScriptedEngine(tokenizer, answer)))


# A prompt holding a correct relu: OpenRLHF's query holds it, and it is not the model's answer.
PROMPT = "Write relu for leap. A worked example of the format:\n```cpp\n" + example("relu.cpp") + "```"
ANSWERS = [("Sorry, I cannot write this kernel.", "relu"), (fenced(example("relu.cpp")), "relu"),
           (fenced(hostile("relu.wrong_answer.cpp")), "relu"), (fenced(example("relu.cpp")), "no_such_task")]


def check(outputs):
    rewards = [o["reward"] for o in outputs]
    assert rewards[0] == [0.0] and rewards[1][0] >= 1.0 and rewards[2] == [0.0] and rewards[3] == [0.0], rewards
    assert [o["scores"] for o in outputs] == [[0.0], [1.0], [0.0], [0.0]]
    assert [o["extra_logs"]["leap_refused"] for o in outputs] == [0.0, 0.0, 0.0, 1.0]
    assert all(o["extra_logs"]["leap_infra_error"] == 0.0 for o in outputs)


def test_the_reward_file_loaded_by_openrlhfs_executor(server, tokenizer, monkeypatch):
    monkeypatch.setenv("LEAP_SERVE_URL", server.url)
    executor = SingleTurnAgentExecutor(remote_rm_url=str(REWARD_FILE))
    assert executor.reward_func is not None and executor.reward_func.__module__ == "reward_func"
    check([execute(executor, tokenizer, PROMPT, answer, label) for answer, label in ANSWERS])


def test_the_reward_server_through_openrlhfs_http_client(server, tokenizer):
    from leap_client.client import Client
    from leap_client.openrlhf import make_server

    shim = make_server(Client(server.url), "127.0.0.1", 0)
    threading.Thread(target=shim.serve_forever, daemon=True).start()
    try:
        executor = SingleTurnAgentExecutor(remote_rm_url=f"http://127.0.0.1:{shim.server_address[1]}/reward")
        check([execute(executor, tokenizer, PROMPT, answer, label) for answer, label in ANSWERS])
    finally:
        shim.shutdown()


@pytest.mark.parametrize("body", [{"query": ["x"], "labels": ["relu", "gelu"]}, {"labels": ["relu"]}])
def test_a_malformed_request_is_a_400_naming_it(server, body):
    import requests
    from leap_client.client import Client
    from leap_client.openrlhf import make_server

    shim = make_server(Client(server.url), "127.0.0.1", 0)
    threading.Thread(target=shim.serve_forever, daemon=True).start()
    try:
        r = requests.post(f"http://127.0.0.1:{shim.server_address[1]}/reward", json=body, timeout=60)
        assert r.status_code == 400 and "bad request" in r.json()["error"]
    finally:
        shim.shutdown()
