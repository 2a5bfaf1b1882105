"""Helpers for the persistence tests (issue 8): a broker config with ``[persistence]``, a raw
MQTT client (tests/broker/broker_raw.py) and flows that publish, collect acknowledgements and
drain a resumed session."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))

from broker_raw import RawClient  # noqa: E402

from edge_broker.mqtt.packets import (  # noqa: E402
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
)

__all__ = [
    "RawClient",
    "persistent_config",
    "subscribe",
    "drain",
    "EXPIRY",
    "props_for",
    "StrictReceiver",
]

EXPIRY = Properties(session_expiry_interval=3600)


def persistent_config(state: Path, durability: str = "sync", **extra: Any) -> dict[str, Any]:
    return {
        "persistence": {
            "enabled": True,
            "state_dir": str(state),
            "durability": durability,
            **extra,
        },
        "sys": {"interval": 1},
    }


def subscribe(c: RawClient, *filters: tuple[str, int], pid: int = 1) -> Suback:
    c.send(Subscribe(pid, tuple(Subscription(f, q) for f, q in filters)))
    return c.expect(Suback)


def drain(
    c: RawClient,
    quiet: float = 1.0,
    ack: bool = True,
    held: set[int] | None = None,
    complete: bool = True,
) -> list[Publish]:
    """Every PUBLISH until ``quiet`` seconds pass without one; QoS 1/2 acknowledged fully
    (QoS 2 receiver keeps the packet ids awaiting PUBREL, so a resent PUBLISH with one of them
    is not counted twice: method B of MQTT 5 §4.3.3). Pass ``held`` to keep that state across
    connections (a client resuming its session); ``complete=False`` leaves PUBREL unanswered."""
    got: list[Publish] = []
    held = set() if held is None else held
    while True:
        try:
            packet = c.recv(quiet)
        except (TimeoutError, EOFError):
            return got
        if isinstance(packet, Publish):
            pid = packet.packet_id or 0
            if packet.qos == 2:
                if pid not in held:
                    got.append(packet)
                    held.add(pid)
                if ack:
                    c.send(Pubrec(pid))
            else:
                got.append(packet)
                if packet.qos == 1 and ack:
                    c.send(Puback(pid))
        elif isinstance(packet, Pubrel) and complete:
            held.discard(packet.packet_id)
            c.send(Pubcomp(packet.packet_id))


def props_for(level: int, **kw: Any) -> Properties:
    """CONNECT properties: ``kw`` in MQTT 5 (3.1.1 has none; its clean=False session never
    expires)."""
    return Properties(**kw) if level == 5 else Properties()


class StrictReceiver:
    """What a strict QoS 2 receiver (method B of MQTT 5 §4.3.3) keeps across connections: the
    packet ids it holds (PUBLISH received, PUBREL not yet) with the payload each holds, and
    every payload delivered to its application. ``take`` checks each PUBLISH against it:
    - a packet id it holds arriving with another payload is an id reused by the broker
      (the strict client drops the message as a duplicate: lost);
    - a payload delivered before arriving under a packet id not held is a QoS 2 duplicate.
    """

    def __init__(self) -> None:
        self.held: dict[int, bytes] = {}
        self.delivered: list[bytes] = []
        self.errors: list[str] = []

    def take(self, packet: Publish) -> bool:
        """Account for ``packet``; True when it is a new delivery."""
        pid = packet.packet_id or 0
        if packet.qos != 2:
            self.delivered.append(packet.payload)
            return True
        if pid in self.held:
            if self.held[pid] != packet.payload:
                self.errors.append(
                    f"packet id {pid} reused for {packet.payload!r} while held "
                    f"for {self.held[pid]!r}"
                )
            return False
        if packet.payload in self.delivered:
            self.errors.append(f"QoS 2 duplicate: {packet.payload!r} again under id {pid}")
        self.held[pid] = packet.payload
        self.delivered.append(packet.payload)
        return True

    def run(self, c: RawClient, quiet: float, ack: bool = True) -> list[Publish]:
        """Receive until ``quiet`` seconds pass without a packet; acknowledge when ``ack``."""
        got: list[Publish] = []
        while True:
            try:
                packet = c.recv(quiet)
            except (TimeoutError, EOFError):
                return got
            if isinstance(packet, Publish):
                got.append(packet)
                self.take(packet)
                if ack and packet.qos == 1:
                    c.send(Puback(packet.packet_id or 0))
                elif ack and packet.qos == 2:
                    c.send(Pubrec(packet.packet_id or 0))
            elif isinstance(packet, Pubrel) and ack:
                self.held.pop(packet.packet_id, None)
                c.send(Pubcomp(packet.packet_id))
