"""OpenRLHF's remote reward model (`--remote_rm_url http://HOST:PORT/reward`): POST
{"query": [...], "prompts": [...], "labels": [...]} -> {"rewards": [...]}, each label naming the
leap task of its query. OpenRLHF's query is the prompt followed by the response: only the
response is scored (a prompt's worked example is not the model's kernel). An item leap refuses
(an unknown task) gets 0 without failing the others. `python3 -m leap_client.openrlhf --leap URL
--port 5000`."""
from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List

from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from .client import Client, LeapServeError
from .multiturn import extract_candidate
from .verl import score_of


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


def rewards(client: Client, queries: List[str], labels: List[str], concurrency: int = 16,
            prompts: Optional[List[str]] = None) -> List[float]:
    items, where = [], []
    for i, (q, label) in enumerate(zip(queries, labels)):
        src = extract_candidate(response_of(q, prompts[i] if prompts else ""))
        if src is not None:
            items.append({"task": label, "source": src})
            where.append(i)

    def score(item) -> float:
        try:
            o = client.evaluate_many([item], concurrency=1)[0]
        except LeapServeError:  # refused (an unknown task): this item's reward only
            return 0.0
        return score_of(o.status, o.speedup)

    out = [0.0] * len(queries)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for i, r in zip(where, pool.map(score, items)):
            out[i] = r
    return out


def make_server(client: Client, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                queries, labels = body["query"], body.get("labels") or [""] * len(body["query"])
                prompts = body.get("prompts") or None
                if len(labels) != len(queries) or (prompts is not None and len(prompts) != len(queries)):
                    raise ValueError("'labels' and 'prompts' must have one entry per query")
                data, code = {"rewards": rewards(client, queries, labels, prompts=prompts)}, 200
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
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--leap", default="http://127.0.0.1:8471", help="leap serve's URL")
    ap.add_argument("--token", default=None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5000)
    a = ap.parse_args()
    make_server(Client(a.leap, a.token), a.host, a.port).serve_forever()


if __name__ == "__main__":
    main()
