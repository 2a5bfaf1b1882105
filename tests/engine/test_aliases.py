"""engine/aliases.py: topic aliases both ways without sockets (MQTT 5 §3.3.2.3.4)."""

from __future__ import annotations

import pytest

from edge_broker.engine.aliases import InboundAliases, OutboundAliases
from edge_broker.engine.connection import ConnectionEngine
from edge_broker.engine.negotiation import Offer, negotiate
from edge_broker.engine.states import Trigger
from edge_broker.mqtt.errors import ProtocolError
from edge_broker.mqtt.packets import Connect, Properties
from edge_broker.mqtt.reason_codes import ReasonCode


def test_inbound_alias_is_set_by_a_topic_and_used_by_an_empty_one() -> None:
    aliases = InboundAliases(2)
    assert aliases.resolve(1, "a/b") == "a/b"
    assert aliases.resolve(1, "") == "a/b"
    assert aliases.resolve(1, "c") == "c"  # a new topic replaces the alias
    assert aliases.resolve(1, "") == "c"
    assert len(aliases) == 1


def test_inbound_alias_above_the_maximum_is_0x94() -> None:
    aliases = InboundAliases(2)
    with pytest.raises(ProtocolError) as exc:
        aliases.resolve(3, "a")
    assert exc.value.reason_code == ReasonCode.TOPIC_ALIAS_INVALID
    assert "topic alias 3 exceeds the maximum 2" in exc.value.message
    assert len(aliases) == 0  # nothing stored: the map stays bounded by the maximum


def test_inbound_unset_alias_with_an_empty_topic_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError) as exc:
        InboundAliases(5).resolve(4, "")
    assert exc.value.reason_code == ReasonCode.PROTOCOL_ERROR
    assert "topic alias 4 is not set" in exc.value.message


def test_outbound_aliases_first_come_first_served_up_to_the_maximum() -> None:
    aliases = OutboundAliases(2)
    assert aliases.assign("a") == (1, True)  # assigned now: the topic goes with it
    assert aliases.assign("a") == (1, False)  # known: the topic is left out
    assert aliases.assign("b") == (2, True)
    assert aliases.assign("c") == (0, True)  # beyond the maximum: always in full
    assert aliases.assign("b") == (2, False)
    assert len(aliases) == 2


def test_outbound_unassign_undoes_only_the_newest_assignment() -> None:
    aliases = OutboundAliases(3)
    aliases.assign("a")
    aliases.assign("b")
    aliases.unassign("a")  # not the newest: it was sent, the client knows it
    assert aliases.assign("a") == (1, False)
    aliases.unassign("b")  # the packet that carried it was not sent
    assert aliases.assign("c") == (2, True)  # numbers stay 1..n without gaps
    assert aliases.assign("b") == (3, True)


def test_the_connection_engine_holds_both_directions() -> None:
    engine = ConnectionEngine(0.0, 1024, 65536, topic_alias_maximum=4)
    assert engine.aliases_in.maximum == 4
    assert engine.aliases_out is None  # until the client's CONNECT asks for some
    engine.trigger(Trigger.CONNECT)
    engine.accept(negotiate(_connect(0), OFFER), False, Properties())
    assert engine.aliases_out is None
    engine = ConnectionEngine(0.0, 1024, 65536, topic_alias_maximum=4)
    engine.trigger(Trigger.CONNECT)
    engine.accept(negotiate(_connect(70000), OFFER), False, Properties())
    assert engine.aliases_out is not None and engine.aliases_out.maximum == 65535


OFFER = Offer(server_keep_alive=0, max_keep_alive=65535, max_session_expiry=0, max_inflight=8)


def _connect(topic_alias_maximum: int) -> Connect:
    return Connect(5, "a", True, 60, properties=Properties(topic_alias_maximum=topic_alias_maximum))
