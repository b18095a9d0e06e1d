"""verl's custom reward function: `custom_reward_function.path` = this file,
`custom_reward_function.name` = `compute_score`; the server from LEAP_SERVE_URL (and
LEAP_SERVE_TOKEN). `ground_truth` (or `extra_info["task"]`) names the leap task."""
from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Optional

try:
    from .client import Client, LeapServeError
    from .multiturn import extract_candidate
except ImportError:  # loaded by file path (verl's custom_reward_function.path): no parent package
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from leap_client.client import Client, LeapServeError
    from leap_client.multiturn import extract_candidate

_client: Optional[Client] = None


def _get_client() -> Client:
    global _client
    if _client is None:
        _client = Client.from_env()
    return _client


def score_of(status: str, speedup: float) -> float:
    """0 for any failure; a correct kernel 1 plus log2 of its speedup when faster (at most 4)."""
    if status != "ok":
        return 0.0
    return 1.0 + min(3.0, max(0.0, math.log2(max(speedup, 1e-9))))


def _unscored(status: str, feedback: str, infra_error: bool = False) -> Dict[str, Any]:
    """A sample leap did not judge, with the keys of every other result (verl gathers them all)."""
    return {"score": 0.0, "status": status, "speedup": 0.0, "feedback": feedback, "infra_error": infra_error}


def _task_of(ground_truth: Any, extra_info: Optional[Dict[str, Any]]) -> str:
    return str((extra_info or {}).get("task") or ground_truth)


_NO_KERNEL = "the answer holds no kernel (no leap_kernel, no class ModelNew)"


def _result(o) -> Dict[str, Any]:
    # An infra_error is leap's fault: flagged, so the trainer can mask the sample, never a penalty.
    return {"score": score_of(o.status, o.speedup), "status": o.status, "speedup": o.speedup,
            "feedback": o.feedback_text, "infra_error": not o.counts}


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Optional[Dict[str, Any]] = None,
                  infra_retries: int = 2) -> Dict[str, Any]:
    task = _task_of(ground_truth, extra_info)
    source = extract_candidate(solution_str)
    if source is None:
        return _unscored("no_candidate", _NO_KERNEL)
    for _ in range(infra_retries + 1):
        try:
            o = _get_client().evaluate(task, source)
        except LeapServeError as e:  # refused (an unknown task): this sample's result, not the batch's end
            return _unscored("refused", str(e))
        if o.counts:
            break
    return _result(o)


def compute_score_batch(data_sources: List[str], solution_strs: List[str], ground_truths: List[Any],
                        extra_infos: Optional[List[Optional[Dict[str, Any]]]] = None, infra_retries: int = 2,
                        timeout_s: Optional[float] = None, client: Optional[Client] = None,
                        **kwargs: Any) -> List[Dict[str, Any]]:
    """verl's batch reward manager (`reward_model.reward_manager=batch`): the whole batch in one
    /v1/batch request; results in the batch's order, each with compute_score's keys. A sample naming
    a task the service lacks is `refused` (score 0) without failing the others; samples leap failed
    (infra_error) are sent again, `infra_retries` times at most; with `timeout_s` (the trainer's
    deadline per request, e.g. from `reward_kwargs`), samples not judged by then are `timed_out`
    and masked like an infra_error. `client`: the service (default: LEAP_SERVE_URL)."""
    client = client or _get_client()
    n = len(solution_strs)
    extra_infos = list(extra_infos) if extra_infos is not None else [None] * n
    results: List[Optional[Dict[str, Any]]] = [None] * n
    pending = []  # (sample, task, source)
    for i in range(n):
        source = extract_candidate(solution_strs[i])
        if source is None:
            results[i] = _unscored("no_candidate", _NO_KERNEL)
        else:
            pending.append((i, _task_of(ground_truths[i], extra_infos[i]), source))
    for attempt in range(infra_retries + 1):
        if not pending:
            break
        got = {o.record.get("index"): o for o in
               client.batch([{"task": t, "source": s} for _, t, s in pending], timeout_s=timeout_s)}
        again = []
        for j, (i, t, s) in enumerate(pending):
            o = got.get(j)
            if o is None:  # the stream ended early: ask again
                again.append((i, t, s))
            elif o.status == "refused":
                results[i] = _unscored("refused", o.feedback_text)
            elif o.status == "timed_out":
                results[i] = _unscored("timed_out", o.feedback_text, infra_error=True)
            else:
                results[i] = _result(o)
                if not o.counts and attempt < infra_retries:
                    again.append((i, t, s))
        pending = again
    for i, _, _ in pending:  # never answered: leap's failure, masked
        results[i] = _unscored("infra_error", "leap serve returned no result for this sample", infra_error=True)
    return results  # type: ignore[return-value]
