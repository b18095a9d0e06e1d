"""HTTP client of `leap serve` with typed results and backoff on 429/503."""
from __future__ import annotations

import json
import os
import random
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence

import requests


class LeapServeError(RuntimeError):
    """A request the server refused (4xx/5xx other than a retried 429/503)."""

    def __init__(self, status: int, message: str, field_name: Optional[str] = None):
        super().__init__(f"HTTP {status}: {message}" + (f" (field {field_name})" if field_name else ""))
        self.status = status
        self.message = message
        self.field = field_name


@dataclass
class Outcome:
    """One evaluation: the judge's verdict, timings and the feedback for the next turn."""

    id: str
    task: str
    candidate: str
    # ok, compile_error, wrong_answer, runtime_error, timeout, cheat_detected, infra_error; in a batch
    # also refused (e.g. a task the server lacks) and timed_out (not judged within its timeout_s)
    status: str
    check: str
    feedback: str
    feedback_text: str
    speedup: float
    candidate_us: float
    reference_us: float
    cached: bool
    record: Dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def counts(self) -> bool:
        """False for infra_error and timed_out: leap's own fault or not judged yet, never the policy's
        (no reward either way)."""
        return self.status not in ("infra_error", "timed_out")

    @classmethod
    def from_record(cls, r: Dict[str, Any]) -> "Outcome":
        if r.get("state") in ("refused", "timed_out"):  # a batch's line for an item not judged
            return cls(id=r.get("id", ""), task="", candidate="", status=r["state"], check="", feedback=r.get("error", ""),
                       feedback_text=r.get("error", ""), speedup=0.0, candidate_us=0.0, reference_us=0.0, cached=False,
                       record=r)
        return cls(id=r.get("id", ""), task=r.get("task", ""), candidate=r.get("candidate", ""),
                   status=r.get("status", "infra_error"), check=r.get("check", ""), feedback=r.get("feedback", ""),
                   feedback_text=r.get("feedback_text", ""), speedup=float(r.get("speedup", 0.0)),
                   candidate_us=float(r.get("candidate_timing", {}).get("median_us", 0.0)),
                   reference_us=float(r.get("reference_timing", {}).get("median_us", 0.0)),
                   cached=bool(r.get("cached", False)), record=r)


@dataclass
class TaskInfo:
    name: str
    level: int
    description: str
    torch_code: str = ""
    inputs: List[Dict[str, Any]] = field(default_factory=list)
    outputs: List[Dict[str, Any]] = field(default_factory=list)
    backend: str = ""


class Client:
    """`Client("http://127.0.0.1:8471")`; `token` for a server that requires one."""

    @classmethod
    def from_env(cls) -> "Client":
        """The service the trainer adapters use: LEAP_SERVE_URL (default loopback) and LEAP_SERVE_TOKEN."""
        return cls(os.environ.get("LEAP_SERVE_URL", "http://127.0.0.1:8471"), os.environ.get("LEAP_SERVE_TOKEN"))

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 600.0, max_retries: int = 60,
                 backoff_cap_s: float = 5.0):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_cap_s = backoff_cap_s
        self.retries_429 = 0  # how often the server asked us to come back (for tests and dashboards)
        self.connection_retries = 5  # broken connections retried per request
        self._session = requests.Session()
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"

    # -- plumbing
    def _request(self, method: str, path: str, **kw) -> requests.Response:
        """One request, retried on 429/503 and on broken connections. A POST is retried after a
        broken connection only with an Idempotency-Key (the server may have taken it already)."""
        timeout = kw.pop("timeout", self.timeout)
        retry_broken = method == "GET" or "Idempotency-Key" in kw.get("headers", {})
        broken = 0
        for attempt in range(self.max_retries + 1):
            try:
                r = self._session.request(method, self.base_url + path, timeout=timeout, **kw)
            except requests.ConnectionError:
                # A keep-alive connection the server closed as we sent on it (or a server restart).
                broken += 1
                if not retry_broken or broken > self.connection_retries:
                    raise
                time.sleep(min(self.backoff_cap_s, 0.05 * 2 ** broken) * random.uniform(0.5, 1.5))
                continue
            if r.status_code not in (429, 503) or attempt == self.max_retries:
                return r
            self.retries_429 += r.status_code == 429
            wait = float(r.headers.get("Retry-After", "1"))
            # Jitter so that many clients refused together do not come back together.
            time.sleep(min(self.backoff_cap_s, wait * (1 + attempt / 4)) * random.uniform(0.5, 1.5))
        raise AssertionError("unreachable")

    @staticmethod
    def _key() -> Dict[str, str]:
        return {"Idempotency-Key": uuid.uuid4().hex}

    @staticmethod
    def _raise(r: requests.Response) -> None:
        try:
            body = r.json()
        except ValueError:
            body = {"error": r.text}
        raise LeapServeError(r.status_code, body.get("error", r.text), body.get("field"))

    # -- API
    def health(self) -> Dict[str, Any]:
        r = self._request("GET", "/health")
        if r.status_code != 200:
            self._raise(r)
        return r.json()

    def tasks(self) -> List[TaskInfo]:
        r = self._request("GET", "/v1/tasks")
        if r.status_code != 200:
            self._raise(r)
        return [TaskInfo(name=t["name"], level=t["level"], description=t["description"]) for t in r.json()["tasks"]]

    def task(self, name: str) -> TaskInfo:
        r = self._request("GET", f"/v1/tasks/{name}")
        if r.status_code != 200:
            self._raise(r)
        t = r.json()
        return TaskInfo(name=t["name"], level=t["level"], description=t["description"], torch_code=t["torch_code"],
                        inputs=t["inputs"], outputs=t["outputs"], backend=t["backend"])

    def evaluate(self, task: str, source: str, name: Optional[str] = None, settings: Optional[Dict[str, Any]] = None,
                 wait_s: float = 300.0, format: Optional[str] = None) -> Outcome:
        """Evaluates one candidate and waits for its outcome (POST /v1/eval, then polling if it takes longer).
        `format`: "leap" (a C++/CUDA source exporting leap_kernel) or "kernelbench" (a Python module defining
        ModelNew); left out, the server tells them apart by the source."""
        body: Dict[str, Any] = {"task": task, "source": source, "timeout_s": wait_s}
        if name:
            body["name"] = name
        if format:
            body["format"] = format
        if settings:
            body["settings"] = settings
        r = self._request("POST", "/v1/eval", json=body, timeout=wait_s + 30, headers=self._key())
        if r.status_code == 200:
            return Outcome.from_record(r.json())
        if r.status_code == 504:  # still running: the id is in the reply
            return self.result(r.json()["id"], wait_s=self.timeout)
        self._raise(r)
        raise AssertionError("unreachable")

    def submit(self, task: str, source: str, name: Optional[str] = None,
               settings: Optional[Dict[str, Any]] = None, format: Optional[str] = None) -> str:
        """Queues one candidate (POST /v1/evaluate) and returns its id (`format` as in evaluate)."""
        body: Dict[str, Any] = {"task": task, "source": source}
        if name:
            body["name"] = name
        if format:
            body["format"] = format
        if settings:
            body["settings"] = settings
        r = self._request("POST", "/v1/evaluate", json=body, headers=self._key())
        if r.status_code != 202:
            self._raise(r)
        return r.json()["id"]

    def status(self, id: str) -> Dict[str, Any]:
        r = self._request("GET", f"/v1/status/{id}")
        if r.status_code != 200:
            self._raise(r)
        return r.json()

    def result(self, id: str, wait_s: float = 600.0, poll_s: float = 0.05) -> Outcome:
        """Polls /v1/results/{id} until the outcome exists (or `wait_s` passed: TimeoutError)."""
        deadline = time.monotonic() + wait_s
        delay = poll_s
        while True:
            r = self._request("GET", f"/v1/results/{id}")
            if r.status_code == 200:
                return Outcome.from_record(r.json())
            if r.status_code != 202:
                self._raise(r)
            if time.monotonic() > deadline:
                raise TimeoutError(f"evaluation {id} not finished after {wait_s} s")
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def evaluate_many(self, items: Sequence[Dict[str, Any]], concurrency: int = 16) -> List[Outcome]:
        """Evaluates many candidates ({task, source[, name, settings]}) concurrently; outcomes in input order.
        Requests refused with 429 are retried after the server's Retry-After, with jitter."""
        def one(item: Dict[str, Any]) -> Outcome:
            return self.result(self.submit(item["task"], item["source"], item.get("name"), item.get("settings"),
                                           item.get("format")))

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            return list(pool.map(one, items))

    def batch(self, items: Sequence[Dict[str, Any]], settings: Optional[Dict[str, Any]] = None,
              timeout_s: Optional[float] = None) -> Iterable[Outcome]:
        """POST /v1/batch: yields outcomes as they finish (each carries `record['index']`). An item the
        server refuses (a task it lacks) is an Outcome with status `refused`; with `timeout_s`, items
        not judged by then come back as `timed_out` (their ids in `record['id']`)."""
        body: Dict[str, Any] = {"candidates": list(items)}
        if settings:
            body["settings"] = settings
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        with self._session.post(self.base_url + "/v1/batch", json=body, stream=True,
                                timeout=self.timeout if timeout_s is None else timeout_s + 60) as r:
            if r.status_code != 200:
                self._raise(r)
            for line in r.iter_lines():
                if line:
                    yield Outcome.from_record(json.loads(line))

    # -- LEAP's DCP across a trainer's group (GET/POST /v1/groups/...)
    def group(self, group: str) -> Dict[str, Any]:
        """The DCP state of a group: `decision` pending, refine or stop; `difficulty` once decided."""
        r = self._request("GET", f"/v1/groups/{group}")
        if r.status_code != 200:
            self._raise(r)
        return r.json()

    def dcp_decision(self, group: str, group_size: int, correct: bool, infra_error: bool = False,
                     deadline_s: float = 300.0, poll_s: float = 0.1) -> Dict[str, Any]:
        """Reports one rollout's turn-1 verdict to its group (all G rollouts of a prompt share
        `group`) and waits for the group's DCP decision: made when all G reported, or `deadline_s`
        after the first report with the missing ones voided. Returns the group's state."""
        body = {"group_size": group_size, "correct": correct, "infra_error": infra_error, "deadline_s": deadline_s}
        r = self._request("POST", f"/v1/groups/{group}/turn1", json=body)
        if r.status_code != 200:
            self._raise(r)
        state = r.json()
        give_up = time.monotonic() + deadline_s + 60
        while state["decision"] == "pending":
            if time.monotonic() > give_up:
                raise TimeoutError(f"group {group} undecided {deadline_s} s after its deadline")
            time.sleep(min(poll_s, max(0.01, state.get("deadline_s", poll_s))))
            state = self.group(group)
        return state
