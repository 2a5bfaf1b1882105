"""No client can take what belongs to another, as a property (hypothesis): two tenants, three
principals, one of them adversarial, on the in-memory broker with a fake clock.

``alice`` (tenant ``acme``, client ids ``alice-*``) and ``bob`` (tenant ``globex``, ``bob-*``)
are the victims; ``mallory`` shares alice's tenant, binds no client id and draws any sequence of:
squats on the victims' ids, floods of retained messages, subscriptions and offline queues,
stalled subscribers (never acknowledge) that fill under ``queue_overflow = "backpressure"``,
wills routed into them, and failed logins. Between its steps the victims publish commands to
their own offline sessions. Whatever mallory did, the victims' service holds:

- their logins succeed and their sessions are theirs (session present, nothing of mallory's);
- their retained status messages are kept, and new ones are accepted;
- every command queued for their offline sessions is delivered;
- each of their publishes was held at most once (``backpressure_holds``).

Not drawn here: SMOKER claim floods (the tenant's share of the live claims is
tests/claims/test_claims_service.py::test_tenant_share_keeps_room_for_other_tenants) and login
storms from many addresses (tests/auth/test_login_fairness.py); squats are refused in the
victim's own tenant (a password entry reserves its client ids in its tenants, docs/sessions.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from edge_broker.auth.password import PasswordEntry, write_password_file
from edge_broker.mqtt.packets import Disconnect, Properties, Puback, Publish, Will
from tests.authz.session_support import hashed
from tests.broker.engine_harness import MemoryBroker

PASSWORDS = {"alice": "wonder", "bob": "builder", "mallory": "eve"}
TENANTS = {"alice": "acme", "bob": "globex", "mallory": "acme"}
CLIENT_IDS = {"alice": ("alice-*",), "bob": ("bob-*",), "mallory": ()}
TIMEOUT = 1.0  # backpressure_timeout, on the fake clock
KEEP = Properties(session_expiry_interval=600)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("two-tenants")
    passwd = directory / "passwd"
    write_password_file(
        passwd,
        {
            user: PasswordEntry(
                user, hashed(user, PASSWORDS[user]), (TENANTS[user],), (), CLIENT_IDS[user]
            )
            for user in PASSWORDS
        },
    )
    return f"""
[sys]
interval = 0
[passwords]
file = "{passwd}"
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0
auth_methods = ["password"]
[limits]
max_retained_messages = 40
max_retained_bytes = 40000
max_subscriptions_total = 40
max_queued_bytes_total = 40000
max_connections = 24
max_inflight = 1
max_queued_messages = 10
queue_overflow = "backpressure"
backpressure_timeout = {TIMEOUT}
connect_rate = 100000
connect_burst = 100000
"""


class World:
    """One broker, the victims' state, and what they are owed."""

    def __init__(self, config: str) -> None:
        self.mb = MemoryBroker(config)
        self.owed: dict[str, list[bytes]] = {"alice": [], "bob": []}
        self.ids = iter(range(1_000_000))
        self.held: list[Any] = []  # mallory's stalled subscribers: kept open, never read

    def login(self, user: str, cid: str, clean: bool = True, password: str | None = None, **kw):
        c = self.mb.client()
        ack = c.connect(
            cid,
            clean=clean,
            username=user,
            password=(password or PASSWORDS[user]).encode(),
            **kw,
        )
        return c, ack

    def victim(self, user: str, cid: str, clean: bool = True, **kw):
        c, ack = self.login(user, cid, clean, **kw)
        assert ack.reason_code == 0, (user, cid, ack)  # logins succeed
        return c, ack

    def mallory(self, clean: bool = True, cid: str = "", **kw: Any) -> Any:
        """A connection of mallory's, or None when the broker refused it (its share of the
        connections is used up: what its next step then cannot do)."""
        c, ack = self.login("mallory", cid or f"m-{next(self.ids)}", clean, **kw)
        if ack.reason_code != 0:
            assert ack.reason_code in (0x87, 0x97), ack  # another's id, or over its share
            return None
        return c

    def settle_holds(self) -> None:
        self.mb.advance(TIMEOUT + 0.1)

    # -- the adversary ----------------------------------------------------------------------

    def squat(self, victim: str, clean: bool) -> None:
        c = self.mallory(clean, f"{victim}-home", properties=KEEP)
        if TENANTS[victim] == TENANTS["mallory"]:
            assert c is None  # a victim's id is never mallory's in the victim's tenant
        elif c is not None:  # another tenant's session of that name: never the victim's
            c.close()

    def retained_flood(self, n: int) -> None:
        c = self.mallory()
        if c is None:
            return
        for i in range(n):
            c.send(Publish(f"junk/{next(self.ids)}", b"j" * 900, 1, True, packet_id=i + 1))
        self.settle_holds()
        c.close()

    def subscription_flood(self, n: int) -> None:
        c = self.mallory(False, properties=KEEP)
        if c is None:
            return
        for i in range(n):
            c.subscribe(f"s/{next(self.ids)}", 1, packet_id=i + 1)
        c.close()

    def queue_flood(self, n: int) -> None:
        for _ in range(5):  # five offline sessions, each filled up to its own limit
            sub = self.mallory(False, properties=KEEP)
            if sub is not None:
                sub.subscribe("flood/#", 1)
                sub.send(Disconnect())
        pub = self.mallory()
        if pub is None:
            return
        for i in range(n):
            pub.send(Publish(f"flood/{i}", b"f" * 900, 1, packet_id=i + 1))
        self.settle_holds()
        pub.close()

    def stall(self, fill: int) -> None:
        c = self.mallory(False, properties=KEEP)
        if c is not None:
            c.subscribe("cmd/#", 1)
            self.held.append(c)  # never acknowledges
        pub = self.mallory()
        if pub is None:
            return
        for i in range(fill):
            pub.send(Publish("cmd/mallory", b"x", 1, packet_id=i + 1))
        self.settle_holds()
        pub.close()

    def connect_flood(self, n: int) -> None:
        for _ in range(n):  # kept open
            c = self.mallory()
            if c is not None:
                self.held.append(c)

    def will_into_stall(self) -> None:
        will = Will("cmd/will", b"w", 1, False)
        c = self.mallory(will=will)
        if c is not None:
            c.close()  # network loss: the will is routed (into any stalled subscriber)

    def bad_login(self, user: str) -> None:
        c, ack = self.login(user, f"m-{next(self.ids)}", password="wrong")
        assert ack.reason_code != 0
        c.close()

    # -- the victims --------------------------------------------------------------------------

    def command(self, user: str) -> None:
        """``user`` publishes a command to its own offline session; held at most once."""
        payload = b"%s-%d" % (user.encode(), len(self.owed[user]))
        c, _ = self.victim(user, f"{user}-pub")
        holds = self.mb.broker.stats.backpressure_holds
        c.send(Publish(f"cmd/{user}", payload, 1, packet_id=1))
        self.settle_holds()
        assert self.mb.broker.stats.backpressure_holds - holds <= 1
        acks = [p for p in c.drain() if isinstance(p, Puback)]
        assert [a.reason_code for a in acks] in ([0x00], [0x10]), acks
        self.owed[user].append(payload)
        c.send(Disconnect())


ACTIONS = st.one_of(
    st.tuples(st.just("squat"), st.sampled_from(["alice", "bob"]), st.booleans()),
    st.tuples(st.just("retained_flood"), st.integers(1, 50)),
    st.tuples(st.just("subscription_flood"), st.integers(1, 50)),
    st.tuples(st.just("queue_flood"), st.integers(1, 12)),
    st.tuples(st.just("connect_flood"), st.integers(1, 30)),
    st.tuples(st.just("stall"), st.integers(0, 14)),
    st.tuples(st.just("will_into_stall")),
    st.tuples(st.just("bad_login"), st.sampled_from(["mallory", "nobody"])),
)


@pytest.fixture
def world(config: str) -> Iterator[Any]:
    made: list[World] = []

    def make() -> World:
        made.append(World(config))
        return made[-1]

    yield make
    for w in made:
        w.mb.close()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# every kind of flood at once, beyond each broker-wide total, is always tried
@example(
    steps=[
        ("retained_flood", 50),
        ("subscription_flood", 50),
        ("queue_flood", 12),
        ("stall", 14),
        ("will_into_stall",),
        ("connect_flood", 30),
        ("squat", "alice", False),
        ("bad_login", "nobody"),
    ],
    victims=[True, False, True, False, True, False],
)
@given(steps=st.lists(ACTIONS, min_size=1, max_size=6), victims=st.lists(st.booleans(), max_size=6))
def test_victims_keep_their_service_whatever_the_adversary_does(world, steps, victims) -> None:
    w = world()
    for user in ("alice", "bob"):  # the devices: a persistent session and a retained status
        c, _ = w.victim(user, f"{user}-home", False, properties=KEEP)
        assert c.subscribe(f"cmd/{user}", 1).reason_codes == (1,)
        c.send(Publish(f"status/{user}", b"online", 1, True, packet_id=2))
        assert c.expect(Puback).reason_code in (0x00, 0x10)
        c.send(Disconnect())
    for i, step in enumerate(steps):
        getattr(w, step[0])(*step[1:])
        if i < len(victims):
            w.command("alice" if victims[i] else "bob")
    for user in ("alice", "bob"):
        # the session is theirs, with every command queued while it was offline
        c, ack = w.victim(user, f"{user}-home", False, properties=KEEP)
        assert ack.session_present
        got = [p.payload for p in c.publishes() if p.topic == f"cmd/{user}"]
        assert got == w.owed[user]
        # the retained status kept, and a new one accepted
        c.subscribe(f"status/{user}", 1, packet_id=3)
        assert [p.payload for p in c.publishes()] == [b"online"]
        c.send(Publish(f"status/{user}/2", b"still", 1, True, packet_id=4))
        assert c.expect(Puback).reason_code in (0x00, 0x10)
        c.send(Disconnect())
        fresh, _ = w.victim(user, f"{user}-{w.mb.clock.now:.0f}")  # a new id still logs in
        fresh.send(Disconnect())
