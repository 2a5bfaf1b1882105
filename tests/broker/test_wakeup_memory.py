"""When the broker next wakes (``Broker.next_due``, broker/scheduler.py, issue 21): every
timer's deadline is known to the one scheduler, exactly, so the asyncio layer can sleep until
then. On the in-memory broker with a fake clock (engine_harness.py), whose ``advance`` jumps
from one ``next_due`` to the next: a deadline the scheduler did not know of would never fire.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_raw import unique_id
from engine_harness import MemoryBroker, memory_broker

from edge_broker.broker.scheduler import Scheduler
from edge_broker.broker.server import TICK
from edge_broker.mqtt.packets import Properties, Publish, Will

QUIET = {"sys": {"interval": 0}}  # no $SYS: no periodic duty at all


@pytest.fixture
def mb() -> Iterator[MemoryBroker]:
    yield from memory_broker(QUIET)


def test_nothing_due_without_deadlines(mb: MemoryBroker) -> None:
    assert mb.broker.next_due() is None
    c = mb.client()
    assert mb.broker.next_due() == mb.clock.now + mb.config.broker.connect_timeout
    c.connect(unique_id("idle"), keep_alive=0)
    assert mb.broker.next_due() is None  # Keep Alive 0, no token: never due
    c.subscribe(unique_id("idle/") + "/#")
    assert mb.broker.next_due() is None


def test_connect_timeout_is_due_exactly(mb: MemoryBroker) -> None:
    c = mb.client()
    timeout = mb.config.broker.connect_timeout
    mb.advance(timeout)
    c.nothing()  # "more than" connect_timeout: not at the instant itself
    assert not c.eof
    mb.advance(1e-6)
    c.closed()


def test_keep_alive_deadline_follows_the_last_packet(mb: MemoryBroker) -> None:
    c = mb.client()
    c.connect(unique_id("ka"), keep_alive=10)
    start = mb.clock.now
    assert mb.broker.next_due() == start + 15  # CONNACK re-armed it from the connect timeout
    mb.advance(9)
    c.subscribe(unique_id("ka/") + "/#")  # a packet at 9 s
    mb.advance(6)  # 15 s from the start: the first deadline passes without a close
    assert not c.eof
    assert mb.broker.next_due() == start + 9 + 15
    mb.advance(9)
    assert not c.eof  # exactly 1.5 x Keep Alive after the last packet: not yet
    mb.advance(1e-6)
    c.closed()
    assert mb.broker.next_due() is None


def test_will_delay_and_session_expiry_are_due_exactly(mb: MemoryBroker) -> None:
    topic = unique_id("will/")
    w = mb.client()
    w.connect(unique_id("w"), keep_alive=0)
    w.subscribe(topic)
    c = mb.client()
    will = Will(topic, b"gone", properties=Properties(will_delay_interval=7))
    props = Properties(session_expiry_interval=20)
    c.connect(unique_id("v"), keep_alive=0, will=will, properties=props)
    c.close()
    gone = mb.clock.now
    assert mb.broker.next_due() == gone + 7
    mb.advance(7 - 1e-6)
    w.nothing()
    mb.advance(1e-6)
    assert w.expect(Publish).payload == b"gone"
    assert mb.broker.next_due() == gone + 20  # the session's expiry is what remains
    mb.advance(13)
    assert mb.broker.next_due() is None
    assert len(mb.broker.sessions) == 1  # only the watcher's


def test_sys_interval_is_the_only_periodic_duty_by_default() -> None:
    for mb in memory_broker({"sys": {"interval": 10}}):
        start = mb.clock.now
        assert mb.broker.next_due() == start  # $SYS is there from the start
        mb.advance(0)
        assert mb.broker.next_due() == start + 10
        mb.advance(25)
        assert mb.broker.next_due() == start + 30


def test_tenant_space_sweep_runs_only_while_there_are_tenant_spaces(mb: MemoryBroker) -> None:
    assert mb.broker.next_due() is None
    space = mb.broker.topic_space("tenant-a")
    assert space is not None
    now = mb.clock.now
    assert mb.broker.next_due() == now + 5.0
    mb.advance(5.0)
    assert "tenant-a" not in mb.broker.topic_spaces  # empty: swept
    assert mb.broker.next_due() is None  # and nothing left to sweep


def test_scheduler_arms_earlier_never_later() -> None:
    """The asyncio timer: a new earlier deadline replaces the armed one, a later one does not;
    after firing it re-arms at the next due time (its sources asked again)."""
    loop = asyncio.new_event_loop()
    fired: list[float] = []
    now = [0.0]
    pending: list[float] = []

    def fire() -> None:
        fired.append(now[0])
        if pending and pending[0] <= now[0]:
            pending.pop(0)

    timers = Scheduler(lambda: now[0], fire)
    timers.add_source(lambda: pending[0] if pending else None)
    try:
        timers.arm(5.0)  # not started: nothing is armed
        timers.start(loop)
        assert timers._handle is None  # nothing due
        pending.append(30.0)
        timers.arm(30.0)
        first = timers._handle
        assert first is not None
        timers.arm(40.0)  # later: the armed timer stays
        assert timers._handle is first
        pending.insert(0, 20.0)
        timers.arm(20.0)  # earlier: replaces it
        assert first.cancelled() and timers._handle is not first
        assert math.isclose(timers._handle.when() - loop.time(), 20.0, abs_tol=0.5)
        now[0] = 20.0
        timers._handle._run()  # the loop would run it 20 s from now
        assert fired == [20.0] and pending == [30.0]
        assert timers._handle is not None  # re-armed for the deadline at 30
        assert math.isclose(timers._handle.when() - loop.time(), 10.0, abs_tol=0.5)
        timers.stop()
        assert timers._handle is None
    finally:
        loop.close()


def test_an_applied_config_is_ticked_at_once(tmp_path: Path) -> None:
    """A reload (or a sync bundle: both go through reload.apply_config) may change the connect
    timeout or the $SYS interval: the broker ticks right away to plan by the new values."""
    for mb in memory_broker("[sys]\ninterval = 0\n"):
        assert mb.broker.next_due() is None
        assert mb.reload(tmp_path / "broker.toml", "[sys]\ninterval = 1\n")
        assert mb.broker.next_due() == mb.clock.now
        mb.advance(0)
        assert mb.broker.next_due() == mb.clock.now + 1  # $SYS from now on, every second


def test_the_audit_log_is_flushed_only_when_it_has_records(tmp_path: Path) -> None:
    """An idle broker with ``[audit] dir`` does not wake to flush an empty buffer: the first
    record of a batch plans the flush ``TICK`` later (it used to poll every 0.5 s)."""
    audit = {"dir": str(tmp_path / "audit"), "stats_interval": 0}
    for mb in memory_broker({"sys": {"interval": 0}, "audit": audit}):
        mb.advance(1.0)  # what the start recorded is written
        assert mb.broker.next_due() is None  # and nothing more to do
        c = mb.client()
        c.connect(unique_id("audited"), keep_alive=0)  # a connect event is recorded
        assert mb.broker.next_due() == mb.clock.now + TICK
        mb.advance(TICK)
        assert mb.broker.next_due() is None
        segment = next((tmp_path / "audit").glob("audit-*.jsonl"))
        assert '"event":"connect"' in segment.read_text().replace(" ", "")


def test_a_failed_tick_is_retried_after_a_pause_not_at_once() -> None:
    """A tick that raises leaves its deadline due; re-arming at that (past) time would run it
    again at once, forever: the broker holds the next wake-up back by ``TICK``."""
    loop = asyncio.new_event_loop()
    now = [0.0]
    calls: list[float] = []
    timers: Scheduler

    def fire() -> None:  # as Broker._wake does when its tick raises
        calls.append(now[0])
        timers.hold(now[0] + TICK)

    timers = Scheduler(lambda: now[0], fire)
    timers.add_source(lambda: 1.0)  # a deadline the failing tick never clears
    try:
        timers.start(loop)
        handle = timers._handle
        assert handle is not None
        now[0] = 1.0
        handle._run()
        assert calls == [1.0]
        again = timers._handle
        assert again is not None
        assert math.isclose(again.when() - loop.time(), TICK, abs_tol=0.1)  # not 0: no spin
    finally:
        timers.stop()
        loop.close()
