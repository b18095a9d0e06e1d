"""verl and OpenRLHF (deploy/trainer-env.sh's .venv-trainers) calling leap's adapters through their
own loaders, against a real `leap serve` on loopback. The language model is the one thing that
cannot run here: a scripted stand-in returns fixed answers (a table per rollout), tokenized by a
real byte-level BPE tokenizer trained on the examples with a chat template."""
import pathlib
import sys

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE / "tests" / "support"))
from serve_process import Server  # noqa: E402

# The leap settings both sides read: `leap serve --config` (DCP) and the estimator (LEAP_CONFIG).
LEARNER = """[learner]
max_turns = 3
advantage_baseline = "turn"
"""


def example(name):
    return (SOURCE / "examples" / "cpu" / name).read_text()


def hostile(name):
    return (SOURCE / "tests" / "fixtures" / "hostile" / "cpu" / name).read_text(errors="replace")


def fenced(source):
    return "Here is the kernel.\n```cpp\n" + source + "```\n"


@pytest.fixture(scope="session")
def leap_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("leap") / "leap.toml"
    path.write_text(LEARNER)
    return path


@pytest.fixture(scope="session")
def server(leap_config):
    s = Server("--evaluators", "2", "--config", str(leap_config))
    yield s
    rc, _, err = s.stop()
    assert rc == 0, err


@pytest.fixture(scope="session")
def tokenizer():
    """A real Hugging Face fast tokenizer (byte-level BPE) with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [p.read_text() for p in sorted((SOURCE / "examples" / "cpu").glob("*.cpp"))]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=2000, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return fast
