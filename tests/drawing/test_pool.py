"""The worker pool in-process: a real pool of real worker processes, drawing the tiny style.

The bot tests see the pool only through Telegram; these look at it directly, in seconds and
without ../shared. To catch a worker in the middle of a task, whatever the machine's speed, a
test stops it with SIGSTOP before giving it the task: the task is then certainly taken and
certainly unfinished when the test acts.
"""
from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.drawing.fairqueue import Ticket
from bot.drawing.local.pool import LocalPool
from bot.drawing.pool import PoolBusy, WorkerLost
from bot.service import metrics
from inference.drawer import DrawerSpec, WorkOrder
from inference.pipeline import ConvertSettings
from storage.database import Database
from testkit.pictures import synthetic_photo
from testkit.wait import until, within
from weights.store import ModelStore

pytestmark = pytest.mark.slow  # every test here starts and kills worker processes

SETTINGS = ConvertSettings(max_side=96, faces=False)  # 160x120 in, 96x72 out


def new_pool(store: ModelStore, queue_size: int = 4, timeout_s: float = 120) -> LocalPool:
    """One worker on the cached ONNX export of the tiny style, so the worker never imports torch."""
    return LocalPool(DrawerSpec(store.home, "onnxruntime", 1, "tiny"), size=1, queue_size=queue_size,
                      timeout_s=timeout_s)


@contextlib.asynccontextmanager
async def running(pool: LocalPool) -> AsyncIterator[LocalPool]:
    await pool.start()
    try:
        yield pool
    finally:
        for pid in pool.pids():  # a failed test may leave its worker stopped: let it hear the close
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        await pool.close()


def submit(pool: LocalPool, n: int, user: int = 1) -> Ticket:
    """A photo of its own (job ``job-n``): no two tasks are the same image."""
    return pool.submit(WorkOrder(f"job-{n}", synthetic_photo(160, 120, seed=n), "tiny", SETTINGS), user, f"key-{n}")


def test_a_busy_worker_queues_up_to_the_limit_then_refuses_and_draws_everything_queued(tiny_store: ModelStore) -> None:
    async def go() -> None:
        async with running(new_pool(tiny_store, queue_size=2)) as pool:
            (pid,) = pool.pids()
            assert pool.free_slots() == 3  # the idle worker's photo, then a queue of two
            os.kill(pid, signal.SIGSTOP)  # the worker is "drawing" the first photo as long as we like
            first = submit(pool, 0)
            await within(first.started.wait())
            assert (pool.running, pool.waiting, pool.free_slots()) == (1, 0, 2)
            queued = [submit(pool, 1), submit(pool, 2)]
            assert [pool.place(t) for t in queued] == [0, 1]  # what "n photos before yours" shows
            assert (pool.waiting, pool.free_slots()) == (2, 0)
            with pytest.raises(PoolBusy):
                submit(pool, 3)  # refused at once, not queued behind the others
            assert pool.waiting == 2

            os.kill(pid, signal.SIGCONT)
            results = await within(asyncio.gather(*(t.result for t in [first, *queued])))
            assert [r.output_size for r in results] == [(96, 72)] * 3 and {r.style for r in results} == {"tiny"}
            assert (pool.running, pool.waiting, pool.free_slots()) == (0, 0, 3)
            assert pool.pids() == [pid]  # one worker served them all

    asyncio.run(go())


def test_a_worker_killed_mid_task_is_replaced_and_only_its_task_fails(tiny_store: ModelStore) -> None:
    async def go() -> None:
        async with running(new_pool(tiny_store)) as pool:
            (old,) = pool.pids()
            os.kill(old, signal.SIGSTOP)
            lost = submit(pool, 0)
            await within(lost.started.wait())
            os.kill(old, signal.SIGKILL)  # a crash (out of memory, a segfault) while drawing
            with pytest.raises(WorkerLost):
                await within(lost.result)
            after = submit(pool, 1)  # waits for the replacement, which draws it
            assert (await within(after.result)).output_size == (96, 72)
            assert pool.online() == 1 and pool.pids() != [old]

    asyncio.run(go())


def test_a_hung_worker_is_replaced_after_the_timeout(tiny_store: ModelStore) -> None:
    async def go() -> None:
        async with running(new_pool(tiny_store, timeout_s=1.0)) as pool:
            (old,) = pool.pids()
            os.kill(old, signal.SIGSTOP)  # it will never answer, however long the pool waits
            with pytest.raises(WorkerLost, match="timed out"):
                await within(submit(pool, 0).result)
            await until(lambda: pool.online() == 1 and pool.pids() != [old])  # a new worker in its slot

    asyncio.run(go())


def test_close_drops_what_is_queued_and_stops_every_worker(tiny_store: ModelStore, tmp_path: Path) -> None:
    async def go() -> None:
        pool = new_pool(tiny_store)
        await pool.start()
        (pid,) = pool.pids()
        os.kill(pid, signal.SIGSTOP)
        drawing = submit(pool, 0)
        await within(drawing.started.wait())
        queued = submit(pool, 1)
        closing = asyncio.create_task(pool.close())
        await asyncio.sleep(0)  # close() has begun: nothing more is taken from the queue
        os.kill(pid, signal.SIGCONT)  # the worker finishes its photo, then hears the stop
        await within(closing)
        assert queued.result.cancelled()  # its job stays in the journal for the next start
        assert pool.online() == 0
        db = await Database.open(tmp_path / "bot.db")
        metrics.watch(pool, db)  # /metrics, and the no-worker alert, see processes up, not the configured number
        assert pool.size == 1 and "animebot_workers_online 0.0" in metrics.exposition().decode()
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # exited and reaped: no orphan left behind
        await db.close()

    asyncio.run(go())


def test_a_light_user_is_served_between_a_heavy_users_photos(tiny_store: ModelStore) -> None:
    async def go() -> None:
        async with running(new_pool(tiny_store, queue_size=8)) as pool:
            (pid,) = pool.pids()
            os.kill(pid, signal.SIGSTOP)
            first = submit(pool, 0, user=1)
            await within(first.started.wait())
            heavy = [submit(pool, n, user=1) for n in (1, 2, 3)]  # the heavy user's burst came first
            light = submit(pool, 4, user=2)
            assert [pool.place(t) for t in [*heavy, light]] == [1, 2, 3, 0]

            os.kill(pid, signal.SIGCONT)
            tasks = [first, *heavy, light]
            await within(asyncio.gather(*(t.result for t in tasks)))
            started = sorted(tasks, key=lambda t: t.queued_at + t.waited_s)
            assert started == [first, light, *heavy]

    asyncio.run(go())


def test_a_start_cancelled_while_its_worker_loads_leaves_no_process_behind(tiny_store: ModelStore) -> None:
    """A stop (SIGTERM) while the models load cancels the start: the process it started holds no slot
    yet, so only the start itself can end it. Before, it went on loading (a first start exports for
    minutes) and only exited on finding nobody at the other end of its pipe."""
    async def go() -> None:
        before = {p.pid for p in multiprocessing.active_children()}
        pool = new_pool(tiny_store)
        starting = asyncio.ensure_future(pool.start())
        (child,) = await until(lambda: [p for p in multiprocessing.active_children() if p.pid not in before],
                               what="the worker process started")
        assert child.pid is not None
        os.kill(child.pid, signal.SIGSTOP)  # still loading when the stop comes, whatever the machine's speed
        try:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            await until(lambda: not child.is_alive(), what="the worker process ended")
            assert pool.pids() == []
        finally:
            if child.is_alive():  # failed: a stopped child would hold up the test process's exit
                child.kill()

    asyncio.run(go())
