"""LEAP's per-turn advantages from the learner's own code (libleap_credit, learner/credit_c.cpp):
the rank reward, the per-turn baseline and the step's leave-one-out exactly as `leap run`
computes them, for trainers written in Python. The library is found through LEAP_CREDIT_LIB,
else LEAP_BUILD_DIR/learner, else the build folder of the checkout this package sits in."""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

_LIB_NAME = "libleap_credit.so"
_lib: Optional[ctypes.CDLL] = None


@dataclass(frozen=True)
class Turn:
    """One turn's outcome: solved, its speedup, and whether leap (not the policy) failed it."""
    correct: bool
    speedup: float = 0.0
    infra: bool = False


def _library_path() -> Path:
    if os.environ.get("LEAP_CREDIT_LIB"):
        return Path(os.environ["LEAP_CREDIT_LIB"])
    roots = [Path(os.environ["LEAP_BUILD_DIR"])] if os.environ.get("LEAP_BUILD_DIR") else []
    roots.append(Path(__file__).resolve().parents[2] / "build")
    for root in roots:
        if (root / "learner" / _LIB_NAME).is_file():
            return root / "learner" / _LIB_NAME
    raise FileNotFoundError(f"{_LIB_NAME} not found (set LEAP_CREDIT_LIB, or LEAP_BUILD_DIR to leap's build folder)")


def _load() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(str(_library_path()))
        lib.leap_step_advantages.restype = ctypes.c_int
        lib.leap_step_advantages.argtypes = [
            ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_ubyte), ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_ubyte),
            ctypes.POINTER(ctypes.c_double), ctypes.c_char_p, ctypes.c_size_t]
        _lib = lib
    return _lib


def step_advantages(step: Sequence[Sequence[Sequence[Turn]]], learner_toml: str = "") -> List[List[List[float]]]:
    """Advantages [group][rollout][turn] of a step's groups (each rollout: its turns in order).
    `learner_toml`: a leap configuration's text whose [learner] table sets the reward ("" = leap's
    defaults). Raises ValueError with leap's message for settings or outcomes it refuses."""
    sizes = [len(g) for g in step]
    turns = [len(r) for g in step for r in g]
    flat = [t for g in step for r in g for t in r]
    n = len(flat)
    out = (ctypes.c_double * max(n, 1))()
    err = ctypes.create_string_buffer(1024)
    rc = _load().leap_step_advantages(
        learner_toml.encode(), len(sizes), (ctypes.c_int * max(len(sizes), 1))(*sizes),
        (ctypes.c_int * max(len(turns), 1))(*turns), (ctypes.c_ubyte * max(n, 1))(*[int(t.correct) for t in flat]),
        (ctypes.c_double * max(n, 1))(*[float(t.speedup) for t in flat]),
        (ctypes.c_ubyte * max(n, 1))(*[int(t.infra) for t in flat]), out, err, len(err))
    if rc != 0:
        raise ValueError(err.value.decode(errors="replace"))
    result, k = [], 0
    for g in step:
        rows = []
        for r in g:
            rows.append([out[k + t] for t in range(len(r))])
            k += len(r)
        result.append(rows)
    return result
