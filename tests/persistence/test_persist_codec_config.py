"""Records of broker/persist/codec.py round-trip; damaged ones raise RecordError naming the record;
``[persistence]`` parses with clear errors and one state directory serves claims and broker."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.broker.message import Message
from edge_broker.broker.persist.codec import (
    RecordError,
    decode_identity,
    decode_message,
    decode_outgoing,
    decode_will,
    encode_identity,
    encode_outgoing,
    encode_will,
)
from edge_broker.broker.persist.tables import BROKER_LOG, log_path
from edge_broker.broker.session import Outgoing
from edge_broker.claims.runtime import store_path
from edge_broker.config import ConfigError, loads_config
from edge_broker.identity import Identity
from edge_broker.mqtt.packets import Properties, Will

text = st.text(max_size=20)
props = st.builds(
    Properties,
    payload_format_indicator=st.none() | st.sampled_from([0, 1]),
    message_expiry_interval=st.none() | st.integers(0, 2**32 - 1),
    content_type=st.none() | text,
    response_topic=st.none() | text,
    correlation_data=st.none() | st.binary(max_size=16),
    user_properties=st.lists(st.tuples(text, text), max_size=3).map(tuple),
)
messages = st.builds(
    Message,
    topic=text,
    payload=st.binary(max_size=64),
    qos=st.sampled_from([0, 1, 2]),
    retain=st.booleans(),
    properties=props,
    expires_at=st.none() | st.floats(0, 1e6, allow_nan=False),
    origin=st.none() | text,
)


@settings(max_examples=300)
@given(
    messages,
    st.sampled_from([1, 2]),
    st.booleans(),
    st.lists(st.integers(1, 268_435_455), max_size=3).map(tuple),
)
def test_outgoing_round_trip(message: Message, qos: int, retain: bool, sub_ids: tuple[int, ...]):
    import cbor2

    raw = cbor2.loads(
        cbor2.dumps(encode_outgoing("cid", Outgoing(message, qos, retain, sub_ids), 100.0, 5000.0))
    )
    # decoded in a new process (monotonic clock restarted at 3.0), 100 s later on the wall
    cid, back = decode_outgoing(raw, "m", 3.0, 5100.0)
    assert cid == "cid" and back.qos == qos and back.retain == retain
    assert back.sub_ids == sub_ids
    got = back.message
    assert (got.topic, got.payload, got.qos, got.retain, got.properties, got.origin) == (
        message.topic,
        message.payload,
        message.qos,
        message.retain,
        message.properties,
        message.origin,
    )
    if message.expires_at is None:
        assert got.expires_at is None
    else:
        # the same wall-clock deadline: 100 s less left, on the new monotonic clock
        assert got.expires_at == pytest.approx(message.expires_at - 100.0 + 3.0 - 100.0)


@settings(max_examples=200)
@given(text, st.binary(max_size=32), st.sampled_from([0, 1, 2]), st.booleans(), props)
def test_will_round_trip(topic, payload, qos, retain, properties):
    will = Will(topic, payload, qos, retain, properties)
    assert decode_will(encode_will(will), "w") == will


def test_identity_keeps_names_not_runtime_parts():
    identity = Identity(
        "c",
        "token",
        tenant="t1",
        username="u",
        roles=("a", "b"),
        grants=object(),
        remote_address=("1.2.3.4", 5),
    )
    back = decode_identity(encode_identity(identity), "s")
    assert (back.client_id, back.method, back.tenant, back.username, back.roles) == (
        "c",
        "token",
        "t1",
        "u",
        ("a", "b"),
    )
    assert back.grants is None and back.remote_address is None


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        ["t"],
        ["t", "not bytes", 1, False, None, None, None],
        ["t", b"", 7, False, None, None, None],
        ["t", b"", 1, False, {"bogus": 1}, None, None],
        ["t", b"", 1, False, None, "soon", None],
    ],
)
def test_damaged_message_records_raise_record_error(raw):
    with pytest.raises(RecordError, match="^retained 'x'"):
        decode_message(raw, "retained 'x'", 0.0, 0.0)


def test_persistence_section_parses_and_names_bad_keys():
    config = loads_config(
        '[persistence]\nenabled = true\nstate_dir = "/srv/eb"\n'
        'durability = "interval"\ninterval_ms = 20\n'
    )
    p = config.persistence
    assert (p.enabled, p.state_dir, p.durability, p.interval_ms) == (
        True,
        "/srv/eb",
        "interval",
        20,
    )
    assert log_path(config).as_posix() == f"/srv/eb/{BROKER_LOG}"
    assert store_path(config).parent == log_path(config).parent  # claims share the directory
    with pytest.raises(ConfigError) as err:
        loads_config('[persistence]\ndurability = "always"\nstate_dir = ""\nfsync = 1\n')
    message = str(err.value) + "".join(str(p) for p in err.value.problems)
    assert "persistence.durability" in message and "'sync'" in message
    assert "persistence.state_dir" in message and "persistence.fsync" in message


def test_state_dir_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("EDGE_BROKER_STATE_DIR", str(tmp_path))
    assert log_path(loads_config("")) == tmp_path / BROKER_LOG
