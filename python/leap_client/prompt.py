"""A prompt that teaches a model leap's candidate ABI (docs/candidate-abi.md) for one task."""
from __future__ import annotations

from importlib import resources

from .client import TaskInfo


def _tensors(ts) -> str:
    return "".join(f"- `{t['name']}`: {t['dtype']} {t['shape']}" + (" (module parameter)" if t.get("parameter") else "")
                   + "\n" for t in ts)


def build_prompt(task: TaskInfo) -> str:
    """The first user message for `task` (from `Client.task(name)`)."""
    template = resources.files("leap_client").joinpath("prompts/candidate_abi.md").read_text()
    cuda = task.backend == "cuda"
    fields = {"language": "CUDA, compiled with nvcc" if cuda else "C++17, compiled with g++ -O3", "name": task.name,
              "level": str(task.level), "description": task.description, "inputs": _tensors(task.inputs),
              "outputs": _tensors(task.outputs), "torch_code": task.torch_code.strip() or "(none)",
              "fence": "cuda" if cuda else "cpp"}
    for key, value in fields.items():  # not str.format: the template's C++ has braces of its own
        template = template.replace("{" + key + "}", value)
    return template
