"""The order in which waiting photos reach a worker: fair between users, by cost."""
from __future__ import annotations

import asyncio

from bot.drawing.fairqueue import FairQueue, Ticket
from bot.drawing.pool import Pool, WorkerView
from inference.drawer import WorkOrder
from inference.pipeline import ConvertSettings


def task(user: int, n: int, cost: float = 1.0) -> Ticket:
    return Ticket(WorkOrder(f"{user}-{n}", b"", "tiny", ConvertSettings()), user, f"{user}-{n}", cost=cost)


def drain(queue: FairQueue) -> list[str]:
    order = []
    while (t := queue.pop()) is not None:
        order.append(t.job_id)
    return order


def test_one_heavy_user_and_three_light_ones_are_served_in_turn() -> None:
    async def go() -> None:
        queue = FairQueue()
        for n in range(6):
            queue.put(task(1, n))  # the heavy user's burst came first
        for user in (2, 3, 4):
            queue.put(task(user, 0))
        assert drain(queue) == ["1-0", "2-0", "3-0", "4-0", "1-1", "1-2", "1-3", "1-4", "1-5"]

    asyncio.run(go())


def test_a_newcomer_waits_behind_at_most_one_photo_of_each_user() -> None:
    async def go() -> None:
        queue = FairQueue()
        for user in range(1, 11):  # ten users send five photos each, at once
            for n in range(5):
                queue.put(task(user, n))
        served = [queue.pop() for _ in range(3)]  # the workers took three
        late = task(99, 0)
        queue.put(late)
        assert queue.ahead_of(late) <= 10
        order = drain(queue)
        assert order.index("99-0") < min(order.index(f"{u}-4") for u in range(1, 11))
        assert all(t is not None for t in served)

    asyncio.run(go())


def test_costs_not_counts_a_costly_photo_moves_its_users_line_further() -> None:
    async def go() -> None:
        queue = FairQueue()
        queue.put(task(1, 0, cost=3.0))  # e.g. a full-size file, or a short clip
        queue.put(task(1, 1, cost=1.0))
        for n in range(3):
            queue.put(task(2, n))
        assert drain(queue) == ["1-0", "2-0", "2-1", "2-2", "1-1"]

    asyncio.run(go())


def test_a_charge_after_drawing_counts_against_the_users_next_photos() -> None:
    async def go() -> None:
        queue = FairQueue()
        queue.put(task(1, 0))
        queue.put(task(2, 0))
        assert queue.pop().job_id == "1-0"
        queue.charge(1, 2.0)  # it had faces: it cost 3, not 1
        queue.put(task(1, 1))
        queue.put(task(2, 1))
        queue.put(task(2, 2))
        assert drain(queue) == ["2-0", "2-1", "2-2", "1-1"]

    asyncio.run(go())


def test_a_photo_given_up_while_waiting_is_skipped_and_not_counted() -> None:
    async def go() -> None:
        queue = FairQueue()
        gone, kept = task(1, 0), task(2, 0)
        queue.put(gone)
        queue.put(kept)
        gone.result.cancel()
        assert queue.waiting == 1 and queue.ahead_of(kept) == 0 and dict(queue.by_user()) == {2: 1}
        assert drain(queue) == ["2-0"]

    asyncio.run(go())


def test_a_worker_waiting_for_work_wakes_when_a_photo_arrives() -> None:
    async def go() -> None:
        queue = FairQueue()
        waiter = asyncio.create_task(queue.arrival())
        await asyncio.sleep(0)
        assert not waiter.done()
        queue.put(task(1, 0))
        await asyncio.wait_for(waiter, 5)

    asyncio.run(go())


class OneWorker(Pool):
    """A pool whose one worker holds ``on_worker``: all :meth:`Pool.lines` needs besides the queue."""

    def __init__(self) -> None:
        super().__init__(queue_size=10, timeout_s=60)
        self.on_worker: list[Ticket] = []

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    size = running = property(lambda self: len(self.on_worker))

    def healthy(self) -> tuple[bool, str]:
        return True, "one worker"

    def workers(self) -> list[WorkerView]:
        return []

    def drawing(self) -> list[Ticket]:
        return self.on_worker


def test_the_admin_page_s_lines_say_whose_photos_wait_and_are_drawn_the_longest_wait_first() -> None:
    async def go() -> None:
        pool = OneWorker()
        drawn, *waiting = [task(1, 0), task(2, 0), task(1, 1), task(3, 0)]
        for ticket, queued_s_ago in zip(waiting, (30, 5, 12)):
            ticket.queued_at -= queued_s_ago
            pool.queue.put(ticket)
        pool.on_worker.append(drawn)
        lines = pool.lines()
        assert [(line.user_id, line.waiting, line.drawing, round(line.oldest_s)) for line in lines] == \
            [(2, 1, 0, 30), (3, 1, 0, 12), (1, 1, 1, 5)]
        waiting[0].result.cancel()  # given up while it waited: nobody's line
        assert [line.user_id for line in pool.lines()] == [3, 1]
        pool.on_worker.clear()  # drawn: user 1 has only the one waiting
        assert [(line.user_id, line.waiting, line.drawing) for line in pool.lines()] == [(3, 1, 0), (1, 1, 0)]

    asyncio.run(go())
