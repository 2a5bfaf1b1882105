"""Shared fixtures: the REAL broker (``python -m edge_broker run --config <tmp toml>``) as a
subprocess on free ports.

Usage from any test module::

    def test_x(broker_factory):
        b = broker_factory({"broker": {"maximum_qos": 1}})   # dict, TOML text, or None
        paho_client.connect(b.host, b.port)
        ...
        assert b.stop() == 0                                  # SIGTERM, exit code

    def test_y(module_broker): ...   # one default broker shared by the module (fast)
    def test_z(broker): ...          # a fresh default broker for this test

``config`` as a dict is written as TOML; ``listeners`` given in it replace the default single
TCP listener. Every listener whose ``port`` is omitted gets port 0 and the real port is read
from the broker's log (``RunningBroker.ports[name]``). ``RunningBroker.log()`` returns what the
broker logged (JSON lines when ``log_format="json"``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
LISTEN_RE = re.compile(r"listener (\S+) \((\w+)\) listening on (\S+):(\d+)")

DEFAULT_SYS_INTERVAL = 2

# pyproject's global ``timeout`` (300 s) bounds every CI test; a soak test runs for as long as it
# is asked to (``-m soak``), so it gets an hour unless it names its own ``timeout`` mark.
SOAK_TIMEOUT = 3600


# Session-scoped fixtures too costly to build on every xdist worker: every test using one runs on
# the same worker (one Spark JVM for the whole run instead of one per worker).
SHARED_ON_ONE_WORKER = ("spark",)


def xdist_group_of(item: pytest.Item) -> str | None:
    """The xdist group ``item`` joins (``scripts/test`` runs pytest with ``--dist loadgroup``):
    the name of a fixture of SHARED_ON_ONE_WORKER it uses, else its module's path when it uses a
    module-scoped fixture (a broker, a gateway's state directory: built once, not once per
    worker), else None (any worker). A test that names its own group keeps it. xdist hands out
    the largest groups first, so a long group never starts at the end of the run."""
    if item.get_closest_marker("xdist_group"):
        return None
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in SHARED_ON_ONE_WORKER:
        if name in info.names_closure:
            return name
    for name in info.names_closure:
        definitions = info.name2fixturedefs.get(name)
        if definitions and definitions[-1].scope == "module":
            return item.nodeid.split("::")[0]
    return None


# In CI (``CI`` set, as CI services do) a hypothesis property runs a third of the examples it asks
# for, never fewer than CI_MIN_EXAMPLES (nor more than it asks); a run without ``CI`` and every
# soak test (``-m soak``) keep the full count.
CI_EXAMPLES_DIVISOR = 3
CI_MIN_EXAMPLES = 25


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def ci_examples(asked: int) -> int:
    return min(asked, max(CI_MIN_EXAMPLES, asked // CI_EXAMPLES_DIVISOR))


def fewer_examples_in_ci(item: pytest.Item) -> None:
    """Scale the max_examples of ``item``'s hypothesis settings (see ci_examples)."""
    test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if current is None or getattr(test, "_ci_examples_scaled", False):
        return  # not a property, or one already scaled (each parametrized case shares it)
    from hypothesis import settings

    test._hypothesis_internal_use_settings = settings(
        current, max_examples=ci_examples(current.max_examples)
    )
    test._ci_examples_scaled = True


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ci = in_ci()
    for item in items:
        if item.get_closest_marker("soak"):
            if not item.get_closest_marker("timeout"):
                item.add_marker(pytest.mark.timeout(SOAK_TIMEOUT))
        elif ci:
            fewer_examples_in_ci(item)
        group = xdist_group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            name_the_group(item, group)


def name_the_group(item: pytest.Item, group: str) -> None:
    """On an xdist worker under ``--dist loadgroup``, end the node id with ``@group``: the
    scheduler groups by that suffix. xdist 3.8 writes it into ``item._nodeid``, which pytest 9
    no longer reads (the node id lives in ``item._id``), so every group would be scattered."""
    if not getattr(item.config.option, "loadgroup", False) or not hasattr(item, "_id"):
        return  # not a loadgroup worker, or a pytest where xdist's own suffix works
    from _pytest.nodeid import NodeId

    if not item.nodeid.endswith(f"@{group}"):
        item._id = NodeId.parse(f"{item.nodeid}@{group}")


# Where a run's time goes, printed at the end of every xdist run (CI's log included): the seconds
# each worker spent in tests, and the groups (an xdist group, else a file) that took the most. The
# wall of a run is its busiest worker's total; a group longer than the others' share is its pole.
TIME_REPORT_ROWS = 15


class TimeAccount:
    """Sums the test reports' durations (setup, call, teardown) per xdist worker and per group,
    on the controller of an xdist run (registered by pytest_configure)."""

    def __init__(self) -> None:
        self.workers: dict[str, float] = {}
        self.groups: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # the worker that ran it (xdist's controller only)
        if node is None:
            return
        worker = str(node.gateway.id)
        self.workers[worker] = self.workers.get(worker, 0.0) + report.duration
        group = group_of(report.nodeid)
        self.groups[group] = self.groups.get(group, 0.0) + report.duration

    def lines(self) -> list[str]:
        if not self.workers:
            return []
        out = ["seconds per xdist worker (the run's wall is the largest): "]
        out[0] += ", ".join(f"{w} {s:.0f}" for w, s in sorted(self.workers.items()))
        out.append(f"the {TIME_REPORT_ROWS} longest xdist groups (else files), in seconds:")
        ranked = sorted(self.groups.items(), key=lambda kv: -kv[1])[:TIME_REPORT_ROWS]
        out.extend(f"{seconds:8.1f}  {group}" for group, seconds in ranked)
        return out

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        lines = self.lines()
        if lines:
            terminalreporter.write_sep("=", "where the time went")
            for line in lines:
                terminalreporter.write_line(line)


def group_of(nodeid: str) -> str:
    """The xdist group a node id ends with (``…@group``, name_the_group), else its file."""
    _, at, group = nodeid.rpartition("@")
    if at and "::" not in group and "]" not in group:
        return group
    return nodeid.split("::")[0]


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        config.pluginmanager.register(TimeAccount(), "edge-broker-time-account")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table (e.g. a bridge's topics)
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")


def to_toml(config: dict[str, Any]) -> str:
    """Tables of scalars and arrays of tables, enough for broker configs."""
    lines: list[str] = []
    for section, body in config.items():
        if isinstance(body, list):
            for table in body:
                lines.append(f"[[{section}]]")
                lines.extend(f"{k} = {_toml_value(v)}" for k, v in table.items())
                lines.append("")
        elif isinstance(body, dict):
            lines.append(f"[{section}]")
            lines.extend(f"{k} = {_toml_value(v)}" for k, v in body.items())
            lines.append("")
        else:
            lines.append(f"{section} = {_toml_value(body)}")
    return "\n".join(lines) + "\n"


@dataclass
class RunningBroker:
    """A broker subprocess. ``port`` is the first listener's port."""

    process: subprocess.Popen[bytes]
    config_path: Path
    log_path: Path
    host: str = "127.0.0.1"
    port: int = 0
    ports: dict[str, int] = field(default_factory=dict)
    transports: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def json_log(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log().splitlines() if line.startswith("{")]

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        """Send ``sig`` and wait; returns the exit code (kills after ``timeout``)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def connect_socket(self, listener: str | None = None, timeout: float = 5.0) -> socket.socket:
        port = self.ports[listener] if listener else self.port
        sock = socket.create_connection((self.host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


def default_config() -> dict[str, Any]:
    return {
        "listeners": [{"name": "tcp", "bind": "127.0.0.1", "port": 0}],
        "sys": {"interval": DEFAULT_SYS_INTERVAL},
    }


def start_broker(
    workdir: Path,
    config: dict[str, Any] | str | None = None,
    args: tuple[str, ...] = (),
    timeout: float = 30.0,
) -> RunningBroker:
    """Start ``python -m edge_broker run`` and wait until every listener accepts."""
    workdir.mkdir(parents=True, exist_ok=True)
    if config is None:
        text = to_toml(default_config())
    elif isinstance(config, str):
        text = config
    else:
        merged = dict(config)
        merged.setdefault("listeners", default_config()["listeners"])
        merged.setdefault("sys", {"interval": DEFAULT_SYS_INTERVAL})
        merged["listeners"] = [{"port": 0, **lc} for lc in merged["listeners"]]
        text = to_toml(merged)
    fd, name = tempfile.mkstemp(prefix="broker-", suffix=".toml", dir=workdir)
    os.close(fd)
    config_path = Path(name)
    config_path.write_text(text)
    log_path = config_path.with_suffix(".log")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "edge_broker", "run", "--config", str(config_path), *args],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
        )
    expected = text.count("[[listeners]]") or 1
    deadline = time.monotonic() + timeout
    broker = RunningBroker(process, config_path, log_path)
    while time.monotonic() < deadline:
        found = LISTEN_RE.findall(broker.log())
        if len(found) >= expected:
            for name_, transport, _host, port in found:
                broker.ports[name_] = int(port)
                broker.transports[name_] = transport
            first = found[0]
            broker.host = first[2] if first[2] not in ("0.0.0.0", "::") else "127.0.0.1"
            broker.port = int(first[3])
            return broker
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode}:\n{broker.log()}")
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"broker did not start listening in {timeout}s:\n{broker.log()}")


BrokerFactory = Callable[..., RunningBroker]


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """``broker_factory(config=None, args=())`` → RunningBroker; all stopped at teardown."""
    started: list[RunningBroker] = []

    def factory(
        config: dict[str, Any] | str | None = None, args: tuple[str, ...] = ()
    ) -> RunningBroker:
        b = start_broker(tmp_path / f"b{len(started)}", config, args)
        started.append(b)
        return b

    yield factory
    for b in started:
        b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> RunningBroker:
    """A fresh broker with the default test configuration."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """One broker shared by the tests of a module (use unique topics/client ids per test)."""
    b = start_broker(tmp_path_factory.mktemp("module-broker"))
    yield b
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


@pytest.fixture
def memory_broker_factory() -> Iterator[Callable[..., Any]]:
    """``memory_broker_factory(config=None)`` → the real broker in memory with a fake clock
    (tests/broker/engine_harness.py: no socket, no process; ``config`` a dict or TOML text), shut
    down at teardown. For tests of what the broker answers rather than of sockets."""
    from tests.broker.engine_harness import MemoryBroker

    made: list[MemoryBroker] = []

    def factory(config: dict[str, Any] | str | None = None) -> MemoryBroker:
        made.append(MemoryBroker(config))
        return made[-1]

    yield factory
    for mb in made:
        mb.close()


@dataclass
class InProcessBroker:
    """A :class:`edge_broker.broker.server.Broker` running in a thread with its own event loop,
    for tests that swap in their own authenticators or policy (``before_start`` hook) while
    blocking clients talk to it from the test thread."""

    broker: Any
    loop: Any
    thread: Any
    host: str = "127.0.0.1"
    port: int = 0

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the broker's loop and return its result."""
        import asyncio

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.broker.request_stop)
        self.thread.join(10)


@pytest.fixture
def inprocess_broker_factory() -> Iterator[Callable[..., InProcessBroker]]:
    """``inprocess_broker_factory(config_dict_or_text=None, before_start=None)``.

    ``before_start(broker)`` runs on the loop before the listeners open (replace
    ``broker.policy``, put an AuthChain in ``broker._chains[listener_name]`` ...).
    """
    import asyncio
    import threading

    from edge_broker.bridge.service import Bridges
    from edge_broker.broker.server import Broker
    from edge_broker.config import loads_config

    started: list[InProcessBroker] = []

    def factory(
        config: dict[str, Any] | str | None = None,
        before_start: Callable[[Any], None] | None = None,
    ) -> InProcessBroker:
        if config is None or isinstance(config, dict):
            merged = dict(config or {})
            merged.setdefault("listeners", [{"name": "tcp", "port": 0}])
            text = to_toml(merged)
        else:
            text = config
        cfg = loads_config(text, "<test>")
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        holder: dict[str, Any] = {}

        async def main() -> None:
            broker = Broker(cfg)
            if cfg.bridges:  # as ops.service.run_service composes them for `edge-broker run`
                broker.open_bridges = Bridges.open
            holder["broker"] = broker
            if before_start is not None:
                before_start(broker)
            serving = asyncio.ensure_future(broker.serve())
            while not broker.bound and not serving.done():
                await asyncio.sleep(0.01)
            ready.set()
            await serving

        def run() -> None:
            try:
                loop.run_until_complete(main())
            finally:
                ready.set()
                loop.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        if not ready.wait(10) or "broker" not in holder or not holder["broker"].bound:
            raise RuntimeError("in-process broker did not start")
        broker = holder["broker"]
        ib = InProcessBroker(broker, loop, thread, "127.0.0.1", broker.bound[0][3])
        started.append(ib)
        return ib

    yield factory
    for ib in started:
        if ib.thread.is_alive():
            ib.stop()


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The topics of every per-delivery check, in order, of an in-process broker (the real
    check still decides): how many deliveries paid for an egress check (issue 21 item 4)."""
    from edge_broker.authz.policy import Policy

    seen: list[str] = []
    real = Policy.check_deliver

    def counted(self: Policy, session: Any, message: Any, entry: Any = None) -> Any:
        seen.append(message.topic)
        return real(self, session, message, entry)

    monkeypatch.setattr(Policy, "check_deliver", counted)
    return seen
