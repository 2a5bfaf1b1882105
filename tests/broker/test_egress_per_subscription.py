"""Issue 21 item 4 over real sockets: gates 5-6 check only the deliveries of subscriptions where
they can deny one (``SubscriptionEntry.egress``, decided at subscribe time and by every
re-judgement: reload, resume, restart). The broker runs in this process (in its own thread and
event loop) so the tests can read each subscription's mark and count the per-delivery checks
(a counting wrapper around the real ``Policy.check_deliver``); the clients are raw sockets.

Leak tests: a subscription that needed no check starts being checked, before the next message,
once a reload adds an egress deny rule that meets it, and a restart with two principals restores
each subscription's mark for its own principal."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from edge_broker.broker.reload import apply_config
from edge_broker.broker.server import Broker
from edge_broker.config import loads_config
from edge_broker.mqtt.packets import Properties, Publish
from tests.authz.acl_paho import password_file
from tests.broker.broker_raw import RawClient

USERS = {"guest": "guest-pw", "staff": "staff-pw", "writer": "writer-pw"}


def acl(*deny: str) -> str:
    """Default allow; the guests may not receive ``deny`` (egress, every message kind)."""
    return f"""
[acl]
enabled = true
default_permission = "allow"

[[acl.rules]]
id = "guests-see-no-secrets"
messages = ["put", "delete", "query", "reply"]
flows = ["egress"]
permission = "deny"
key_exprs = {list(deny)!r}

[[acl.subjects]]
id = "guests"
usernames = ["guest"]

[[acl.policies]]
rules = ["guests-see-no-secrets"]
subjects = ["guests"]
""".replace("'", '"')


def config(d: Path, *deny: str, persistence: bool = False) -> str:
    passwd = d / "passwd"
    if not passwd.exists():  # written again, new salts would end the connections at a reload
        password_file(passwd, USERS)
    persist = f'[persistence]\nenabled = true\nstate_dir = "{d / "state"}"\n' if persistence else ""
    return (
        '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n'
        'auth_methods = ["password"]\n'
        f'[sys]\ninterval = 0\n[passwords]\nfile = "{passwd}"\n{persist}{acl(*deny)}'
    )


class Running:
    """A Broker on its own event loop in a thread."""

    def __init__(self, text: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(loads_config(text, "<test>"))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self.broker.start())
        self.port = self.broker.bound[0][3]

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def reload(self, text: str) -> None:
        result = self.call(apply_config(self.broker, loads_config(text, "<test>"), "test"))
        assert result.ok, result.message

    def marks(self, client_id: str) -> dict[str, bool]:
        async def read() -> dict[str, bool]:
            (session,) = [s for s in self.broker.sessions if s.client_id == client_id]
            return {f: e.egress for f, e in session.subscriptions.items()}

        return dict(self.call(read()))

    def stop(self) -> None:
        self.call(self.broker.shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@contextmanager
def running(text: str) -> Iterator[Running]:
    r = Running(text)
    try:
        yield r
    finally:
        r.stop()


def user(r: Running, name: str, client_id: str, **kw: Any) -> RawClient:
    c = RawClient("127.0.0.1", r.port)
    ack = c.connect(client_id, username=name, password=USERS[name].encode(), **kw)
    assert ack.reason_code == 0, ack
    return c


def subscribe(c: RawClient, *filters: str, qos: int = 0) -> None:
    for i, f in enumerate(filters, 1):
        assert c.subscribe(f, qos, packet_id=i).reason_codes == (qos,)


def topics(c: RawClient, window: float = 0.4) -> list[str]:
    return sorted(p.topic for p in c.publishes(window))


def publish(c: RawClient, *names: str) -> None:
    for t in names:
        c.send(Publish(t, b"x", 0))


def test_only_subscriptions_that_meet_a_deny_rule_are_checked_and_reload_moves_the_marks(
    tmp_path: Path, checks: list[str]
) -> None:
    with running(config(tmp_path, "plant/secret/**")) as r:
        guest, staff = user(r, "guest", "g"), user(r, "staff", "s")
        writer = user(r, "writer", "w")
        subscribe(guest, "plant/#", "sensors/#")
        subscribe(staff, "plant/#", "sensors/#")
        assert r.marks("g") == {"plant/#": True, "sensors/#": False}
        assert r.marks("s") == {"plant/#": False, "sensors/#": False}

        publish(writer, "sensors/a", "sensors/private/b", "plant/secret/c", "plant/d")
        assert topics(staff) == ["plant/d", "plant/secret/c", "sensors/a", "sensors/private/b"]
        assert topics(guest) == ["plant/d", "sensors/a", "sensors/private/b"]
        # only the guest's plant/# deliveries were checked; sensors/# and all of staff's not
        assert sorted(checks) == ["plant/d", "plant/secret/c"]

        # a reload adds a deny that meets the guest's sensors/#: checked from the next message
        r.reload(config(tmp_path, "plant/secret/**", "sensors/private/**"))
        assert r.marks("g") == {"plant/#": True, "sensors/#": True}
        assert r.marks("s") == {"plant/#": False, "sensors/#": False}
        publish(writer, "sensors/private/b", "sensors/a")
        assert topics(staff) == ["sensors/a", "sensors/private/b"]
        assert topics(guest) == ["sensors/a"]  # no leak through the formerly unchecked one

        # and a reload that removes every egress deny rule drops the checks again
        r.reload(config(tmp_path, "nothing/**"))
        assert r.marks("g") == {"plant/#": False, "sensors/#": False}
        checks.clear()
        publish(writer, "plant/secret/c", "sensors/private/b")
        assert topics(guest) == ["plant/secret/c", "sensors/private/b"]
        assert checks == []
        for c in (guest, staff, writer):
            c.close()


def test_shared_subscription_members_are_checked_per_member(
    tmp_path: Path, checks: list[str]
) -> None:
    with running(config(tmp_path, "plant/secret/**")) as r:
        guest, staff = user(r, "guest", "g"), user(r, "staff", "s")
        writer = user(r, "writer", "w")
        subscribe(guest, "$share/grp/plant/#")
        subscribe(staff, "$share/grp/plant/#")
        assert r.marks("g") == {"$share/grp/plant/#": True}
        assert r.marks("s") == {"$share/grp/plant/#": False}
        publish(writer, *(f"plant/secret/{i}" for i in range(6)))
        assert len(topics(staff)) == 6  # the guest, when picked, is passed over
        assert topics(guest) == []
        for c in (guest, staff, writer):
            c.close()


def test_resume_and_restart_with_two_principals_keep_each_mark(
    tmp_path: Path, checks: list[str]
) -> None:
    text = config(tmp_path, "plant/secret/**", persistence=True)
    persistent = Properties(session_expiry_interval=300)
    with running(text) as r:
        guest = user(r, "guest", "g", clean=True, properties=persistent)
        staff = user(r, "staff", "s", clean=True, properties=persistent)
        subscribe(guest, "plant/#", qos=1)
        subscribe(staff, "plant/#", qos=1)
        guest.close()
        staff.close()
    with running(text) as r:  # restored sessions: judged again for their own principal
        assert r.marks("g") == {"plant/#": True}
        assert r.marks("s") == {"plant/#": False}
        writer = user(r, "writer", "w")
        writer.send(Publish("plant/secret/x", b"x", 1, packet_id=1))
        writer.send(Publish("plant/open/y", b"y", 1, packet_id=2))
        writer.publishes(0.3)
        guest = user(r, "guest", "g", clean=False, properties=persistent)
        staff = user(r, "staff", "s", clean=False, properties=persistent)
        assert r.marks("g") == {"plant/#": True}  # the resumed session is judged again too
        assert r.marks("s") == {"plant/#": False}
        assert topics(staff) == ["plant/open/y", "plant/secret/x"]
        assert topics(guest) == ["plant/open/y"]
        for c in (guest, staff, writer):
            c.close()


def test_queued_messages_keep_their_subscription_mark_until_the_policy_changes(
    tmp_path: Path, checks: list[str]
) -> None:
    """Issue 32: a QoS 1 message queued behind a full Receive Maximum through a subscription
    gates 5-6 cannot deny is not judged again when the queue drains, while the policy it was
    routed under is in force; after a reload it is (the reload may have added a rule)."""
    with running(config(tmp_path, "plant/secret/**")) as r:
        guest = user(r, "guest", "g", properties=Properties(receive_maximum=1))
        writer = user(r, "writer", "w")
        subscribe(guest, "sensors/#", qos=1)
        assert r.marks("g") == {"sensors/#": False}
        for i, t in enumerate(("sensors/a", "sensors/b", "sensors/c"), 1):
            writer.send(Publish(t, b"x", 1, packet_id=i))
        assert sorted(p.topic for p in guest.publishes(0.6)) == [
            "sensors/a",
            "sensors/b",
            "sensors/c",
        ]
        assert checks == []  # two of them waited in the queue: not judged again

        # queued under the old policy, drained under the new one: judged
        writer.send(Publish("sensors/d", b"x", 1, packet_id=4))
        writer.send(Publish("sensors/e", b"x", 1, packet_id=5))
        writer.publishes(0.3)
        r.reload(config(tmp_path, "plant/secret/**", "sensors/private/**"))
        assert r.marks("g") == {"sensors/#": True}
        checks.clear()
        assert sorted(p.topic for p in guest.publishes(0.6)) == ["sensors/d", "sensors/e"]
        assert checks == ["sensors/e"]  # d was in flight already, e waited in the queue
        for c in (guest, writer):
            c.close()
