"""Outbound QoS 1/2 keep their packet ids and are resent with DUP after a reconnect, and after
a kill -9 of the gateway (issue 19): the remote here is a scripted MQTT server on our codec, so
every packet the bridge sends is seen as it is on the wire."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path

from bridge_support import gateway_toml, publish, wait_log

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))

from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import (  # noqa: E402
    NO_PROPERTIES,
    Connack,
    Connect,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
)


class ScriptedRemote:
    """Accepts bridge connections one at a time and hands out their packets."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.conn: socket.socket | None = None
        self.reader: PacketReader | None = None
        self.pending: list = []

    def accept(
        self,
        session_present: bool = False,
        timeout: float = 15.0,
        properties: Properties = NO_PROPERTIES,
    ) -> Connect:
        self.server.settimeout(timeout)
        self.conn, _ = self.server.accept()
        self.conn.settimeout(timeout)
        self.reader = PacketReader(side="server")
        self.pending = []
        connect = self.recv()
        assert isinstance(connect, Connect)
        self.level = connect.protocol_level
        self.send(Connack(session_present, 0, properties))
        return connect

    def send(self, packet) -> None:
        assert self.conn is not None
        self.conn.sendall(encode(packet, self.level))

    def recv(self):
        assert self.conn is not None and self.reader is not None
        while not self.pending:
            data = self.conn.recv(65536)
            if not data:
                raise EOFError
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def publishes(self, count: int) -> list[Publish]:
        got = []
        while len(got) < count:
            packet = self.recv()
            if isinstance(packet, Pingreq):
                self.send(Pingresp())
            elif isinstance(packet, Publish):
                got.append(packet)
        return got

    def quiet(self, seconds: float) -> bool:
        """True when nothing but PINGREQ arrives for ``seconds``."""
        assert self.conn is not None and self.reader is not None
        self.conn.settimeout(seconds)
        try:
            while True:
                if self.pending:
                    packet = self.pending.pop(0)
                    if not isinstance(packet, Pingreq):
                        self.pending.insert(0, packet)
                        return False
                    continue
                data = self.conn.recv(65536)
                if not data:
                    return True
                self.pending.extend(self.reader.feed(data))
        except TimeoutError:
            return True
        finally:
            self.conn.settimeout(15.0)

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def close(self) -> None:
        self.drop()
        self.server.close()


def config(port: int, protocol: str = "5", state: Path | None = None) -> str:
    extra = f'[persistence]\nstate_dir = "{state}"\ndurability = "sync"\n' if state else ""
    return gateway_toml(
        [
            {
                "name": "cloud",
                "address": "127.0.0.1",
                "port": port,
                "protocol": protocol,
                "client_id": "gw-resend",
                "reconnect_min": 0.05,
                "reconnect_max": 0.2,
                "topics": [{"direction": "out", "local": "r/#", "qos": 2}],
            }
        ],
        extra=extra,
    )


def test_resend_with_dup_and_the_same_packet_ids_after_a_reconnect(broker_factory):
    remote = ScriptedRemote()
    try:
        gw = broker_factory(config(remote.port, "3.1.1"))
        connect = remote.accept()
        assert (connect.clean_start, connect.protocol_level) == (False, 4)
        publish(gw.port, [("r/1", b"one", 1), ("r/2", b"two", 2), ("r/3", b"three", 2)])
        first = remote.publishes(3)
        assert [(p.topic, p.qos, p.dup) for p in first] == [
            ("r/1", 1, False),
            ("r/2", 2, False),
            ("r/3", 2, False),
        ]
        remote.send(
            Pubrec(first[1].packet_id)
        )  # r/2 reached the remote; r/1 and r/3 not acknowledged
        assert remote.recv() == Pubrel(first[1].packet_id)
        remote.drop()
        remote.accept(session_present=True)
        again = [remote.recv() for _ in range(3)]
        # in the original order: r/1 again (DUP, same id), PUBREL for r/2 (never its PUBLISH),
        # r/3 again
        assert again[0] == Publish("r/1", b"one", 1, False, True, first[0].packet_id)
        assert again[1] == Pubrel(first[1].packet_id)
        assert again[2] == Publish("r/3", b"three", 2, False, True, first[2].packet_id)
        wait_log(gw, "bridge cloud disconnected")
    finally:
        remote.close()


def test_packet_ids_survive_a_kill_9_of_the_gateway(broker_factory, tmp_path):
    remote = ScriptedRemote()
    try:
        text = config(remote.port, "5", tmp_path / "state")
        gw = broker_factory(text)
        connect = remote.accept()
        # a persistent session on the remote: clean start 0 and the default Session Expiry
        assert (connect.clean_start, connect.properties.session_expiry_interval) == (False, 86400)
        publish(gw.port, [("r/a", b"A", 2), ("r/b", b"B", 2)])
        first = remote.publishes(2)
        remote.send(Pubrec(first[0].packet_id))
        assert remote.recv() == Pubrel(first[0].packet_id)
        gw.process.send_signal(signal.SIGKILL)
        gw.process.wait(10)
        remote.drop()
        gw2 = broker_factory(text)
        remote.accept(session_present=True)
        again = [remote.recv() for _ in range(2)]
        # r/a: PUBREL when its PUBREC was logged before the kill, else its PUBLISH again with
        # DUP and the same id (the remote recognises the id: still exactly once)
        if isinstance(again[0], Publish):
            assert (again[0].topic, again[0].dup, again[0].packet_id) == (
                "r/a",
                True,
                first[0].packet_id,
            )
            remote.send(Pubrec(first[0].packet_id))
            assert remote.recv() == Pubrel(first[0].packet_id)
        else:
            assert again[0] == Pubrel(first[0].packet_id)
        assert (again[1].topic, again[1].dup, again[1].packet_id) == (
            "r/b",
            True,
            first[1].packet_id,
        )
        remote.send(Pubcomp(first[0].packet_id))
        remote.send(Pubrec(first[1].packet_id))
        assert remote.recv() == Pubrel(first[1].packet_id)
        remote.send(Pubcomp(first[1].packet_id))
        wait_log(gw2, "2 queued messages recovered")
    finally:
        remote.close()


def test_a_silent_remote_is_detected_by_keep_alive(broker_factory):
    remote = ScriptedRemote()
    try:
        text = config(remote.port).replace(
            'client_id = "gw-resend"', 'client_id = "gw-resend"\nkeep_alive = 5'
        )
        gw = broker_factory(text)
        remote.accept()
        assert isinstance(
            remote.recv(), Pingreq
        )  # after keep_alive seconds of silence; never answered
        text = wait_log(
            gw, r"bridge cloud disconnected: no packet from the remote for 7.5 s", timeout=15
        )
        remote.drop()
        remote.accept()  # and it reconnects
    finally:
        remote.close()


def test_inbound_qos2_resend_is_routed_once(broker_factory):
    from bridge_support import Collector

    remote = ScriptedRemote()
    try:
        gw = broker_factory(
            gateway_toml(
                [
                    {
                        "name": "cloud",
                        "address": "127.0.0.1",
                        "port": remote.port,
                        "protocol": "5",
                        "topics": [{"direction": "in", "local": "cmd/#", "qos": 2}],
                    }
                ]
            )
        )
        remote.accept()
        subscribe = remote.recv()
        assert [(s.topic_filter, s.qos, s.no_local) for s in subscribe.subscriptions] == [
            ("cmd/#", 2, True)
        ]
        device = Collector(gw.port, [("cmd/#", 2)])
        try:
            remote.send(Publish("cmd/reboot", b"now", 2, False, False, 5))
            assert remote.recv() == Pubrec(5)
            remote.send(Publish("cmd/reboot", b"now", 2, False, True, 5))  # resent (DUP)
            assert remote.recv() == Pubrec(5)
            remote.send(Pubrel(5))
            assert remote.recv() == Pubcomp(5)
            got = device.wait_for(2, 2)
        finally:
            device.close()
        assert got == [("cmd/reboot", b"now", 2, False)]
    finally:
        remote.close()


def test_an_oversized_packet_from_the_remote_ends_the_connection(broker_factory):
    remote = ScriptedRemote()
    try:
        text = config(remote.port).replace(
            "[[bridges]]", "[limits]\nmax_packet_size = 4096\n\n[[bridges]]"
        )
        gw = broker_factory(text)
        connect = remote.accept()
        assert connect.properties.maximum_packet_size == 4096  # announced to the remote
        remote.send(Publish("r/x", bytes(10_000), 0))
        wait_log(
            gw,
            r"bridge cloud (disconnected|cannot connect).*exceeds the maximum packet size of 4096",
        )
        remote.drop()
        remote.accept()  # reconnects; the gateway is fine
        assert gw.alive()
    finally:
        remote.close()


def test_resends_respect_the_remotes_receive_maximum(broker_factory):
    remote = ScriptedRemote()
    try:
        gw = broker_factory(config(remote.port, "5"))
        remote.accept()
        publish(gw.port, [(f"r/{i}", str(i).encode(), 1) for i in range(5)])
        first = remote.publishes(5)  # none acknowledged
        remote.drop()
        remote.accept(session_present=True, properties=Properties(receive_maximum=2))
        again = [remote.recv() for _ in range(2)]
        assert [(p.topic, p.dup, p.packet_id) for p in again] == [
            (p.topic, True, p.packet_id) for p in first[:2]
        ]
        assert remote.quiet(0.5)  # no more than Receive Maximum unacknowledged
        remote.send(Puback(first[0].packet_id))
        nxt = remote.recv()
        assert (nxt.topic, nxt.dup, nxt.packet_id) == (first[2].topic, True, first[2].packet_id)
        assert remote.quiet(0.5)
    finally:
        remote.close()
