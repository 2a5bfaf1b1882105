"""Differential test against mqtt-packet, the codec inside MQTT.js (tests/node/node_modules).

Both directions, for every packet type and level: what we encode, mqtt-packet parses to the same
packet; what mqtt-packet generates, we decode to the same packet. User properties are compared
as sorted pairs because mqtt-packet groups them by name.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mqtt_codec_strategies import LEVELS, client_packets, connects, server_packets

from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
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
from edge_broker.mqtt.reason_codes import (
    AUTH_REASON_CODES_FROM_CLIENT,
    DISCONNECT_REASON_CODES_FROM_CLIENT,
)

HERE = Path(__file__).parent
NODE_MODULES = HERE.parent / "node" / "node_modules"
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_MODULES / "mqtt-packet").is_dir(),
    reason="mqtt-packet not installed: scripts/test runs npm install in tests/node",
)

# Our Properties field → mqtt-packet property name; booleans travel as true/false there.
JS_NAMES = {
    "payload_format_indicator": "payloadFormatIndicator",
    "message_expiry_interval": "messageExpiryInterval",
    "content_type": "contentType",
    "response_topic": "responseTopic",
    "correlation_data": "correlationData",
    "subscription_identifiers": "subscriptionIdentifier",
    "session_expiry_interval": "sessionExpiryInterval",
    "assigned_client_identifier": "assignedClientIdentifier",
    "server_keep_alive": "serverKeepAlive",
    "authentication_method": "authenticationMethod",
    "authentication_data": "authenticationData",
    "request_problem_information": "requestProblemInformation",
    "will_delay_interval": "willDelayInterval",
    "request_response_information": "requestResponseInformation",
    "response_information": "responseInformation",
    "server_reference": "serverReference",
    "reason_string": "reasonString",
    "receive_maximum": "receiveMaximum",
    "topic_alias_maximum": "topicAliasMaximum",
    "topic_alias": "topicAlias",
    "maximum_qos": "maximumQoS",
    "retain_available": "retainAvailable",
    "user_properties": "userProperties",
    "maximum_packet_size": "maximumPacketSize",
    "wildcard_subscription_available": "wildcardSubscriptionAvailable",
    "subscription_identifier_available": "subscriptionIdentifiersAvailable",
    "shared_subscription_available": "sharedSubscriptionAvailable",
}
BOOLEANS = {
    "payload_format_indicator",
    "request_problem_information",
    "request_response_information",
    "retain_available",
    "wildcard_subscription_available",
    "subscription_identifier_available",
    "shared_subscription_available",
}
BINARY = {"correlation_data", "authentication_data"}


class Oracle:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            ["node", str(HERE / "mqtt_packet_oracle.js"), str(NODE_MODULES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    node = Oracle()
    yield node
    node.close()


# ---- our packets ⇄ mqtt-packet's JSON ----


def _canonical(props: Properties) -> Properties:
    return replace(props, user_properties=tuple(sorted(props.user_properties)))


def canonical(packet: Packet) -> Packet:
    """The same packet with user properties sorted (mqtt-packet groups them by name)."""
    if isinstance(packet, Connect) and packet.will is not None:
        packet = replace(
            packet, will=replace(packet.will, properties=_canonical(packet.will.properties))
        )
    if hasattr(packet, "properties"):
        packet = replace(packet, properties=_canonical(packet.properties))  # type: ignore[arg-type]
    return packet


def _hex(data: bytes) -> dict[str, str]:
    return {"hex": data.hex()}


def props_to_js(props: Properties, publish: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(Properties):
        value = getattr(props, f.name)
        if value is None or value == ():
            continue
        name = JS_NAMES[f.name]
        if f.name in BOOLEANS:
            out[name] = bool(value)
        elif f.name in BINARY:
            out[name] = _hex(value)
        elif f.name == "user_properties":
            grouped: dict[str, list[str]] = {}
            for key, text in value:
                grouped.setdefault(key, []).append(text)
            out[name] = {k: v[0] if len(v) == 1 else v for k, v in grouped.items()}
        elif f.name == "subscription_identifiers":
            out[name] = list(value) if publish else value[0]
        else:
            out[name] = value
    return out


def props_from_js(js: dict[str, Any] | None) -> Properties:
    values: dict[str, Any] = {}
    reverse = {v: k for k, v in JS_NAMES.items()}
    for name, value in (js or {}).items():
        field = reverse[name]
        if field in BOOLEANS:
            values[field] = int(value)
        elif field in BINARY:
            values[field] = bytes.fromhex(value["hex"])
        elif field == "user_properties":
            values[field] = tuple(
                (k, v) for k, vs in value.items() for v in (vs if isinstance(vs, list) else [vs])
            )
        elif field == "subscription_identifiers":
            values[field] = tuple(value) if isinstance(value, list) else (value,)
        else:
            values[field] = value
    return Properties(**values)


def to_js(packet: Packet, level: int) -> dict[str, Any]:
    """mqtt-packet's object for ``packet`` (what mqtt.generate takes)."""
    props = props_to_js(getattr(packet, "properties", Properties()), isinstance(packet, Publish))
    js: dict[str, Any] = {"properties": props} if level == 5 and props else {}
    if isinstance(packet, Connect):
        js.update(
            cmd="connect",
            protocolId=packet.protocol_name,
            protocolVersion=level,
            clientId=packet.client_id,
            clean=packet.clean_start,
            keepalive=packet.keep_alive,
        )
        if packet.username is not None:
            js["username"] = packet.username
        if packet.password is not None:
            js["password"] = _hex(packet.password)
        if packet.will is not None:
            will = packet.will
            js["will"] = {
                "topic": will.topic,
                "payload": _hex(will.payload),
                "qos": will.qos,
                "retain": will.retain,
            }
            will_props = props_to_js(will.properties, False)
            if level == 5 and will_props:
                js["will"]["properties"] = will_props
    elif isinstance(packet, Connack):
        js.update(cmd="connack", sessionPresent=packet.session_present)
        js["reasonCode" if level == 5 else "returnCode"] = packet.reason_code
    elif isinstance(packet, Publish):
        js.update(
            cmd="publish",
            topic=packet.topic,
            payload=_hex(packet.payload),
            qos=packet.qos,
            retain=packet.retain,
            dup=packet.dup,
        )
        if packet.qos:
            js["messageId"] = packet.packet_id
    elif isinstance(packet, Puback | Pubrec | Pubrel | Pubcomp):
        js.update(
            cmd=type(packet).__name__.lower(),
            messageId=packet.packet_id,
            reasonCode=packet.reason_code,
        )
    elif isinstance(packet, Subscribe):
        js.update(
            cmd="subscribe",
            messageId=packet.packet_id,
            subscriptions=[
                {
                    "topic": s.topic_filter,
                    "qos": s.qos,
                    "nl": s.no_local,
                    "rap": s.retain_as_published,
                    "rh": s.retain_handling,
                }
                for s in packet.subscriptions
            ],
        )
    elif isinstance(packet, Suback):
        js.update(cmd="suback", messageId=packet.packet_id, granted=list(packet.reason_codes))
    elif isinstance(packet, Unsubscribe):
        js.update(
            cmd="unsubscribe",
            messageId=packet.packet_id,
            unsubscriptions=list(packet.topic_filters),
        )
    elif isinstance(packet, Unsuback):
        js.update(cmd="unsuback", messageId=packet.packet_id, granted=list(packet.reason_codes))
    elif isinstance(packet, Disconnect | Auth):
        js.update(cmd=type(packet).__name__.lower(), reasonCode=packet.reason_code)
    else:
        js["cmd"] = type(packet).__name__.lower()
    return js


def from_js(js: dict[str, Any], level: int) -> Packet:
    """Our packet for mqtt-packet's parsed object."""
    cmd = js["cmd"]
    props = props_from_js(js.get("properties"))
    if cmd == "connect":
        will = None
        if js.get("will"):
            w = js["will"]
            will = Will(
                w["topic"],
                bytes.fromhex(w["payload"]["hex"]),
                w["qos"],
                w["retain"],
                props_from_js(w.get("properties")),
            )
        password = js.get("password")
        return Connect(
            js["protocolVersion"],
            js["clientId"],
            js["clean"],
            js["keepalive"],
            will,
            js.get("username"),
            bytes.fromhex(password["hex"]) if password else None,
            props,
            js["protocolId"],
        )
    if cmd == "connack":
        code = js.get("reasonCode", js.get("returnCode", 0))
        return Connack(js["sessionPresent"], code, props)
    if cmd == "publish":
        return Publish(
            js["topic"],
            bytes.fromhex(js["payload"]["hex"]),
            js["qos"],
            js["retain"],
            js["dup"],
            js.get("messageId") if js["qos"] else None,
            props,
        )
    acks = {"puback": Puback, "pubrec": Pubrec, "pubrel": Pubrel, "pubcomp": Pubcomp}
    if cmd in acks:
        return acks[cmd](js["messageId"], js.get("reasonCode", 0), props)  # type: ignore[no-any-return]
    if cmd == "subscribe":
        return Subscribe(
            js["messageId"],
            tuple(
                Subscription(
                    s["topic"], s["qos"], s.get("nl", False), s.get("rap", False), s.get("rh", 0)
                )
                for s in js["subscriptions"]
            ),
            props,
        )
    if cmd == "suback":
        return Suback(js["messageId"], tuple(js["granted"]), props)
    if cmd == "unsubscribe":
        return Unsubscribe(js["messageId"], tuple(js["unsubscriptions"]), props)
    if cmd == "unsuback":
        return Unsuback(
            js["messageId"], tuple(js.get("granted") or ()) if level == 5 else (), props
        )
    if cmd == "disconnect":
        return Disconnect(js.get("reasonCode", 0), props)
    if cmd == "auth":
        return Auth(js.get("reasonCode", 0), props)
    return Pingreq() if cmd == "pingreq" else Pingresp()


# ---- the differential properties ----

SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _any_packet(level: int) -> st.SearchStrategy[Packet]:
    return st.one_of(connects(level), client_packets(level), server_packets(level))


@pytest.mark.parametrize("level", LEVELS)
@SETTINGS
@given(data=st.data())
def test_mqtt_packet_parses_what_we_encode(oracle: Oracle, level: int, data: st.DataObject) -> None:
    packet = data.draw(_any_packet(level))
    # mqtt-packet 9 refuses the spec's short AUTH (Remaining Length 0 = Success, §3.15.2.1),
    # and its parser drops repeats of a user property whose first value is "" (parser.js
    # tests the value for truthiness).
    assume(packet != Auth() and not _empty_value_repeated(packet))
    answer = oracle.ask({"op": "parse", "version": level, "hex": encode(packet, level).hex()})
    assert "error" not in answer, (packet, answer)
    [parsed] = answer["packets"]
    assert canonical(from_js(parsed, level)) == canonical(packet)


def _empty_value_repeated(packet: Packet) -> bool:
    blocks = [getattr(packet, "properties", Properties())]
    if isinstance(packet, Connect) and packet.will is not None:
        blocks.append(packet.will.properties)
    for props in blocks:
        first: dict[str, str] = {}
        for key, value in props.user_properties:
            if key in first and first[key] == "":
                return True
            first.setdefault(key, value)
    return False


def _generator_accepts(packet: Packet, level: int) -> bool:
    """Packets that are valid MQTT but that mqtt-packet's generator refuses by its own policy."""
    if isinstance(packet, Connect) and level == 3 and not packet.client_id:
        return False  # "clientId must be supplied before 3.1.1"
    if isinstance(packet, Connect) and not (packet.client_id or packet.clean_start):
        return False  # "clientId must be given if cleanSession set to 0" (right for 3.1.1 only)
    if isinstance(packet, Connect) and packet.password is not None and packet.username is None:
        return False  # "Username is required to use password" (MQTT 5 allows it, §3.1.2.9)
    return True


@pytest.mark.parametrize("level", LEVELS)
@SETTINGS
@given(data=st.data())
def test_we_decode_what_mqtt_packet_generates(
    oracle: Oracle, level: int, data: st.DataObject
) -> None:
    packet = data.draw(_any_packet(level))
    assume(_generator_accepts(packet, level))
    answer = oracle.ask({"op": "generate", "version": level, "packet": to_js(packet, level)})
    assert "error" not in answer, (packet, answer)
    wire = bytes.fromhex(answer["hex"])
    assert [canonical(p) for p in _reader_for(packet, level).feed(wire)] == [canonical(packet)]


def _reader_for(packet: Packet, level: int) -> PacketReader:
    """A reader on the side that may receive ``packet``."""
    if isinstance(packet, Connect):
        return PacketReader(side="server")
    from_server = isinstance(packet, Connack | Suback | Unsuback | Pingresp) or (
        isinstance(packet, Publish) and bool(packet.properties.subscription_identifiers)
    )
    if level == 5 and isinstance(packet, Disconnect):
        from_server = packet.reason_code not in DISCONNECT_REASON_CODES_FROM_CLIENT
    if isinstance(packet, Auth):
        from_server = packet.reason_code not in AUTH_REASON_CODES_FROM_CLIENT
    return PacketReader(side="client" if from_server else "server", protocol_level=level)
