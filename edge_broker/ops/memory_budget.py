"""The memory budget ``edge-broker check`` prints (issue 16): what the configured ``[limits]`` let
the broker hold at most, term by term, against the systemd unit's ``MemoryMax``.

The per-item costs are measured on this tree (``scripts/bench_memory.py`` for connections,
``scripts/bench_limits_memory.py`` for subscriptions, retained messages, tenant spaces and
claims at the shallowest and the deepest longest topic, filled to about the default limits;
docs/limits-memory.md) and rounded up; the terms multiply them by the limits. A topic or filter
text is held about twice (the session's or message's own copy and the index's path-compressed
run, without its first level): its bytes count :data:`TEXT_COPIES` times, the slope measured
between the shallow and the deep figures. It
is a worst case: every connection open, each with its subscriptions, a full queue and its own
read buffer full; the read pool and the write buffers at their broker-wide bounds
(broker/limits/read_pool.py, write_budget.py; the write bound may be passed by one event-loop
turn's output, counted as one largest packet); the retained store full; every cache full.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..bridge.queue import ENTRY_OVERHEAD
from ..broker.topic_space import TENANT_CACHE_SHARE
from ..claims.pool import charge_of_size
from ..config import Config, claims_enabled

BASE_BYTES = 34 * 1024 * 1024  # the broker at start (RSS): 33.6-33.9 MiB with five listeners
# (bench_limits_memory.py --all-at-once, python -m edge_broker run as the unit's edge-broker)
CLIENT_BYTES = 6 * 1024  # one idle connection and its session, measured 4.6 KiB
SUBSCRIPTION_BYTES = 500  # one subscription besides its filter text × TEXT_COPIES: 495 B at
# 1 level, 2,620 B at 32 levels and 1,024 B, 15,000-16,000 of them (bench_limits_memory.py
# --count 16000; at --count 2000 the free memory of the broker at start hides about 450 B each)
RETAINED_OVERHEAD = 680  # one retained message besides payload and topic × TEXT_COPIES: 704 B
# with a 16 B payload at 1 level, 2,849 B at 32 levels and 1,024 B, 15,000 of them
# (bench_limits_memory.py --count 15000 --payload 16)
TENANT_BYTES = 2000  # an open tenant's topic space besides what keeps it: 1,370 B with one
# retained message at 1 level, 1,816-1,923 B with one at 32 levels and 1 KiB
# (bench_limits_memory.py; 17-21 kB with per-space $SYS copies); its two routing caches are
# counted apart
TEXT_COPIES = 2.1  # (2,620 - 495) B / 1,019 B more filter text = 2.09 (retained: 2.11): the
# session's or message's own copy, the index's run and the allocator's rounding of both
CREDENTIAL_BYTES = 200  # one cached credential digest (32 B) in its OrderedDict, estimated
BACKOFF_BYTES = 300  # one (source, user) failure count: key tuple, strings, entry; estimated
SOURCE_BYTES = 250  # one source's connect-rate bucket (address key, two floats); estimated
QUEUED_OVERHEAD = 200  # a queued message's entry besides what Message.size counts
BRIDGE_MESSAGE_BYTES = 240  # one message in a bridge's outbound queue besides its topic and
# payload (held once each, BRIDGE_PAYLOAD_FACTOR): 238 B with a 13 B topic, 0.98 × payload
# (bench_limits_memory.py --only bridge --count 20000: 16 B and 1,000 B payloads, uplink down)
BRIDGE_PAYLOAD_FACTOR = 1.0
BRIDGE_DURABLE_BYTES = 180  # with persistence on, the queue log's index of the live record:
# 413-415 B with a 13 B topic, 1.01 × payload (the same bench, durable)
AUDIT_KEY_BYTES = 2560  # one open audit aggregation key (its record's fields), measured ~2.1 KiB


@dataclass(frozen=True, slots=True)
class BudgetTerm:
    name: str
    bytes: int
    how: str  # the formula, in [limits] keys


def memory_budget(config: Config) -> list[BudgetTerm]:
    lim = config.limits
    conns = lim.max_connections
    filter_bytes = SUBSCRIPTION_BYTES + int(TEXT_COPIES * lim.max_topic_length)
    queue = min(
        lim.max_queued_bytes + lim.max_queued_messages * QUEUED_OVERHEAD,
        lim.max_queued_messages * (QUEUED_OVERHEAD + lim.max_packet_size),
    )
    if lim.queue_overflow == "backpressure":
        queue *= 2  # an online session's queue may hold twice its limits while publishers wait
    queues = min(conns * queue, lim.max_queued_bytes_total)
    # max_retained_bytes counts topic and payload once; the topics' text is held TEXT_COPIES
    # times, and there is at most one longest topic per message of it
    topics = min(lim.max_retained_bytes, lim.max_retained_messages * lim.max_topic_length)
    retained = min(
        lim.max_retained_bytes
        + int((TEXT_COPIES - 1) * topics)
        + lim.max_retained_messages * RETAINED_OVERHEAD,
        lim.max_retained_messages
        * (RETAINED_OVERHEAD + lim.max_retained_payload + int(TEXT_COPIES * lim.max_topic_length)),
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
            "if smaller) × (500 B + 2.1 × max_topic_length)",
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
            "retained messages",
            retained,
            "max_retained_bytes + 1.1 × (max_retained_bytes, or max_retained_messages × "
            "max_topic_length if smaller) + max_retained_messages × 680 B",
        ),
        tenant_term(config),
        claims_term(config),
        bridges_term(config),
        cache_term(config),
        BudgetTerm(  # repeated denials, held per window (audit/aggregate.py)
            "audit aggregation",
            config.audit.aggregate_max_keys * AUDIT_KEY_BYTES
            if config.audit.aggregate_window
            else 0,
            "audit.aggregate_max_keys × 2.5 KiB",
        ),
    ]


def tenant_term(config: Config) -> BudgetTerm:
    """Topic spaces of tenants clients name themselves (``tenant_choice = "open"``): at most
    ``max_tenants`` besides the default one (a CONNECT into one more is refused), each with
    its two routing caches (broker/topic_space.py ``space_cache_bytes``). Tenants from
    credentials are as many as the operator issues (also held to ``max_tenants``); ``$SYS``
    costs a tenant nothing (sys_topics.py)."""
    if not any(listener.tenant_choice == "open" for listener in config.listeners):
        return BudgetTerm("tenant spaces", 0, "no listener with tenant_choice = open")
    lim = config.limits
    caches = 2 * (lim.routing_cache_bytes // TENANT_CACHE_SHARE)
    return BudgetTerm(
        "tenant spaces",
        lim.max_tenants * (TENANT_BYTES + caches),
        f"max_tenants × (2,000 B + 2 × routing_cache_bytes / {TENANT_CACHE_SHARE}) "
        "(tenant_choice = open)",
    )


def claim_bytes(max_claim_bytes: int) -> int:
    """What one live claim of ``max_claim_bytes`` (its PUBLISH payload) holds, measured: the
    charge ``[claims] max_claims_bytes`` counts (claims/pool.py)."""
    return charge_of_size(max_claim_bytes)


def claims_term(config: Config) -> BudgetTerm:
    """Claims held at ``max_claims_total`` claims of ``max_claim_bytes`` or at the byte pool
    ``max_claims_bytes``, whichever is less, when the claims gate is on."""
    if not claims_enabled(config):
        return BudgetTerm("claims", 0, "claims off")
    claims = config.claims
    by_count = claims.max_claims_total * claim_bytes(claims.max_claim_bytes)
    return BudgetTerm(
        "claims",
        min(by_count, claims.max_claims_bytes),
        "min(max_claims_total × (1,700 B + 1.6 × max_claim_bytes), max_claims_bytes)",
    )


def bridge_queue_bytes(max_messages: int, max_bytes: int, durable: bool) -> int:
    """What one bridge's outbound queue holds at its bounds (its uplink down): the bound in
    bytes counts topic + payload + ``ENTRY_OVERHEAD`` per message (bridge/queue.py), which the
    queue holds once each, plus the rest of each message's measured cost."""
    per_message = BRIDGE_MESSAGE_BYTES + (BRIDGE_DURABLE_BYTES if durable else 0)
    return int(BRIDGE_PAYLOAD_FACTOR * max_bytes) + max_messages * (per_message - ENTRY_OVERHEAD)


def bridges_term(config: Config) -> BudgetTerm:
    """Every bridge's outbound queue full (its uplink down): the overflow policy drops what
    would pass ``queue_max_messages`` or ``queue_max_bytes``."""
    if not config.bridges:
        return BudgetTerm("bridge queues", 0, "no [[bridges]]")
    durable = config.persistence.enabled
    total = sum(
        bridge_queue_bytes(b.queue_max_messages, b.queue_max_bytes, durable) for b in config.bridges
    )
    per_message = BRIDGE_MESSAGE_BYTES + (BRIDGE_DURABLE_BYTES if durable else 0)
    return BudgetTerm(
        "bridge queues",
        total,
        "Σ over [[bridges]] of queue_max_bytes + queue_max_messages × "
        f"{per_message - ENTRY_OVERHEAD} B" + (" (persistence on)" if durable else ""),
    )


def cache_term(config: Config) -> BudgetTerm:
    """The byte-bounded caches of the gates this configuration turns on, the default topic
    space's two routing caches, the verified-credentials cache and failure back-off of
    password listeners, and the per-source connect-rate buckets."""
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
        backoff = config.passwords.backoff_entries
        parts.append((backoff * BACKOFF_BYTES, "passwords.backoff_entries × 300 B"))
    parts.append((lim.max_connect_sources * SOURCE_BYTES, "max_connect_sources × 250 B"))
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
