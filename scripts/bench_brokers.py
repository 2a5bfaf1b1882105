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


# Every bench client is one principal from one address: the shares would measure the cap (a
# tree that does not know a key is started without it: ``_known_limits``).
ONE_SOURCE: dict[str, int | float | str] = {
    "tenant_share": 1.0,
    "principal_share": 1.0,
    "source_connection_share": 1.0,
}
# What scripts/bench's load needs: thousands of clients connecting at once.
BENCH_LIMITS: dict[str, int | float | str] = {
    "max_connections": 5000,
    "connect_rate": 100_000,
    "connect_burst": 5000,
    **ONE_SOURCE,
}


def _known_limits(root: Path, limits: Mapping[str, int | float | str]) -> dict[str, object]:
    """The ``[limits]`` keys the tree at ``root`` reads (older trees refuse unknown keys): its
    configuration is ``edge_broker/config.py`` or, since the split, ``edge_broker/config/``."""
    package = root / "edge_broker"
    sources = [package / "config.py", *sorted((package / "config").glob("*.py"))]
    text = "".join(p.read_text(errors="replace") for p in sources if p.is_file())
    return {k: v for k, v in limits.items() if f'"{k}"' in text}


# The gated policy of scripts/bench, the same on both brokers: every client logs in as BENCH_USER
# with a password (one file made by mosquitto_passwd, which edge-broker reads as it is), may
# publish and subscribe under bench/ and idle/ and nothing else (admin/ denied explicitly), and
# a site ACL denies egress of secret/** (edge-broker; Mosquitto's ACL file grants no secret/).
BENCH_USER = "bench"
BENCH_PASSWORD = b"bench-password-1"


def password_file(workdir: Path) -> Path:
    path = workdir / "passwd"
    subprocess.run(
        ["mosquitto_passwd", "-b", "-c", str(path), BENCH_USER, BENCH_PASSWORD.decode()],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    path.chmod(0o644)  # Mosquitto as root drops to its own user, which must still read it
    return path


def gated_policy(user: str = BENCH_USER) -> str:
    """The permissions and site ACL of the gated policy on edge-broker (``[passwords]`` aside);
    scripts/bench_gate_path.py and the publish-memo test judge the same policy."""
    return (
        '[permissions]\nunassigned = "deny"\n'
        '[permissions.sets.bench]\ndefault_behaviour = "deny"\nrules = [\n'
        '  { id = "no-admin", topic = "admin/#", type = "DENY" },\n'
        '  { id = "bench", topic = "bench/#" },\n'
        '  { id = "idle", topic = "idle/#" },\n]\n'
        f'[[permissions.assign]]\nusername = "{user}"\nsets = ["bench"]\n'
    ) + ACL_EGRESS


def edge_gated(workdir: Path) -> tuple[str, str]:
    """(listener keys, config tables) of the gated policy on edge-broker."""
    passwords = f'[passwords]\nfile = "{password_file(workdir)}"\n'
    return 'auth_methods = ["password"]\n', passwords + gated_policy()


def mosquitto_gated(workdir: Path) -> str:
    """Mosquitto's configuration lines for the gated policy."""
    acl = workdir / "acl"
    acl.write_text(f"user {BENCH_USER}\ntopic readwrite bench/#\ntopic readwrite idle/#\n")
    acl.chmod(0o644)
    return f"allow_anonymous false\npassword_file {password_file(workdir)}\nacl_file {acl}\n"


def tree_python(root: Path) -> str:
    """The interpreter that runs the tree ``root``: its own ``.venv`` when it has one, so a tree
    whose virtualenv holds the optional ``speed`` extra (uvloop) runs beside one without it;
    else this script's."""
    own = root / ".venv" / "bin" / "python"
    return str(own) if own.exists() else sys.executable


def start_edge(
    workdir: Path,
    extra: str = "",
    root: Path = ROOT,
    limits: Mapping[str, int | float | str] | None = None,
    module: str = "edge_broker.broker",
    listener: str = "",
    log_level: str = "warning",
) -> Broker:
    """edge-broker with ``extra`` config appended, run from the source tree ``root`` (the
    before/after benchmarks start two trees side by side). ``limits``: the ``[limits]`` keys
    instead of BENCH_LIMITS (the others stay at the broker's defaults). ``module``: what
    ``python -m`` runs; ``edge_broker.broker`` imports only the broker commands (about 14 MB
    less RSS), ``edge_broker`` is what the memory figures in docs/limits-memory.md were taken
    with. ``listener``: more keys of the listener (``auth_methods``). The broker's log goes to
    ``workdir/broker.log`` at ``log_level``."""
    port = free_port()
    conf = workdir / "edge.toml"
    table = "".join(
        f"{key} = {value!r}\n" if isinstance(value, (int, float)) else f'{key} = "{value}"\n'
        for key, value in _known_limits(root, BENCH_LIMITS if limits is None else limits).items()
    )
    conf.write_text(
        f'[[listeners]]\nname = "bench"\nport = {port}\n{listener}'
        f'[limits]\n{table}[log]\nlevel = "{log_level}"\n{extra}'
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # root's code, not another
    # BENCH_PROFILE=/tmp/x.prof: the broker runs under cProfile (written when it stops)
    profile = (
        ["-m", "cProfile", "-o", os.environ["BENCH_PROFILE"]] if "BENCH_PROFILE" in env else []
    )
    log = open(workdir / "broker.log", "wb")
    p = subprocess.Popen(
        [tree_python(root), *profile, "-m", module, "run", "--config", str(conf)],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()  # the child has its own descriptor
    wait_port(port, process=p)
    return Broker("edge-broker", p, port, workdir)


def start_mosquitto(workdir: Path, extra: str = "") -> Broker:
    """Mosquitto on a free port; ``extra``: more configuration lines (they may override
    ``allow_anonymous`` and ``persistence``: Mosquitto takes the last value)."""
    port = free_port()
    conf = workdir / "mosquitto.conf"
    user = "user root\n" if os.geteuid() == 0 else ""  # else it drops to "mosquitto"
    conf.write_text(
        f"{user}listener {port} 127.0.0.1\nallow_anonymous true\nlog_type error\n"
        f"persistence false\n{extra}"
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
