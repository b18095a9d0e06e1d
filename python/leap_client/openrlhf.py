"""OpenRLHF's remote reward model (`--remote_rm_url http://HOST:PORT/reward`): POST
{"query": [...], "prompts": [...], "labels": [...]} -> {"rewards": [...]}, each label naming the
leap task of its query. `python3 -m leap_client.openrlhf --leap URL --port 5000`."""
from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List

from .client import Client
from .multiturn import extract_candidate
from .verl import score_of


def rewards(client: Client, queries: List[str], labels: List[str], concurrency: int = 16) -> List[float]:
    items, where = [], []
    for i, (q, label) in enumerate(zip(queries, labels)):
        src = extract_candidate(q)
        if src is not None:
            items.append({"task": label, "source": src})
            where.append(i)
    out = [0.0] * len(queries)
    for i, o in zip(where, client.evaluate_many(items, concurrency=concurrency)):
        out[i] = score_of(o.status, o.speedup)
    return out


def make_server(client: Client, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                queries, labels = body["query"], body.get("labels") or [""] * len(body["query"])
                if len(labels) != len(queries):
                    raise ValueError("'labels' must have one entry per query")
                data, code = {"rewards": rewards(client, queries, labels)}, 200
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
