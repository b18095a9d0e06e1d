"""OpenRLHF's rewards from leap, in both forms OpenRLHF takes (`--reward.remote_url`):
- a file: `--reward.remote_url /path/to/leap_client/openrlhf.py`; OpenRLHF loads it by path and
  calls `reward_func(queries, prompts, labels)` (the service from LEAP_SERVE_URL, LEAP_SERVE_TOKEN);
- a URL: `python3 -m leap_client.openrlhf --leap URL --port 5000`, then
  `--reward.remote_url http://HOST:5000/reward`: POST {"query", "prompts", "labels"}.
Either answers {"rewards", "scores", "extra_logs"}: `rewards` leap's score (0 for any failure, a
correct kernel 1 + log2 of its speedup, at most 4), `scores` 1/0 correct (OpenRLHF's dynamic
filtering), `extra_logs` with `leap_infra_error` (1: leap failed to judge the item after retries,
its reward is not the policy's; mask it) and `leap_refused` (a label naming no task of leap's).
OpenRLHF's query is the prompt followed by the response: only the response is scored (a prompt's
worked example is not the model's kernel). The whole request is one /v1/batch."""
from __future__ import annotations

import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

try:
    from .client import Client
    from .verl import compute_score_batch
except ImportError:  # loaded by file path (OpenRLHF's --reward.remote_url FILE.py): no parent package
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from leap_client.client import Client
    from leap_client.verl import compute_score_batch


def response_of(query: str, prompt: str) -> str:
    """The response in OpenRLHF's query (prompt + response)."""
    if not prompt:
        return query
    if query.startswith(prompt):
        return query[len(prompt):]
    # Decoding the whole sequence may render the prompt's edge differently: its end locates it.
    tail = prompt.strip()[-200:]
    at = query.rfind(tail) if tail else -1
    return query[at + len(tail):] if at >= 0 else query


def reward_info(client: Client, queries: List[str], labels: List[str], prompts: Optional[List[str]] = None,
                timeout_s: Optional[float] = None) -> Dict[str, Any]:
    """OpenRLHF's reward answer for one request, in the request's order."""
    n = len(queries)
    responses = [response_of(q, prompts[i] if prompts else "") for i, q in enumerate(queries)]
    results = compute_score_batch(["leap"] * n, responses, labels, [{"task": label} for label in labels],
                                  timeout_s=timeout_s, client=client)
    mean = (lambda xs: sum(xs) / len(xs)) if n else (lambda xs: 0.0)
    return {"rewards": [r["score"] for r in results],
            "scores": [1.0 if r["status"] == "ok" else 0.0 for r in results],
            "extra_logs": {"leap_infra_error": mean([float(r["infra_error"]) for r in results]),
                           "leap_refused": mean([float(r["status"] == "refused") for r in results])}}


def reward_func(queries: List[str], prompts: List[str], labels: List[str]) -> Dict[str, Any]:
    """OpenRLHF's custom reward function (`--reward.remote_url` naming this file)."""
    return reward_info(Client.from_env(), list(queries), list(labels), list(prompts) if prompts else None)


def make_server(client: Client, host: str, port: int, timeout_s: Optional[float] = None) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                queries, labels = body["query"], body.get("labels") or [""] * len(body["query"])
                prompts = body.get("prompts") or None
                if len(labels) != len(queries) or (prompts is not None and len(prompts) != len(queries)):
                    raise ValueError("'labels' and 'prompts' must have one entry per query")
                data, code = reward_info(client, queries, labels, prompts, timeout_s), 200
            except (ValueError, KeyError, TypeError) as e:
                data, code = {"error": f"bad request: {e}"}, 400
            payload = json.dumps(data).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):  # quiet
            pass

    return ThreadingHTTPServer((host, port), Handler)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leap", default="http://127.0.0.1:8471", help="leap serve's URL")
    ap.add_argument("--token", default=None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--timeout-s", type=float, default=None, help="judge deadline per request (unjudged: masked)")
    a = ap.parse_args()
    make_server(Client(a.leap, a.token), a.host, a.port, a.timeout_s).serve_forever()


if __name__ == "__main__":
    main()
