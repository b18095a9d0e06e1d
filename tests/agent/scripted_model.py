#!/usr/bin/env python3
"""A deterministic stand-in for a chat model behind an OpenAI-compatible endpoint (tests only).

It answers POST /v1/chat/completions from a script: for each task (found in the prompt as
"Task `NAME`") a list of steps consumed in order, one per request:
  {"content": TEXT}                   a normal answer
  {"file": PATH}                      an answer of one ```cpp block holding the file's text
  {"http": 429, "retry_after": S}     a refusal (the step is consumed; the next request gets the next step)
  {"http": 500}                       a server error
  {"malformed": true}                 a 200 whose body is not a chat completion
  {"sleep": S, ...}                   waits S seconds first (a timeout), then acts on the rest
  {"when": REGEX, "then": STEP, "else": STEP}
                                      reads its prompt: THEN if REGEX occurs in the messages, else ELSE
When a task's steps run out, its last step repeats. Every request body is appended to --log
(JSON lines: {"task", "step", "messages"}). The port is printed on stdout once listening.

  scripted_model.py --script SCRIPT.json --log LOG.jsonl [--port 0]
"""
import argparse
import http.server
import json
import re
import threading
import time

TASK_RE = re.compile(r"Task `([^`]+)`")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    script = json.load(open(a.script))
    position = {}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def reply(self, code, body, headers=()):
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            if not self.path.endswith("/chat/completions"):
                return self.reply(404, json.dumps({"error": "unknown path " + self.path}))
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            text = "\n".join(m.get("content", "") for m in req.get("messages", []))
            m = TASK_RE.search(text)
            task = m.group(1) if m else ""
            steps = script.get(task) or script.get("*") or [{"content": "no script for this task"}]
            with lock:
                i = position.get(task, 0)
                position[task] = i + 1
                with open(a.log, "a") as log:
                    log.write(json.dumps({"task": task, "step": i, "messages": req.get("messages", []),
                                          "model": req.get("model")}) + "\n")
            step = steps[min(i, len(steps) - 1)]
            while "when" in step:
                step = step["then"] if re.search(step["when"], text) else step["else"]
            if "sleep" in step:
                time.sleep(step["sleep"])
            if "http" in step:
                headers = [("Retry-After", str(step["retry_after"]))] if "retry_after" in step else []
                return self.reply(step["http"], json.dumps({"error": "scripted"}), headers)
            if step.get("malformed"):
                return self.reply(200, '{"choices": [{"message": {}}]')
            content = step.get("content", "")
            if "file" in step:
                content = "Here is the kernel.\n\n```cpp\n" + open(step["file"]).read() + "```\n"
            self.reply(200, json.dumps({"id": "scripted", "object": "chat.completion", "model": req.get("model"),
                                        "choices": [{"index": 0, "finish_reason": "stop",
                                                     "message": {"role": "assistant", "content": content}}]}))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
