"""A real `leap serve` on loopback for the client's tests (LEAP_BUILD_DIR: the build folder)."""
import pathlib
import sys

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE / "python"))
sys.path.insert(0, str(SOURCE / "tests" / "support"))
from serve_process import BUILD, Server  # noqa: E402,F401 (BUILD: for the tests)


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
