"""Start and stop the brokers compared by scripts/bench: edge-broker, Mosquitto 2, amqtt 0.12.

Each runs as its own process on a free loopback port, with logging reduced to what a
production setup would keep, so that the CPU it spends is the broker's work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import (  # noqa: E402
    MOSQUITTO,
    cpu_seconds,
    free_port,
    rss_kib,
    stop_process,
    wait_port,
)

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Broker:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    workdir: Path

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.process.pid)

    def rss_kib(self) -> int:
        return rss_kib(self.process.pid)

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self.workdir, ignore_errors=True)


# Issue 21 item 4: a site ACL with one egress deny rule (which the bench topics never meet) and
# SMOKER claims enabled: before, either made every delivery of every client take the gate checks.
ACL_EGRESS = (
    '[acl]\nenabled = true\ndefault_permission = "allow"\n'
    '[[acl.rules]]\nid = "no-secrets"\nmessages = ["put"]\nflows = ["egress"]\n'
    'permission = "deny"\nkey_exprs = ["secret/**"]\n'
    '[[acl.subjects]]\nid = "all"\n[[acl.policies]]\nrules = ["no-secrets"]\nsubjects = ["all"]\n'
)


def claims_on(workdir: Path) -> str:
    return f'[claims]\nenabled = true\nstore_dir = "{workdir / "claims"}"\nfsync = "never"\n'


# What scripts/bench's load needs: thousands of clients connecting at once.
BENCH_LIMITS: dict[str, int | str] = {
    "max_connections": 5000,
    "connect_rate": 100_000,
    "connect_burst": 5000,
}


def start_edge(
    workdir: Path,
    extra: str = "",
    root: Path = ROOT,
    limits: Mapping[str, int | str] | None = None,
    module: str = "edge_broker.broker",
    listener: str = "",
) -> Broker:
    """edge-broker with ``extra`` config appended, run from the source tree ``root`` (the
    before/after benchmarks start two trees side by side). ``limits``: the ``[limits]`` keys
    instead of BENCH_LIMITS (the others stay at the broker's defaults). ``module``: what
    ``python -m`` runs; ``edge_broker.broker`` imports only the broker commands (about 14 MB
    less RSS), ``edge_broker`` is what the memory figures in docs/limits-memory.md were taken
    with. ``listener``: more keys of the listener's table (lines of TOML)."""
    port = free_port()
    conf = workdir / "edge.toml"
    table = "".join(
        f"{key} = {value!r}\n" if isinstance(value, int) else f'{key} = "{value}"\n'
        for key, value in (BENCH_LIMITS if limits is None else limits).items()
    )
    conf.write_text(
        f'[[listeners]]\nname = "bench"\nport = {port}\n{listener}'
        f'[limits]\n{table}[log]\nlevel = "warning"\n{extra}'
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # root's code, not another
    p = subprocess.Popen(
        [sys.executable, "-m", module, "run", "--config", str(conf)],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(port, process=p)
    return Broker("edge-broker", p, port, workdir)


def start_mosquitto(workdir: Path) -> Broker:
    port = free_port()
    conf = workdir / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\nlog_type error\npersistence false\n"
    )
    p = subprocess.Popen(
        [MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_port(port, process=p)
    return Broker("mosquitto", p, port, workdir)


def start_amqtt(workdir: Path) -> Broker:
    port = free_port()
    conf = workdir / "amqtt.yaml"
    conf.write_text(
        "listeners:\n  default:\n    type: tcp\n"
        f"    bind: 127.0.0.1:{port}\n    max_connections: 5000\n"
        "plugins:\n  amqtt.plugins.authentication.AnonymousAuthPlugin:\n"
        "    allow_anonymous: true\n"
    )
    amqtt = Path(sys.executable).parent / "amqtt"
    p = subprocess.Popen(
        [str(amqtt), "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_port(port, process=p)
    return Broker("amqtt", p, port, workdir)


STARTERS = {
    "edge-broker": start_edge,
    "edge-broker+acl": lambda d: start_edge(d, ACL_EGRESS),
    "edge-broker+claims": lambda d: start_edge(d, claims_on(d)),
    "mosquitto": start_mosquitto,
    "amqtt": start_amqtt,
}


def start(name: str) -> Broker:
    return STARTERS[name](Path(tempfile.mkdtemp(prefix=f"bench-{name}-")))
