"""A real `leap serve` process on loopback for Python tests (LEAP_BUILD_DIR: the build folder)."""
import os
import pathlib
import re
import signal
import subprocess
import tempfile

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("LEAP_BUILD_DIR", SOURCE / "build"))


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
