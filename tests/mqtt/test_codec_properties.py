"""The MQTT 5 property table (§2.2.2.2, Table 2-4) as the codec applies it, both directions.

For every packet type (and the Will Properties) and every property: the property decodes where
the table allows it and is a Protocol Error (0x82) everywhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.mqtt.codec import PacketReader, ProtocolError, encode
from edge_broker.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    PacketType,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
    Will,
)
from edge_broker.mqtt.properties import PROPERTY_SPECS, WILL, PropertySpec, ValueKind
from edge_broker.mqtt.wire import encode_varint

T = PacketType


def pkt(first: int, body: bytes) -> bytes:
    return bytes((first,)) + encode_varint(len(body)) + body


def s(text: str) -> bytes:
    return len(text.encode()).to_bytes(2, "big") + text.encode()


def props(raw: bytes) -> bytes:
    return encode_varint(len(raw)) + raw


def connect5(properties: bytes = b"\x00", flags: int = 0x02, extra: bytes = b"") -> bytes:
    return pkt(0x10, s("MQTT") + bytes((5, flags)) + b"\x00\x3c" + properties + s("c") + extra)


SAMPLE_VALUE = {
    ValueKind.BYTE: b"\x01",
    ValueKind.TWO_BYTE: b"\x00\x01",
    ValueKind.FOUR_BYTE: b"\x00\x00\x00\x01",
    ValueKind.VARINT: b"\x01",
    ValueKind.STRING: s("x"),
    ValueKind.BINARY: s("x"),
    ValueKind.STRING_PAIR: s("k") + s("v"),
}


def encoded_property(spec: PropertySpec) -> bytes:
    raw = bytes((spec.identifier,)) + SAMPLE_VALUE[spec.kind]
    if spec.field == "authentication_data":
        raw = b"\x15" + s("M") + raw  # data needs a method beside it
    return raw


# For each context: how to wrap a property block into a whole packet.
FROM_CLIENT: dict[int, Callable[[bytes], bytes]] = {
    T.CONNECT: lambda p: connect5(props(p)),
    WILL: lambda p: connect5(flags=0x06, extra=props(p) + s("w") + s("x")),
    T.PUBLISH: lambda p: pkt(0x30, s("t") + props(p)),
    T.PUBACK: lambda p: pkt(0x40, b"\x00\x01\x00" + props(p)),
    T.PUBREC: lambda p: pkt(0x50, b"\x00\x01\x00" + props(p)),
    T.PUBREL: lambda p: pkt(0x62, b"\x00\x01\x00" + props(p)),
    T.PUBCOMP: lambda p: pkt(0x70, b"\x00\x01\x00" + props(p)),
    T.SUBSCRIBE: lambda p: pkt(0x82, b"\x00\x01" + props(p) + s("a") + b"\x00"),
    T.UNSUBSCRIBE: lambda p: pkt(0xA2, b"\x00\x01" + props(p) + s("a")),
    T.DISCONNECT: lambda p: pkt(0xE0, b"\x00" + props(p)),
    T.AUTH: lambda p: pkt(0xF0, b"\x18" + props(p)),
}
FROM_SERVER: dict[int, Callable[[bytes], bytes]] = {
    T.CONNACK: lambda p: pkt(0x20, b"\x00\x00" + props(p)),
    T.PUBLISH: lambda p: pkt(0x30, s("t") + props(p)),
    T.PUBACK: lambda p: pkt(0x40, b"\x00\x01\x00" + props(p)),
    T.PUBREC: lambda p: pkt(0x50, b"\x00\x01\x00" + props(p)),
    T.PUBREL: lambda p: pkt(0x62, b"\x00\x01\x00" + props(p)),
    T.PUBCOMP: lambda p: pkt(0x70, b"\x00\x01\x00" + props(p)),
    T.SUBACK: lambda p: pkt(0x90, b"\x00\x01" + props(p) + b"\x00"),
    T.UNSUBACK: lambda p: pkt(0xB0, b"\x00\x01" + props(p) + b"\x00"),
    T.DISCONNECT: lambda p: pkt(0xE0, b"\x00" + props(p)),
    T.AUTH: lambda p: pkt(0xF0, b"\x18" + props(p)),
}


def _name(context: int) -> str:
    return "WILL" if context == WILL else T(context).name


def _server_reader(context: int) -> PacketReader:
    reader = PacketReader(side="server")
    if context not in (T.CONNECT, WILL):
        reader.feed(connect5())
    return reader


@pytest.mark.parametrize("context", list(FROM_CLIENT), ids=_name)
def test_properties_from_a_client(context: int) -> None:
    for spec in PROPERTY_SPECS:
        data = FROM_CLIENT[context](encoded_property(spec))
        allowed = context in spec.allowed_in
        if context == T.PUBLISH and spec.field == "subscription_identifiers":
            allowed = False  # MQTT 5 §3.3.4: only a server puts it in PUBLISH
        _check(_server_reader(context), data, allowed, spec, context)


@pytest.mark.parametrize("context", list(FROM_SERVER), ids=_name)
def test_properties_from_a_server(context: int) -> None:
    for spec in PROPERTY_SPECS:
        data = FROM_SERVER[context](encoded_property(spec))
        reader = PacketReader(side="client", protocol_level=5)
        _check(reader, data, context in spec.allowed_in, spec, context)


def _check(
    reader: PacketReader, data: bytes, allowed: bool, spec: PropertySpec, context: int
) -> None:
    where = f"{spec.field} in {_name(context)}"
    if allowed:
        [packet] = reader.feed(data)
        carried = (
            packet.will.properties
            if isinstance(packet, Connect) and packet.will
            else (
                packet.properties  # type: ignore[union-attr]
            )
        )
        assert getattr(carried, spec.field) not in (None, ()), where
        return
    with pytest.raises(ProtocolError) as info:
        reader.feed(data)
    assert info.value.reason_code == 0x82, f"{where}: {info.value}"


def test_table_covers_every_properties_field_once() -> None:
    fields = [f.name for f in dataclasses.fields(Properties)]
    assert sorted(spec.field for spec in PROPERTY_SPECS) == sorted(fields)
    ids = [spec.identifier for spec in PROPERTY_SPECS]
    assert len(set(ids)) == len(ids) == 27


def _with(context: int, pr: Properties) -> Packet:
    """A packet of type ``context`` carrying ``pr`` (or a CONNECT whose Will carries it)."""
    if context == WILL:
        return Connect(5, "c", will=Will("w", b"", properties=pr))
    return {
        T.CONNECT: lambda: Connect(5, "c", properties=pr),
        T.CONNACK: lambda: Connack(False, 0, pr),
        T.PUBLISH: lambda: Publish("t", b"", 0, properties=pr),
        T.PUBACK: lambda: Puback(1, 0, pr),
        T.PUBREC: lambda: Pubrec(1, 0, pr),
        T.PUBREL: lambda: Pubrel(1, 0, pr),
        T.PUBCOMP: lambda: Pubcomp(1, 0, pr),
        T.SUBSCRIBE: lambda: Subscribe(1, (Subscription("a"),), pr),
        T.SUBACK: lambda: Suback(1, (0,), pr),
        T.UNSUBSCRIBE: lambda: Unsubscribe(1, ("a",), pr),
        T.UNSUBACK: lambda: Unsuback(1, (0,), pr),
        T.DISCONNECT: lambda: Disconnect(0, pr),
        T.AUTH: lambda: Auth(0x18, pr),
    }[context]()


SAMPLE_PYTHON_VALUE: dict[ValueKind, object] = {
    ValueKind.BYTE: 1,
    ValueKind.TWO_BYTE: 513,
    ValueKind.FOUR_BYTE: 70_000,
    ValueKind.VARINT: (300,),
    ValueKind.STRING: "é/x",
    ValueKind.BINARY: b"\x00\xff",
    ValueKind.STRING_PAIR: (("k", "v"), ("k", "w")),
}


@pytest.mark.parametrize("spec", PROPERTY_SPECS, ids=lambda spec: spec.field)
def test_every_property_round_trips_wherever_allowed(spec: PropertySpec) -> None:
    values: dict[str, Any] = {spec.field: SAMPLE_PYTHON_VALUE[spec.kind]}
    if spec.field == "authentication_data":
        values["authentication_method"] = "M"
    pr = Properties(**values)
    for context in sorted(spec.allowed_in):
        from_client = context in FROM_CLIENT and not (
            context == T.PUBLISH and spec.field == "subscription_identifiers"
        )
        packet = _with(context, pr)
        wire = encode(packet, 5)
        if from_client:
            reader = _server_reader(context)
        else:
            reader = PacketReader(side="client", protocol_level=5)
        assert reader.feed(wire) == [packet], _name(context)


def _any_value(kind: ValueKind) -> st.SearchStrategy[Any]:
    """Values of the right Python type, valid or not: 0, out-of-range numbers, wildcards."""
    text = st.text(alphabet=st.sampled_from(["a", "/", "+", "#", "é", "\x00"]), max_size=4)
    return {
        ValueKind.BYTE: st.integers(-1, 256),
        ValueKind.TWO_BYTE: st.integers(-1, 0x10000),
        ValueKind.FOUR_BYTE: st.integers(-1, 1 << 32),
        ValueKind.VARINT: st.lists(st.integers(-1, 1 << 28), max_size=3).map(tuple),
        ValueKind.STRING: text,
        ValueKind.BINARY: st.binary(max_size=3),
        ValueKind.STRING_PAIR: st.lists(st.tuples(text, text), max_size=2).map(tuple),
    }[kind]


@st.composite
def _any_properties(draw: st.DrawFn, context: int) -> Properties:
    """Mostly properties the context allows (with any values), now and then any property."""
    anywhere = draw(st.integers(0, 9)) == 0
    specs = [spec for spec in PROPERTY_SPECS if anywhere or context in spec.allowed_in]
    values = {
        spec.field: draw(_any_value(spec.kind)) for spec in specs if draw(st.integers(0, 2)) == 0
    }
    return Properties(**values)


ALL_CONTEXTS = sorted(set(FROM_CLIENT) | set(FROM_SERVER))


@settings(max_examples=400, deadline=None)
@given(data=st.data(), context=st.sampled_from(ALL_CONTEXTS))
def test_encoder_never_writes_what_the_decoder_refuses(data: st.DataObject, context: int) -> None:
    """encode either refuses (ProtocolError) or produces bytes that decode to the same packet,
    for properties with arbitrary (also invalid) values in every packet type."""
    pr = data.draw(_any_properties(context))
    packet = _with(context, pr)
    try:
        wire = encode(packet, 5)
    except ProtocolError:
        return
    if context in FROM_CLIENT and not (context == T.PUBLISH and pr.subscription_identifiers):
        reader = _server_reader(context)
    else:
        reader = PacketReader(side="client", protocol_level=5)
    assert reader.feed(wire) == [packet]
