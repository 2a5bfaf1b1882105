"""Acknowledgements waiting for the store (``Persistence.acknowledge`` / ``in_order``): the
publishes of one turn that wait for the same writes share one task, and still every
acknowledgement of a connection leaves in the order its packets came, with the error of the
write it waited for, and nothing is left behind once they are all done."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.broker.persist.persistence import Persistence
from edge_broker.config import parse_config
from edge_broker.store import StoreError


async def _turns(count: int = 5) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


@settings(max_examples=25, deadline=None)
@given(
    turns=st.lists(st.integers(1, 6), min_size=1, max_size=5),  # publishes per turn
    order=st.randoms(use_true_random=False),  # in which order the bridge writes finish
    failed=st.sets(st.integers(0, 4), max_size=2),  # which turns' bridge writes fail
    limit=st.integers(2, 20),
)
def test_acknowledgements_leave_in_order_with_their_turns_error(
    tmp_path_factory: Any, turns: list[int], order: Any, failed: set[int], limit: int
) -> None:
    state = tmp_path_factory.mktemp("state")
    config = parse_config({"persistence": {"state_dir": str(state), "durability": "sync"}})

    async def run() -> tuple[list[tuple[int, bool]], list[bool], Persistence]:
        persistence = Persistence.open(config)
        loop = asyncio.get_running_loop()
        conn = object()
        called: list[tuple[int, bool]] = []
        held: list[bool] = []  # per publish: did acknowledge ask the connection to wait
        writes: list[asyncio.Future[None]] = []
        n = 0
        for count in turns:
            write: asyncio.Future[None] = loop.create_future()  # the bridge log's, this turn
            writes.append(write)
            for _ in range(count):

                def done(error: StoreError | None, i: int = n) -> None:
                    called.append((i, error is None))

                held.append(persistence.acknowledge(conn, done, limit, write) is not None)
                n += 1
            await _turns()  # the turn ends: its store record is written
        for index in order.sample(range(len(writes)), len(writes)):
            if index in failed:
                writes[index].set_exception(StoreError("disk full"))
            else:
                writes[index].set_result(None)
            await _turns()
        for _ in range(1000):  # until every acknowledgement ran (a chain takes a few turns)
            if len(called) == n:
                break
            await asyncio.sleep(0)
        return called, held, persistence

    called, held, persistence = asyncio.run(run())
    expected = []
    i = 0
    for turn, count in enumerate(turns):
        for _ in range(count):
            expected.append((i, turn not in failed))
            i += 1
    assert called == expected
    # the connection is asked to stop reading once `limit` acknowledgements wait
    waiting = [index + 1 >= limit for index in range(len(held))]
    assert held == waiting
    assert persistence._chains == {} and getattr(persistence, "_groups", {}) == {}
    persistence.keyed.log.close()


def test_publishes_of_one_turn_share_one_task(tmp_path: Path) -> None:
    config = parse_config({"persistence": {"state_dir": str(tmp_path), "durability": "sync"}})

    async def run() -> int:
        persistence = Persistence.open(config)
        write: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn = object()
        for _ in range(10):
            persistence.acknowledge(conn, lambda error: None, 100, write)
        tasks = len(asyncio.all_tasks())
        write.set_result(None)
        await _turns(20)
        persistence.keyed.log.close()
        return tasks

    assert asyncio.run(run()) == 2  # this test's own task and the one group's
