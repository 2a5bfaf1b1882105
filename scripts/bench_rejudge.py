#!/usr/bin/env python3
"""What judging a session again costs (issue 15, ``edge_broker/broker/rejudge.py``).

A resume, re-authentication, reload or restart judges every subscription of the session and,
under gates 3–6, every message queued or in flight for it. This measures that work on one
session without sockets: ``judge_subscriptions`` + ``apply_verdicts`` + ``purge_undeliverable``
(the resume path of ``handle_connect.py``) for S subscriptions and Q queued QoS 1 messages,
under default permissions whose "user" role denies ``admin/#`` (so ``#`` is checked per topic)
and with no policy at all (where the purge is skipped). Nothing is revoked, so every run
judges the same state. Live deliveries do not take this path (delivery.py is unchanged).
Prints a markdown table of milliseconds per judgement, the best of ``--rounds``.

    .venv/bin/python scripts/bench_rejudge.py [--subs 1,10,100] [--queued 0,100,1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from edge_broker.broker.message import make_message
from edge_broker.broker.rejudge import apply_verdicts, judge_subscriptions, purge_undeliverable
from edge_broker.broker.server import Broker
from edge_broker.broker.session import Outgoing, Session, SubscriptionEntry
from edge_broker.config import loads_config
from edge_broker.identity import Identity
from edge_broker.mqtt.packets import NO_PROPERTIES

POLICY = """
[[listeners]]
name = "tcp"
port = 0
[permissions.sets.user]
rules = [ { id = "no-admin", topic = "admin/#", type = "DENY" }, { id = "all", topic = "#" } ]
[[permissions.assign]]
role = "user"
sets = ["user"]
"""
NO_POLICY = '[[listeners]]\nname = "tcp"\nport = 0\n'


def session_with(broker: Broker, subs: int, queued: int) -> Session:
    identity = Identity(client_id="bench", method="password", username="u", roles=("user",))
    session = Session("bench", "~", identity, 5)
    space = broker.topic_space("~")
    filters = ["#"] + [f"site/{i}/+/#" for i in range(subs - 1)]
    for f in filters:
        verdict = broker.policy.check_subscribe(identity, _subscription(f))
        recheck = getattr(verdict, "recheck", False)
        entry = SubscriptionEntry(session, f, 1, recheck=recheck)
        session.subscriptions[f] = entry
        space.subscribe(entry, f, None)
    for i in range(queued):
        message = make_message(
            f"site/{i % max(1, subs)}/t/{i}", b"x" * 32, 1, False, NO_PROPERTIES, "pub"
        )
        session.queue.append(Outgoing(message, 1, False))
        session.queued_bytes += message.size
    return session


def _subscription(topic_filter: str):  # type: ignore[no-untyped-def]
    from edge_broker.mqtt.packets import Subscription

    return Subscription(topic_filter, 1)


async def judge_once(broker: Broker, session: Session) -> None:
    _, verdicts = await judge_subscriptions(broker, session, session.identity)
    removed = apply_verdicts(broker, session, verdicts, "bench")
    purge_undeliverable(broker, session, "bench", removed)


def measure(config: str, subs: int, queued: int, rounds: int) -> float:
    broker = Broker(loads_config(config, "<bench>"))
    session = session_with(broker, subs, queued)
    loop = asyncio.new_event_loop()
    try:
        best = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            loop.run_until_complete(judge_once(broker, session))
            best = min(best, time.perf_counter() - started)
        assert len(session.queue) == queued, "the benchmark state must not be revoked"
        return best * 1000
    finally:
        loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subs", default="1,10,100")
    parser.add_argument("--queued", default="0,100,1000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    subs = [int(x) for x in args.subs.split(",")]
    queued = [int(x) for x in args.queued.split(",")]
    print("| subscriptions | queued | ms, permissions | ms, no policy |")
    print("|---:|---:|---:|---:|")
    for s in subs:
        for q in queued:
            with_policy = measure(POLICY, s, q, args.rounds)
            without = measure(NO_POLICY, s, q, args.rounds)
            print(f"| {s} | {q} | {with_policy:.3f} | {without:.3f} |")


if __name__ == "__main__":
    main()
