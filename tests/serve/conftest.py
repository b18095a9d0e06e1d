"""A real `leap serve` on loopback for the client's tests (LEAP_BUILD_DIR: the build folder)."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("LEAP_BUILD_DIR", SOURCE / "build"))
sys.path.insert(0, str(SOURCE / "python"))


class Server:
    def __init__(self, *args, env=None):
        self.env = dict(os.environ, LEAP_DATA_DIR=str(SOURCE), **(env or {}))
        self.proc = subprocess.Popen([str(BUILD / "leap"), "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=self.env)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://[0-9.]+:\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"leap serve did not start: {line!r} {self.proc.stderr.read()}")
        self.url = m.group(1)

    def stop(self, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.proc.returncode, out, err


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
