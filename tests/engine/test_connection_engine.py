"""engine/connection.py with bytes and times only: no socket, no event loop, no sleep."""

from __future__ import annotations

import pytest

from edge_broker.engine.connection import ConnectionEngine, Timeout
from edge_broker.engine.events import ProtocolViolation
from edge_broker.engine.states import ConnState, Trigger
from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Connect, Pingreq, Publish
from edge_broker.mqtt.reason_codes import ReasonCode

CONNECT = encode(Connect(5, "eng", True, 10), 5)


def connected(now: float = 100.0, keep_alive: int = 10) -> ConnectionEngine:
    engine = ConnectionEngine(now, max_connect_packet_size=256, max_packet_size=4096)
    [packet] = engine.receive(CONNECT, now)
    assert isinstance(packet, Connect)
    engine.trigger(Trigger.CONNECT)
    engine.keep_alive = keep_alive
    assert engine.trigger(Trigger.CONNACK_SUCCESS) is ConnState.CONNECTED
    return engine


def test_keep_alive_runs_out_after_one_and_a_half_times_without_bytes() -> None:
    engine = connected(now=100.0, keep_alive=10)
    assert engine.timeout(115.0, connect_timeout=5) is None
    assert engine.timeout(115.001, connect_timeout=5) is Timeout.KEEP_ALIVE
    engine.receive(encode(Pingreq(), 5), 114.0)  # any bytes count, at the time given
    assert engine.last_rx == 114.0
    assert engine.timeout(129.0, connect_timeout=5) is None
    assert engine.timeout(129.5, connect_timeout=5) is Timeout.KEEP_ALIVE


def test_keep_alive_zero_never_runs_out() -> None:
    engine = connected(keep_alive=0)
    assert engine.timeout(1e9, connect_timeout=5) is None


@pytest.mark.parametrize("trigger", [None, Trigger.CONNECT])
def test_connect_timeout_before_connack(trigger: Trigger | None) -> None:
    engine = ConnectionEngine(50.0, max_connect_packet_size=256, max_packet_size=4096)
    if trigger is not None:
        engine.trigger(trigger)
    assert engine.timeout(55.0, connect_timeout=5) is None
    assert engine.timeout(55.01, connect_timeout=5) is Timeout.CONNECT
    engine.trigger(Trigger.CLOSE)
    assert engine.timeout(1e9, connect_timeout=5) is None  # closed: nothing more to time


def test_pre_authentication_budget_is_twice_the_connect_limit() -> None:
    engine = ConnectionEngine(0.0, max_connect_packet_size=100, max_packet_size=4096)
    assert not engine.pre_auth_exceeded(150)
    assert not engine.pre_auth_exceeded(50)
    assert engine.pre_auth_exceeded(1)


def test_packet_size_bound_rises_at_connack_only() -> None:
    big = encode(Publish("t", b"x" * 400, 0), 5)
    before = ConnectionEngine(0.0, max_connect_packet_size=256, max_packet_size=4096)
    before.receive(CONNECT, 0.0)
    before.trigger(Trigger.CONNECT)
    [refused, *_] = before.receive(big, 1.0)
    assert isinstance(refused, ProtocolViolation)
    assert refused.reason_code == ReasonCode.PACKET_TOO_LARGE
    [publish] = connected().receive(big, 101.0)
    assert isinstance(publish, Publish) and len(publish.payload) == 400


def test_moves_outside_the_table_are_refused() -> None:
    engine = connected()
    with pytest.raises(ValueError, match="CONNECTED cannot take"):
        engine.trigger(Trigger.AUTH_CONTINUE)
    assert engine.state is ConnState.CONNECTED


def test_token_deadline_ends_a_connected_session_only_once_passed() -> None:
    engine = connected(now=100.0, keep_alive=0)
    engine.token_deadline = 130.0
    assert engine.timeout(129.99, connect_timeout=5) is None
    assert engine.timeout(130.0, connect_timeout=5) is Timeout.TOKEN
    engine.token_deadline = None  # re-authenticated with a token without exp
    assert engine.timeout(1e9, connect_timeout=5) is None


def test_next_deadline_is_the_earliest_moment_a_timeout_can_come() -> None:
    engine = ConnectionEngine(50.0, max_connect_packet_size=256, max_packet_size=4096)
    assert engine.next_deadline(connect_timeout=5) == 55.0  # before CONNACK: connect timeout
    assert engine.timeout(55.0, connect_timeout=5) is None
    assert engine.timeout(55.001, connect_timeout=5) is Timeout.CONNECT
    engine = connected(now=100.0, keep_alive=10)
    assert engine.next_deadline(connect_timeout=5) == 115.0  # 1.5 x Keep Alive
    engine.token_deadline = 110.0
    assert engine.next_deadline(connect_timeout=5) == 110.0  # the token runs out first
    engine.token_deadline = 130.0
    assert engine.next_deadline(connect_timeout=5) == 115.0
    engine.receive(encode(Pingreq(), 5), 112.0)  # bytes only move it later
    assert engine.next_deadline(connect_timeout=5) == 127.0
    engine.keep_alive = 0
    assert engine.next_deadline(connect_timeout=5) == 130.0
    engine.token_deadline = None
    assert engine.next_deadline(connect_timeout=5) is None  # nothing can time out
    engine.trigger(Trigger.CLOSE)
    engine.token_deadline = 1.0
    assert engine.next_deadline(connect_timeout=5) is None
