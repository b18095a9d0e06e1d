"""Multi-turn rollouts: the candidate in a model's answer, and the outcome as the next user message."""
from __future__ import annotations

import re
from typing import Optional

from .client import Outcome

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9+_-]*)[^\n]*\n(.*?)```", re.DOTALL)
_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.M)  # a KernelBench-format answer


def extract_candidate(answer: str) -> Optional[str]:
    """The candidate source in a model's answer: the last fenced code block that defines
    `leap_kernel` or, in KernelBench's format, `class ModelNew` (the service tells the two apart);
    else the last C/C++/CUDA block, else the whole answer if it defines either."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(answer)]
    for lang, body in reversed(blocks):
        if "leap_kernel" in body or _MODEL_NEW.search(body):
            return body
    for lang, body in reversed(blocks):
        if lang in ("c", "cpp", "c++", "cc", "cu", "cuda"):
            return body
    return answer if "leap_kernel" in answer or _MODEL_NEW.search(answer) else None


def next_user_text(feedback_text: str, turn: int, max_turns: int) -> str:
    """The next turn's user message from the judge's feedback: it and what to do with it."""
    left = max_turns - turn
    tail = f"\n\nYou have {left} more attempt{'s' if left != 1 else ''}. Reply with the complete kernel in one code block."
    return feedback_text + (tail if left > 0 else "")


def next_user_message(outcome: Outcome, turn: int, max_turns: int) -> str:
    """The next turn's user message: the judge's feedback and what to do with it."""
    return next_user_text(outcome.feedback_text, turn, max_turns)
