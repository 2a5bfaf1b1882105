"""The memory budget ``edge-broker check`` prints (issue 16): what the configured ``[limits]``
let the broker hold at most, term by term, against the systemd unit's ``MemoryMax``.

The per-item costs are measured on this tree (``scripts/bench_memory.py``, docs/limits-memory.md)
and rounded up; the terms multiply them by the limits. It is a worst case: every connection
open, each with its subscriptions, a full queue and its own read buffer full; the read pool and
the write buffers at their broker-wide bounds (broker/limits/read_pool.py, write_budget.py; the
write bound may be passed by one event-loop turn's output, counted as one largest packet); the
retained store full; every cache full.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..config import Config, claims_enabled

BASE_BYTES = 32 * 1024 * 1024  # the broker at start (RSS), measured
CLIENT_BYTES = 6 * 1024  # one idle connection and its session, measured 4.6 KiB
SUBSCRIPTION_BYTES = 700  # one subscription besides its filter text, measured ~610 B
RETAINED_OVERHEAD = 700  # one retained message besides its topic and payload, measured ~520 B
CREDENTIAL_BYTES = 200  # one cached credential digest (32 B) in its OrderedDict, estimated
QUEUED_OVERHEAD = 200  # a queued message's entry besides what Message.size counts


@dataclass(frozen=True, slots=True)
class BudgetTerm:
    name: str
    bytes: int
    how: str  # the formula, in [limits] keys


def memory_budget(config: Config) -> list[BudgetTerm]:
    lim = config.limits
    conns = lim.max_connections
    filter_bytes = SUBSCRIPTION_BYTES + lim.max_topic_length
    queue = min(
        lim.max_queued_bytes + lim.max_queued_messages * QUEUED_OVERHEAD,
        lim.max_queued_messages * (QUEUED_OVERHEAD + lim.max_packet_size),
    )
    if lim.queue_overflow == "backpressure":
        queue *= 2  # an online session's queue may hold twice its limits while publishers wait
    queues = min(conns * queue, lim.max_queued_bytes_total)
    retained = min(
        lim.max_retained_bytes + lim.max_retained_messages * RETAINED_OVERHEAD,
        lim.max_retained_messages
        * (RETAINED_OVERHEAD + lim.max_retained_payload + lim.max_topic_length),
    )
    return [
        BudgetTerm("broker at start", BASE_BYTES, "measured"),
        BudgetTerm("connections", conns * CLIENT_BYTES, "max_connections × 6 KiB"),
        BudgetTerm(
            "packets being read",
            min(conns * lim.max_packet_size, conns * lim.read_buffer_size + lim.read_pool_size),
            "max_connections × read_buffer_size + read_pool_size",
        ),
        BudgetTerm(
            "write buffers",
            min(conns * lim.write_buffer_high, lim.max_write_buffer_total + lim.max_packet_size),
            "max_write_buffer_total + max_packet_size (or max_connections × "
            "write_buffer_high if smaller)",
        ),
        BudgetTerm(
            "subscriptions",
            min(conns * lim.max_subscriptions_per_client, lim.max_subscriptions_total)
            * filter_bytes,
            "max_subscriptions_total (or max_connections × max_subscriptions_per_client "
            "if smaller) × (700 B + max_topic_length)",
        ),
        BudgetTerm(
            "session queues",
            queues,
            "max_queued_bytes_total (or max_connections × (max_queued_bytes + "
            "max_queued_messages × 200 B)"
            + (" × 2" if lim.queue_overflow == "backpressure" else "")
            + " if smaller)",
        ),
        BudgetTerm(
            "retained messages", retained, "max_retained_bytes + max_retained_messages × 700 B"
        ),
        cache_term(config),
    ]


def cache_term(config: Config) -> BudgetTerm:
    """The byte-bounded caches of the gates this configuration turns on, the default topic
    space's two routing caches, and the verified-credentials cache of password listeners."""
    lim = config.limits
    parts: list[tuple[int, str]] = [(2 * lim.routing_cache_bytes, "2 × routing_cache_bytes")]
    if config.permissions is not None and config.permissions.enabled:
        parts.append((lim.decision_cache_bytes, "decision_cache_bytes (permissions)"))
    if claims_enabled(config):
        parts.append((lim.decision_cache_bytes, "decision_cache_bytes (claims)"))
    if config.acl is not None and config.acl.enabled:
        parts.append((lim.acl_cache_bytes, "acl_cache_bytes"))
    if any("password" in listener.auth_methods for listener in config.listeners):
        entries = config.passwords.cache_entries
        parts.append((entries * CREDENTIAL_BYTES, "passwords.cache_entries × 200 B"))
    return BudgetTerm("caches", sum(n for n, _ in parts), " + ".join(how for _, how in parts))


UNIT_FILES = (
    Path("/etc/systemd/system/edge-broker.service"),
    Path(__file__).resolve().parents[2] / "systemd" / "edge-broker.service",
)
_SIZE = re.compile(r"^\s*MemoryMax\s*=\s*(\d+)([KMGT]?)\s*$", re.MULTILINE)


def unit_memory_max(path: Path | None = None) -> tuple[int, Path] | None:
    """``MemoryMax`` of the systemd unit (``path``, else the installed unit, else the one in
    this source tree) in bytes, with the file it came from; ``None`` without one."""
    for candidate in (path,) if path is not None else UNIT_FILES:
        try:
            text = candidate.read_text()
        except OSError:
            continue
        match = _SIZE.search(text)
        if match is None:
            return None
        scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2)]
        return int(match.group(1)) * scale, candidate
    return None


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def budget_report(config: Config, unit: Path | None = None) -> tuple[list[str], bool]:
    """The lines ``edge-broker check`` prints and whether the budget exceeds ``MemoryMax``."""
    terms = memory_budget(config)
    total = sum(t.bytes for t in terms)
    lines = ["memory budget (worst case of the [limits]; docs/limits-memory.md):"]
    width = max(len(t.name) for t in terms)
    for t in terms:
        lines.append(f"  {t.name:<{width}}  {mib(t.bytes):>14}  {t.how}")
    lines.append(f"  {'total':<{width}}  {mib(total):>14}")
    limit = unit_memory_max(unit)
    if limit is None:
        lines.append("  no systemd unit with MemoryMax found (--unit FILE): not compared")
        return lines, False
    memory_max, source = limit
    lim = config.limits
    per_client = CLIENT_BYTES + min(lim.read_buffer_size, lim.max_packet_size)
    shared = total - per_client * lim.max_connections
    room = max(0, memory_max - shared) // max(1, per_client)
    lines.append(
        f"  one client at its worst case: {per_client / 1024:,.1f} KiB; shared (start, read pool, "
        f"write buffers, subscriptions, queues, retained, caches): {mib(shared)}; "
        f"MemoryMax={mib(memory_max)} holds {room:,} such clients of "
        f"max_connections={lim.max_connections:,}"
    )
    if total <= memory_max:
        lines.append(f"  fits MemoryMax={mib(memory_max)} ({source})")
        return lines, False
    biggest = max(terms, key=lambda t: t.bytes)
    lines.append(
        f"WARNING: the budget {mib(total)} exceeds MemoryMax={mib(memory_max)} "
        f"({source}); the largest term is {biggest.name} ({biggest.how}): lower those "
        f"limits or raise MemoryMax"
    )
    return lines, True
