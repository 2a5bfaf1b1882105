"""The asyncio layer wakes at the next deadline (broker/scheduler.py, issue 21): over real
sockets, against the real broker process, with no other traffic to wake it.

The protocol behaviour of each timer is tested in memory with a fake clock
(test_sessions_memory.py, test_clock_memory.py); what only a real process shows is that the
event loop's one timer is re-armed when a new deadline appears and that an idle broker sleeps.
"""

from __future__ import annotations

import time
from pathlib import Path

from broker_raw import RawClient, unique_id

from edge_broker.mqtt.packets import Pingreq, Pingresp, Properties, Publish, Will
from tests.conftest import BrokerFactory

# Will delays are whole seconds (MQTT 5 §3.1.3.2.2): the clients vanish this far apart so that
# their deadlines fall at four phases a quarter of a 0.5 s poll apart. A broker that polled
# every 0.5 s would publish at least one of the wills 0.375 s or more after its deadline.
STAGGER = 0.125
MARGIN = 0.35  # seconds a will may arrive after its delay (a loaded test machine), < 0.375
QUIET = {"sys": {"interval": 0}}  # no $SYS: the broker has no periodic duty of its own


def test_will_delay_fires_on_time_with_no_other_traffic(broker_factory: BrokerFactory) -> None:
    b = broker_factory(QUIET)
    base = unique_id("wake/")
    watcher = RawClient(b.host, b.port)
    watcher.connect(unique_id("watcher"), keep_alive=0)
    watcher.subscribe(base + "/#")
    vanishing = []
    for k in range(4):
        c = RawClient(b.host, b.port)
        will = Will(f"{base}/{k}", b"gone", properties=Properties(will_delay_interval=1))
        props = Properties(session_expiry_interval=60)
        c.connect(unique_id(f"will{k}"), keep_alive=0, will=will, properties=props)
        vanishing.append(c)
    gone: dict[str, float] = {}
    for k, c in enumerate(vanishing):
        if k:
            time.sleep(STAGGER)
        c.close()  # network loss: no DISCONNECT, so the will is due after its delay
        gone[f"{base}/{k}"] = time.monotonic()
    arrived: dict[str, float] = {}
    while len(arrived) < 4:
        packet = watcher.expect(Publish, timeout=3.0)
        arrived[packet.topic] = time.monotonic()
    late = {topic: arrived[topic] - gone[topic] - 1.0 for topic in gone}
    assert all(0.0 <= s < MARGIN for s in late.values()), late
    watcher.close()


def voluntary_switches(pid: int) -> int:
    """How many times the threads of ``pid`` have gone to sleep and been woken."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split()[1])
    return total


def test_idle_broker_without_deadlines_does_not_wake(broker_factory: BrokerFactory) -> None:
    """A connected client with Keep Alive 0 and no $SYS: nothing is ever due, so the event loop
    sleeps in epoll until a socket has something (a 0.5 s poll would wake it 6 times)."""
    b = broker_factory(QUIET)
    c = RawClient(b.host, b.port)
    c.connect(unique_id("idle"), keep_alive=0)
    c.subscribe(unique_id("idle/") + "/#")
    time.sleep(0.5)  # the broker's start-up work and the first due duties are done
    before = voluntary_switches(b.pid)
    time.sleep(3.0)
    woke = voluntary_switches(b.pid) - before
    assert woke <= 1, f"the idle broker woke {woke} times in 3 s"
    c.send(Pingreq())  # and it still serves the client it had the whole time
    c.expect(Pingresp)
    c.close()
