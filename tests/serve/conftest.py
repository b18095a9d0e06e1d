"""A real `leap serve` on loopback for the client's tests (LEAP_BUILD_DIR: the build folder)."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("LEAP_BUILD_DIR", SOURCE / "build"))
sys.path.insert(0, str(SOURCE / "python"))


class Server:
    def __init__(self, *args, env=None):
        self.env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE), **(env or {}))
        # The log goes to a file: a pipe nobody reads while the server runs would fill and stall it.
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([str(BUILD / "leap"), "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=self.env)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://[0-9.]+:\d+)", line)
        if not m:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"leap serve did not start: {line!r} {self.read_log()}")
        self.url = m.group(1)

    def read_log(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return self.proc.returncode, out, self.read_log()


@pytest.fixture(scope="session")
def server():
    s = Server("--evaluators", "2")
    yield s
    rc, out, err = s.stop()
    assert rc == 0, err


@pytest.fixture
def make_server():
    started = []

    def make(*args, env=None):
        s = Server(*args, env=env)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def example(name, backend="cpu"):
    return (SOURCE / "examples" / backend / name).read_text()


def hostile(name):
    return (SOURCE / "tests" / "fixtures" / "hostile" / "cpu" / name).read_text(errors="replace")


def expectations(source):
    """The outcomes a hostile fixture's first line allows: [(status, check), ...]."""
    first = source.splitlines()[0].split("leap-expect:")[1]
    out = []
    for alt in first.split("|"):
        words = alt.split()
        out.append((words[0], words[1] if len(words) > 1 else ""))
    return out
