"""`leap agent` against a scripted model on loopback (a real HTTP server playing a table of
answers: the stand-in for a language model, which cannot run here), real compiles and judges,
a real memory database. LEAP_BUILD_DIR: the build folder."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("LEAP_BUILD_DIR", SOURCE / "build"))
RELU = str(SOURCE / "examples/cpu/relu.cpp")
SOFTMAX = str(SOURCE / "examples/cpu/softmax.cpp")
RELU_WRONG = str(SOURCE / "tests/fixtures/hostile/cpu/relu.wrong_answer.cpp")


class Model:
    """tests/agent/scripted_model.py as a process: its port, and the requests it logged."""

    def __init__(self, tmp, script):
        (tmp / "script.json").write_text(json.dumps(script))
        self.log = tmp / "requests.jsonl"
        self.proc = subprocess.Popen([sys.executable, str(SOURCE / "tests/agent/scripted_model.py"), "--script",
                                      str(tmp / "script.json"), "--log", str(self.log)], stdout=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def requests(self, task=None):
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [r for r in rows if task is None or r["task"] == task]

    def close(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def tmp(tmp_path):
    (tmp_path / "leap.toml").write_text("[sandbox]\ndeadline_s = 4\n[eval]\ntiming_budget_ms = 30\nmin_samples = 5\n")
    return tmp_path


def agent(tmp, model, *args, check=True):
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE), LEAP_CACHE_DIR=str(tmp / "cache"))
    p = subprocess.run([str(BUILD / "leap"), "agent", "--endpoint", model.url if model else "http://127.0.0.1:9",
                        "--model", "scripted", "--config", str(tmp / "leap.toml"), "--out", str(tmp / "run"), *args],
                       capture_output=True, text=True, env=env, timeout=600)
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


def scripted_run(tmp, script, *args):
    """leap agent against a scripted model playing `script`; the model (for its request log) and the result."""
    model = Model(tmp, script)
    try:
        p = agent(tmp, model, *args)
    finally:
        model.close()
    return model, p


def attempts(tmp):
    return [json.loads(line) for line in (tmp / "run/attempts.jsonl").read_text().splitlines()]


def by_task_turn(rows):
    return {(r["task"], r["turn"]): r for r in rows}


def test_refinement_uses_the_memory_and_a_missing_code_block_is_a_compile_error(tmp):
    script = {"relu": [{"file": RELU_WRONG}, {"file": RELU}],
              "softmax": [{"content": "I would rather not write code."}, {"file": SOFTMAX}]}
    model, p = scripted_run(tmp, script, "--tasks", "relu,softmax", "--turns", "2")
    rows = by_task_turn(attempts(tmp))
    assert rows[("relu", 1)]["status"] == "wrong_answer"
    assert rows[("relu", 2)]["status"] == "ok"
    assert rows[("softmax", 1)]["status"] == "compile_error"
    assert "no fenced code block" in rows[("softmax", 1)]["feedback"]
    assert rows[("softmax", 2)]["status"] == "ok"
    assert "2 of 2 tasks solved within 2 turns" in p.stdout
    # Turn 1 remembers no case yet: its context is the target's notes alone (prompt/notes/cpu.md);
    # turn 2's prompt carries the previous attempt, its failure, the lesson.
    first, second = model.requests("relu")
    first_text = first["messages"][0]["content"]
    assert "(case " not in first_text and "## Lessons from failures, notes on the target" in first_text
    assert "runs on one thread on one core" in first_text
    text = second["messages"][0]["content"]
    assert "## Best attempts so far and the previous attempt" in text
    assert "previous attempt (case" in text and "wrong_answer" in text
    assert "## Lessons from failures, notes on the target" in text
    assert rows[("relu", 2)]["context_tokens"] > 0
    assert rows[("relu", 2)]["prompt_tokens"] > rows[("relu", 1)]["prompt_tokens"]
    # The graph: relu's turn-2 case refined its turn-1 case.
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE))
    show = subprocess.run([str(BUILD / "leap"), "memory", "show", "--path", str(tmp / "run/memory.db"), "--task", "relu"],
                          capture_output=True, text=True, env=env)
    assert show.returncode == 0, show.stderr
    assert f"| {rows[('relu', 2)]['case']} | {rows[('relu', 1)]['case']} | 2 | ok |" in show.stdout, show.stdout
    # Each case keeps what its answer said it would do (the text outside its code).
    export = subprocess.run([str(BUILD / "leap"), "memory", "export", "--path", str(tmp / "run/memory.db")],
                            capture_output=True, text=True, env=env)
    cases = {c["id"]: c for c in map(json.loads, export.stdout.splitlines())}
    assert cases[rows[("softmax", 1)]["case"]]["decision"] == "I would rather not write code."
    assert cases[rows[("relu", 2)]["case"]]["predecessor"] == rows[("relu", 1)]["case"]
    assert rows[("relu", 1)]["case"] not in cases[rows[("relu", 2)]["case"]]["retrieved"]  # the predecessor, not retrieved


def test_after_a_regression_the_next_attempt_branches_from_the_incumbent(tmp):
    """The prompt asks to improve the best attempt: after a correct first kernel and a wrong second
    one, the third refines the first (the incumbent), a second branch from it, and records the wrong
    one, which its context showed, as retrieved."""
    scripted_run(tmp, {"relu": [{"file": RELU}, {"file": RELU_WRONG}, {"file": RELU}]}, "--tasks", "relu",
                 "--turns", "3")
    rows = by_task_turn(attempts(tmp))
    assert [rows[("relu", t)]["status"] for t in (1, 2, 3)] == ["ok", "wrong_answer", "ok"]
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE))
    export = subprocess.run([str(BUILD / "leap"), "memory", "export", "--path", str(tmp / "run/memory.db")],
                            capture_output=True, text=True, env=env)
    cases = {c["id"]: c for c in map(json.loads, export.stdout.splitlines())}
    first, second, third = (cases[rows[("relu", t)]["case"]] for t in (1, 2, 3))
    assert second["predecessor"] == first["id"] and third["predecessor"] == first["id"]
    assert second["id"] in third["retrieved"]


def test_endpoint_failures_are_retried_and_then_do_not_count_against_the_task(tmp):
    script = {"relu": [{"http": 429, "retry_after": 0}, {"http": 500}, {"malformed": True}, {"file": RELU}],
              "softmax": [{"sleep": 3, "content": "late"}, {"file": SOFTMAX}],
              "sigmoid": [{"http": 503}]}
    model, p = scripted_run(tmp, script, "--tasks", "relu,softmax,sigmoid", "--turns", "2", "--timeout", "1",
                            "--retries", "3")
    rows = by_task_turn(attempts(tmp))
    assert rows[("relu", 1)]["status"] == "ok" and rows[("relu", 1)]["requests"] == 4
    assert rows[("softmax", 1)]["status"] == "ok" and rows[("softmax", 1)]["requests"] == 2  # the first timed out
    for turn in (1, 2):
        r = rows[("sigmoid", turn)]
        assert r["status"] == "infra_error" and r["requests"] == 4 and r["case"] == 0
        assert "HTTP 503" in r["feedback"]
    assert "| sigmoid | - | 0.000 | 2 | 2 |" in p.stdout
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE))
    stats = subprocess.run([str(BUILD / "leap"), "memory", "stats", "--path", str(tmp / "run/memory.db")],
                           capture_output=True, text=True, env=env)
    assert "4 cases of 2 tasks" in stats.stdout, stats.stdout  # nothing recorded for sigmoid


def test_the_configs_memory_section_sets_the_context(tmp):
    cfg = tmp / "leap.toml"
    cfg.write_text(cfg.read_text() + f'[memory]\ncontext = "passive"\nbudget_tokens = 40\npath = "{tmp / "shared.db"}"\n')
    model, p = scripted_run(tmp, {"relu": [{"file": RELU_WRONG}, {"file": RELU}]}, "--tasks", "relu", "--turns", "2")
    rows = by_task_turn(attempts(tmp))
    assert rows[("relu", 2)]["context"] == "passive"
    assert rows[("relu", 2)]["context_tokens"] == 0  # a source does not fit in 40 tokens
    assert (tmp / "shared.db").exists() and not (tmp / "run/memory.db").exists()
    assert f"memory: {tmp / 'shared.db'}" in p.stdout


@pytest.mark.parametrize("mode,marker", [("passive", "## Earlier attempts, newest first"), ("none", None)])
def test_passive_context_is_the_history_and_none_is_nothing(tmp, mode, marker):
    model, p = scripted_run(tmp, {"relu": [{"file": RELU_WRONG}, {"file": RELU}]}, "--tasks", "relu", "--turns", "2", "--context", mode)
    second = model.requests("relu")[1]["messages"][0]["content"]
    if marker:
        assert marker in second
        assert "// abs, not relu" in second  # the previous attempt's source, in full
    else:
        assert "leap's experience memory" not in second
        assert second == model.requests("relu")[0]["messages"][0]["content"]


def test_bad_endpoint_and_options_are_clear_errors(tmp):
    p = agent(tmp, None, "--tasks", "relu", "--turns", "1", "--retries", "0")  # nothing listens on port 9
    assert by_task_turn(attempts(tmp))[("relu", 1)]["status"] == "infra_error"
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE))
    bad = subprocess.run([str(BUILD / "leap"), "agent", "--endpoint", "https://example.com", "--model", "m",
                          "--tasks", "relu", "--out", str(tmp / "x")], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "not an http:// URL" in bad.stderr + bad.stdout
    bad = subprocess.run([str(BUILD / "leap"), "agent", "--endpoint", "http://127.0.0.1:9", "--model", "m",
                          "--tasks", "no_such_task", "--out", str(tmp / "x")], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "no task 'no_such_task'" in bad.stderr + bad.stdout
    bad = subprocess.run([str(BUILD / "leap"), "agent", "--endpoint", "http://127.0.0.1:9", "--model", "m",
                          "--context", "everything", "--out", str(tmp / "x")], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "active, passive, previous or none" in bad.stderr + bad.stdout


def test_the_built_in_engine_answers_every_task_in_one_batch(tmp):
    # The tiny random Qwen2 fixture (tests/fixtures/lm) stands in for a real model: what it writes
    # is noise, so every answer lacks a code block; the path (chat template, batched generation,
    # its tokenizer counting the budget, the memory) is what runs.
    model_dir = str(SOURCE / "tests/fixtures/lm/tiny-qwen2")
    args = ["--model-dir", model_dir, "--tasks", "relu,softmax", "--turns", "2", "--max-tokens", "12", "--seed", "5"]
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE), LEAP_CACHE_DIR=str(tmp / "cache"))
    runs = []
    for out in ("a", "b"):
        p = subprocess.run([str(BUILD / "leap"), "agent", "--config", str(tmp / "leap.toml"), "--out", str(tmp / out), *args],
                           capture_output=True, text=True, env=env, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        runs.append([json.loads(line) for line in (tmp / out / "attempts.jsonl").read_text().splitlines()])
    a, b = runs
    assert len(a) == 4
    for r in a:
        assert r["status"] == "compile_error" and "no fenced code block" in r["feedback"]
        assert r["model"] == model_dir and r["case"] > 0
    assert [r["prompt_tokens"] for r in a] == [r["prompt_tokens"] for r in b]  # seeded: the same run twice
    second = by_task_turn(a)[("relu", 2)]
    assert second["context_tokens"] > 0 and second["prompt_tokens"] > by_task_turn(a)[("relu", 1)]["prompt_tokens"]
    bad = subprocess.run([str(BUILD / "leap"), "agent", "--model-dir", model_dir, "--endpoint", "http://127.0.0.1:9",
                          "--out", str(tmp / "x")], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "either --endpoint" in bad.stderr + bad.stdout
    # Seed 0 cuts a multi-byte character at 16 tokens: the answer keeps U+FFFD in its place, and the
    # next turn's prompt (which quotes it from the memory) is still text (this used to end the run).
    p = subprocess.run([str(BUILD / "leap"), "agent", "--config", str(tmp / "leap.toml"), "--out", str(tmp / "c"),
                        "--model-dir", model_dir, "--tasks", "relu,silu", "--turns", "2", "--max-tokens", "16"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len((tmp / "c" / "attempts.jsonl").read_text().splitlines()) == 4


def test_an_earlier_runs_folder_is_refused_unless_resumed_or_replaced(tmp):
    model_dir = str(SOURCE / "tests/fixtures/lm/tiny-qwen2")
    env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE), LEAP_CACHE_DIR=str(tmp / "cache"))

    def run(*args):
        return subprocess.run([str(BUILD / "leap"), "agent", "--config", str(tmp / "leap.toml"), "--out", str(tmp / "r"),
                               "--model-dir", model_dir, "--tasks", "relu", "--turns", "1", "--max-tokens", "8", *args],
                              capture_output=True, text=True, env=env, timeout=600)

    def lines():
        return len((tmp / "r" / "attempts.jsonl").read_text().splitlines())

    assert run().returncode == 0 and lines() == 1
    again = run()
    assert again.returncode == 2 and "is not empty" in again.stderr + again.stdout and lines() == 1
    assert run("--resume").returncode == 0 and lines() == 2
    assert run("--force").returncode == 0 and lines() == 1


@pytest.mark.skipif(not shutil.which("mpirun"), reason="no mpirun")
def test_under_mpirun_worker_ranks_judge_and_every_verdict_is_the_same(tmp):
    script = {"relu": [{"file": RELU_WRONG}, {"file": RELU}],
              "softmax": [{"content": "I would rather not write code."}, {"file": SOFTMAX}]}
    _, alone = scripted_run(tmp, script, "--tasks", "relu,softmax", "--turns", "2")
    assert "Judged here." in alone.stdout
    single = by_task_turn(attempts(tmp))
    model = Model(tmp, script)
    try:
        env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE), LEAP_CACHE_DIR=str(tmp / "cache2"),
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        p = subprocess.run(["mpirun", "--oversubscribe", "-np", "3", str(BUILD / "leap"), "agent", "--endpoint", model.url,
                            "--model", "scripted", "--config", str(tmp / "leap.toml"), "--out", str(tmp / "mpi"),
                            "--tasks", "relu,softmax", "--turns", "2"], capture_output=True, text=True, env=env, timeout=600)
    finally:
        model.close()
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Judged on 2 worker rank(s)." in p.stdout, p.stdout
    assert "2 of 2 tasks solved within 2 turns" in p.stdout
    rows = by_task_turn([json.loads(line) for line in (tmp / "mpi/attempts.jsonl").read_text().splitlines()])
    assert {k: r["status"] for k, r in rows.items()} == {k: r["status"] for k, r in single.items()}
    assert "wrong_answer" == rows[("relu", 1)]["status"] and rows[("relu", 2)]["context_tokens"] > 0


def test_the_memory_bench_measures_a_model_that_reads_its_context(tmp):
    """leap bench memory against an endpoint whose answers depend on its prompt (a scripted stand-in
    that fixes its kernel only when the context shows the previous attempt's mismatch): with no
    context it never solves; with the graph off (the previous attempt only), the passive and the
    active context it solves at turn 2."""
    reader = {"relu": [{"when": r"output 'y' mismatch", "then": {"file": RELU}, "else": {"file": RELU_WRONG}}]}
    model = Model(tmp, reader)
    try:
        p = subprocess.run([sys.executable, str(SOURCE / "bench/memory_bench.py"), "--build", str(BUILD),
                            "--endpoint", model.url, "--model", "reads-feedback", "--tasks", "relu", "--turns", "3"],
                           capture_output=True, text=True, timeout=600)
    finally:
        model.close()
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"model reads-feedback at {model.url}" in p.stdout
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in p.stdout.splitlines() if line.startswith(("| none", "| previous", "| passive", "| active"))}
    assert set(rows) == {"none", "previous", "passive", "active"}, p.stdout
    assert rows["none"][5:7] == ["0/1", "-"], p.stdout
    assert rows["previous"][5:7] == ["1/1", "2.00"], p.stdout
    assert rows["passive"][5:7] == ["1/1", "2.00"], p.stdout
    assert rows["active"][5:7] == ["1/1", "2.00"], p.stdout
    assert int(rows["none"][2]) == 0 and int(rows["active"][2]) > 0  # context tokens
    assert rows["none"][7] == "-" and float(rows["active"][7].rstrip("x")) > 0  # the final kernels' speedup
    assert "identical in every mode" not in p.stdout
