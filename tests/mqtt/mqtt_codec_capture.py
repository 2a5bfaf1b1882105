"""A one-connection MQTT peer on a raw socket, built on the codec, to capture what real clients
send and to let real clients decode what the codec encodes."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field

from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import (
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
)


@dataclass
class Capture:
    """Everything one client sent, as raw bytes and as decoded packets."""

    raw: bytearray = field(default_factory=bytearray)
    packets: list[Packet] = field(default_factory=list)
    error: BaseException | None = None


class CapturePeer:
    """Accepts one connection on an ephemeral port and plays a minimal, well-behaved server.

    After answering a SUBSCRIBE it sends ``after_subscribe`` (packets encoded at the client's
    level), so subscribing clients receive something the codec encoded.
    """

    def __init__(self, after_subscribe: tuple[Packet, ...] = ()) -> None:
        self.after_subscribe = after_subscribe
        self.capture = Capture()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(1)
        self._listener.settimeout(20)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def join(self, timeout: float = 20) -> Capture:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the client did not finish its session"
        if self.capture.error is not None:
            raise self.capture.error
        return self.capture

    def _run(self) -> None:
        try:
            conn, _ = self._listener.accept()
            with conn:
                conn.settimeout(20)
                self._serve(conn)
        except BaseException as exc:  # reported to the test thread by join()
            self.capture.error = exc
        finally:
            self._listener.close()

    def _serve(self, conn: socket.socket) -> None:
        reader = PacketReader(side="server")
        while True:
            data = conn.recv(65536)
            if not data:
                return
            self.capture.raw += data
            for packet in reader.feed(data):
                self.capture.packets.append(packet)
                level = reader.protocol_level
                assert level is not None
                for reply in self._replies(packet, level):
                    conn.sendall(encode(reply, level))
                if isinstance(packet, Disconnect):
                    return

    def _replies(self, packet: Packet, level: int) -> tuple[Packet, ...]:
        if isinstance(packet, Connect):
            return (Connack(),)
        if isinstance(packet, Subscribe):
            granted = tuple(s.qos for s in packet.subscriptions)
            return (Suback(packet.packet_id, granted), *self.after_subscribe)
        if isinstance(packet, Unsubscribe):
            codes = (0,) * len(packet.topic_filters) if level == 5 else ()
            return (Unsuback(packet.packet_id, codes),)
        if isinstance(packet, Publish) and packet.qos == 1:
            assert packet.packet_id is not None
            return (Puback(packet.packet_id),)
        if isinstance(packet, Publish) and packet.qos == 2:
            assert packet.packet_id is not None
            return (Pubrec(packet.packet_id),)
        if isinstance(packet, Pubrel):
            return (Pubcomp(packet.packet_id),)
        if isinstance(packet, Pubrec):
            return (Pubrel(packet.packet_id),)
        if isinstance(packet, Pingreq):
            return (Pingresp(),)
        return ()
