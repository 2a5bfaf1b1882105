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

__all__ = ["RawClient", "persistent_config", "subscribe", "drain", "EXPIRY"]

EXPIRY = Properties(session_expiry_interval=3600)


def persistent_config(state: Path, durability: str = "sync", **extra: Any) -> dict[str, Any]:
    return {"persistence": {"enabled": True, "state_dir": str(state), "durability": durability,
                            **extra},
            "sys": {"interval": 1}}


def subscribe(c: RawClient, *filters: tuple[str, int], pid: int = 1) -> Suback:
    c.send(Subscribe(pid, tuple(Subscription(f, q) for f, q in filters)))
    return c.expect(Suback)


def drain(c: RawClient, quiet: float = 1.0, ack: bool = True,
          held: set[int] | None = None, complete: bool = True) -> list[Publish]:
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
