"""Processes on loopback ports, for the benchmarks in scripts/ and the tests that start real
brokers (tests import it as ``scripts.procs``): a free port, waiting until something listens,
stopping a process, its CPU time, RSS and peak RSS, and Mosquitto (the Debian package) as a
peer. One copy for both, so a benchmark starts its peers the way the tests do.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

MOSQUITTO = "/usr/sbin/mosquitto"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(
    port: int, timeout: float = 20.0, process: subprocess.Popen[bytes] | None = None
) -> None:
    """Until something accepts on ``port``; raises at ``timeout`` or when ``process`` (the one
    expected to listen) has exited, with its exit code."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; waits either way (no zombie)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


class Mosquitto:
    """A mosquitto process on ``port``; ``stop()`` and ``start()`` again on the same port.
    ``verbose`` logs every packet to ``mosquitto.log`` (what the tests read); a benchmark turns
    it off, as that logging would be most of the CPU it measures."""

    def __init__(
        self, workdir: Path, extra: str = "", port: int | None = None, verbose: bool = True
    ) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.extra = extra
        self.verbose = verbose
        self.process: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    def start(self) -> Mosquitto:
        conf = self.workdir / "mosquitto.conf"
        # as root Mosquitto drops to user "mosquitto", who cannot read the pytest tmp dirs
        user = "user root\n" if os.geteuid() == 0 else ""
        # a cloud that drops queued messages for a slow subscriber would hide what the bridge did
        anonymous = "false" if "password_file" in self.extra else "true"
        conf.write_text(
            f"{user}max_queued_messages 0\nlistener {self.port} 127.0.0.1\n"
            f"allow_anonymous {anonymous}\n{self.extra}\n"
        )
        log = open(self.workdir / "mosquitto.log", "ab")
        verbose = ["-v"] if self.verbose else []
        self.process = subprocess.Popen(
            [MOSQUITTO, "-c", str(conf), *verbose], stdout=log, stderr=log
        )
        log.close()  # the child has its own descriptor
        wait_port(self.port, process=self.process)
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, timeout=5)
        self.process = None

    def log(self) -> str:
        path = self.workdir / "mosquitto.log"
        return path.read_text(errors="replace") if path.exists() else ""


class PeakRss(threading.Thread):
    """The peak VmRSS of ``pid`` in KiB, sampled every ``interval`` seconds from start() until
    stop() (or over a ``with`` block); ``peak`` holds it."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.peak = rss_kib(pid)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.peak = max(self.peak, rss_kib(self.pid))

    def stop(self) -> int:
        self.done.set()
        self.join(2)
        self.peak = max(self.peak, rss_kib(self.pid))
        return self.peak

    def __enter__(self) -> PeakRss:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
