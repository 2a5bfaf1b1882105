"""How many of our files one packet crosses: the files of ``edge_broker`` and the switches
between them while the broker handles an anonymous CONNECT, and a QoS 1 PUBLISH to one QoS 1
subscriber, in process (the in-memory broker of tests/broker/engine_harness.py, no socket).

Counted with ``sys.settrace`` from the moment the bytes reach the broker's ``Connection`` until
the broker is idle again (CONNACK written; PUBACK to the publisher and PUBLISH to the subscriber
written). A *switch* is a change of the ``edge_broker`` file that executes, by a call or a
return; frames outside ``edge_broker`` (asyncio, the harness, the standard library) are skipped
and do not count, so ``a.py -> asyncio -> a.py`` is no switch. In brackets: the calls alone
whose caller is in another ``edge_broker`` file (a switch there and back counts once).

``--calls N`` also counts the Python calls the broker makes per message (functions of
``edge_broker`` only, counted with ``sys.setprofile``) over N messages 1→1, QoS 0 and QoS 1
(the subscriber's PUBACK included): a figure the machine's load cannot change, beside the CPU
per message of ``scripts/bench``, for comparing two trees (``--root``-less: run each tree's
copy of this script).

    .venv/bin/python scripts/trace_path.py            # both, with the files listed
    .venv/bin/python scripts/trace_path.py --brief    # the two figures only
    .venv/bin/python scripts/trace_path.py --brief --calls 300
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "broker")]

from engine_harness import MemoryBroker  # noqa: E402

from edge_broker.mqtt.codec import encode  # noqa: E402
from edge_broker.mqtt.packets import (  # noqa: E402
    Connect,
    Puback,
    Publish,
    Subscribe,
    Subscription,
)

PACKAGE = str(ROOT / "edge_broker") + "/"


def _ours(frame: FrameType | None) -> str | None:
    """The file of the nearest ``edge_broker`` frame at or above ``frame``."""
    while frame is not None and not frame.f_code.co_filename.startswith(PACKAGE):
        frame = frame.f_back
    return None if frame is None else frame.f_code.co_filename


class Crossing:
    """The sequence of ``edge_broker`` files that executed, consecutive repeats collapsed."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.calls_across = 0  # calls whose caller (nearest edge_broker frame) is another file

    def _at(self, frame: FrameType | None) -> None:
        while frame is not None and not frame.f_code.co_filename.startswith(PACKAGE):
            frame = frame.f_back
        if frame is None:
            return
        name = frame.f_code.co_filename[len(PACKAGE) :]
        if not self.files or self.files[-1] != name:
            self.files.append(name)

    def tracer(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "call":
            if frame.f_code.co_filename.startswith(PACKAGE):
                if self.files and _ours(frame.f_back) not in (None, _ours(frame)):
                    self.calls_across += 1
                self._at(frame)
            return self._local
        return None

    def _local(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "return":
            self._at(frame.f_back)
        return self._local

    def report(self, what: str, brief: bool) -> str:
        distinct = sorted(set(self.files))
        line = (
            f"{what}: {len(distinct)} files, {max(len(self.files) - 1, 0)} file switches "
            f"({self.calls_across} calls into another file)"
        )
        if brief:
            return line
        return line + "\n  " + "\n  ".join(distinct)


def traced(mb: MemoryBroker, client: Any, data: bytes) -> Crossing:
    """Trace the broker from ``data`` reaching it until it is idle. The clients' own decoding
    of what the broker writes (their codec, in process) waits until the trace has ended."""
    crossing = Crossing()
    held: list[tuple[Any, bytes]] = []
    for each in mb.clients:
        each.received = lambda data, each=each: held.append((each, data))
    deliver = client.transport.deliver
    mb.loop.call_soon(lambda: (sys.settrace(crossing.tracer), deliver(data)))
    mb.settle()
    sys.settrace(None)
    for each in mb.clients:
        del each.received
    for each, written in held:
        each.received(written)
    return crossing


def calls_per_message(mb: MemoryBroker, qos: int, messages: int) -> float:
    """Calls into ``edge_broker`` per message published 1→1 at ``qos`` (and, for QoS 1, the
    subscriber's PUBACK), after a warm-up; the clients' own decoding is not counted."""
    sub, pub = mb.client(), mb.client()
    sub.connect(f"calls-sub-{qos}")
    pub.connect(f"calls-pub-{qos}")
    topic = f"calls/{qos}"
    sub.send(Subscribe(1, (Subscription(topic, qos),)))
    sub.drain()
    counted = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal counted
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            counted += 1

    def run(client: Any, data: bytes, count: bool) -> None:
        held: list[tuple[Any, bytes]] = []
        for each in (sub, pub):
            each.received = lambda data, each=each: held.append((each, data))
        mb.loop.call_soon(client.transport.deliver, data)
        if count:
            sys.setprofile(profile)
        mb.settle()
        sys.setprofile(None)
        for each in (sub, pub):
            del each.received
        for each, written in held:
            each.received(written)

    for i in range(50 + messages):
        pid = i % 65535 + 1
        publish = Publish(topic, b"p" * 64, qos, packet_id=pid if qos else None)
        run(pub, encode(publish, 5), i >= 50)
        for delivered in sub.drain():
            if qos:
                assert isinstance(delivered, Publish) and delivered.packet_id is not None
                run(sub, encode(Puback(delivered.packet_id), 5), i >= 50)
        pub.drain()
    return counted / messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brief", action="store_true", help="the figures only")
    parser.add_argument("--calls", type=int, default=0, help="also count calls per message")
    args = parser.parse_args()
    brief = args.brief
    mb = MemoryBroker()
    try:
        # warm up once: first-time imports and caches are not the path
        warm = mb.client()
        warm.connect("warm")
        sub, pub = mb.client(), mb.client()
        connect = encode(Connect(5, "anon-trace", True, 60), 5)
        print(traced(mb, pub, connect).report("anonymous CONNECT (MQTT 5)", brief))
        pub.drain()
        sub.connect("sub-trace")
        sub.send(Subscribe(1, (Subscription("trace/t", 1),)))
        sub.drain()
        pub.send(Publish("trace/t", b"warm", 1, packet_id=1))  # the topic's caches once
        sub.drain()
        pub.drain()
        publish = encode(Publish("trace/t", b"payload", 1, packet_id=2), 5)
        crossing = traced(mb, pub, publish)
        print(crossing.report("QoS 1 PUBLISH to one QoS 1 subscriber", brief))
        assert [type(p).__name__ for p in pub.drain()] == ["Puback"], "no PUBACK"
        assert [p.payload for p in sub.drain()] == [b"payload"], "not delivered"
        for qos in (0, 1) if args.calls else ():
            per = calls_per_message(mb, qos, args.calls)
            print(f"1→1 QoS {qos}: {per:.1f} calls into edge_broker per message")
    finally:
        mb.close()


if __name__ == "__main__":
    main()
