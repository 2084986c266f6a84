"""The default pool: inference worker processes of the bot's own, driven from asyncio.

The event loop never runs a model: one dispatcher coroutine per worker takes
the next ticket from the fair queue and hands it to its process over a pipe.
The blocking pipe calls run on a small thread pool of their own (one thread
per worker), so a 20 MB photo never stalls the loop.

A worker that dies, or takes longer than the timeout, is killed and
replaced; its ticket fails with :class:`~bot.drawing.pool.WorkerLost` so the user can
be told.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing as mp
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from storage.errors import AnimebotError
from bot.drawing.fairqueue import Ticket
from bot.drawing.pool import Pool, WorkerLost, WorkerView, fail, time_limit
from bot.drawing.local.process import Cancel, LoadFailed, Progress, Ready, Stop, Up, worker_main
from inference.drawer import DrawerSpec, Loaded, WorkFailed, WorkOrder
from inference.pipeline import Converted

log = logging.getLogger("animebot.pool")

START_TIMEOUT_S = 600.0  # the first start may export TorchScript
STOP_TIMEOUT_S = 10.0
RESPAWN_DELAY_S = 5.0


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    loaded: Loaded  # its engine, and every style it draws
    busy: bool = False
    ticket: Ticket | None = None  # the one it draws now


class LocalPool(Pool):
    """``size`` worker processes, each drawing one photo at a time."""

    def __init__(self, spec: DrawerSpec, size: int, queue_size: int, timeout_s: float) -> None:
        super().__init__(queue_size, timeout_s)
        self.spec = spec
        self._size = size
        self._ctx = mp.get_context("spawn")
        self._workers: list[_Worker | None] = [None] * size
        self._busy = 0
        self._dispatchers: list[asyncio.Task[None]] = []
        self._threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix="pool-pipe")

    async def start(self) -> None:
        """Start every worker and wait until each has loaded its model."""
        self._workers = list(await asyncio.gather(*(self._spawn(i) for i in range(self._size))))
        self._dispatchers = [asyncio.create_task(self._dispatch(i), name=f"dispatch-{i}") for i in range(self._size)]

    @property
    def size(self) -> int:
        return self._size

    @property
    def running(self) -> int:
        return self._busy

    def online(self) -> int:
        """How many worker processes are up (a slot being refilled is not)."""
        return sum(1 for w in self._workers if w is not None and w.process.is_alive())

    def healthy(self) -> tuple[bool, str]:
        alive = self.online()
        return alive == self._size, f"{alive} of {self._size} worker process(es) up"

    def workers(self) -> list[WorkerView]:
        return [WorkerView(f"local-{i} (pid {w.process.pid})", w.loaded.styles, w.loaded.engine, w.busy)
                for i, w in enumerate(self._workers) if w is not None]

    def drawing(self) -> list[Ticket]:
        return [w.ticket for w in self._workers if w is not None and w.ticket is not None]

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w is not None and w.process.pid is not None]

    async def close(self) -> None:
        """Stop dispatching, drop what is still queued (its jobs stay in the journal), stop every worker."""
        self.pause()
        for d in self._dispatchers:
            d.cancel()
        await asyncio.gather(*self._dispatchers, return_exceptions=True)
        self._drop_waiting()
        await asyncio.gather(*(asyncio.to_thread(self._stop, w) for w in self._workers if w is not None))
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def _dispatch(self, slot: int) -> None:
        loop = asyncio.get_running_loop()
        while True:
            ticket = await self._next_ticket()
            if ticket is None:
                return  # paused for a stop
            if ticket.result.done():  # cancelled by its owner while queued
                continue
            worker = self._workers[slot]
            if worker is None or not worker.process.is_alive():
                worker = await self._replace(slot, "found dead")
                if worker is None:
                    fail(ticket, WorkerLost("the worker is gone"))
                    return
            self._busy += 1
            worker.busy, worker.ticket = True, ticket
            ticket.take()
            order = ticket.order
            ticket.stop = _stopper(worker.conn)

            def progress(done: int, total: int, ticket: Ticket = ticket) -> None:
                loop.call_soon_threadsafe(setattr, ticket, "progress", (done, total))

            limit = time_limit(ticket.allowance, self.timeout_s)
            try:
                reply = await asyncio.wait_for(
                    loop.run_in_executor(self._threads, _exchange, worker.conn, order, progress), limit)
            except asyncio.TimeoutError:
                log.warning("job %s: worker %d (pid %s) passed %.0f s; replacing it",
                            ticket.job_id, slot, worker.process.pid, limit)
                fail(ticket, WorkerLost("the worker timed out"))
                if await self._replace(slot, "timed out") is None:
                    return
                continue
            except (EOFError, OSError) as exc:
                log.warning("job %s: worker %d (pid %s) died (%s)%s", ticket.job_id, slot, worker.process.pid,
                            exc.__class__.__name__, "" if self._paused.is_set() else "; replacing it")
                fail(ticket, WorkerLost("the worker crashed"))
                if await self._replace(slot, "crashed") is None:
                    return
                continue
            finally:
                self._busy -= 1
                worker.busy, worker.ticket = False, None
                ticket.stop = None
            if isinstance(reply, WorkFailed):
                fail(ticket, AnimebotError(reply.message, reply.code, reply.values))
            elif not ticket.result.done():
                ticket.result.set_result(reply)

    async def _replace(self, slot: int, why: str) -> _Worker | None:
        """Kill the slot's worker and start another, retrying with backoff until one starts;
        None, and the slot left empty, once the pool is stopping.

        A running pool's slot must never stay empty: its dispatcher is the
        only one that serves the tickets it takes from the queue.
        """
        old = self._workers[slot]
        self._workers[slot] = None
        if old is not None:
            old.process.kill()
            await asyncio.to_thread(old.process.join, STOP_TIMEOUT_S)
            old.conn.close()
        if self._paused.is_set():  # stopping: a new worker would only be stopped again
            return None
        delay = RESPAWN_DELAY_S
        while True:
            try:
                worker = await self._spawn(slot)
                break
            except AnimebotError as exc:
                log.error("worker %d: %s; trying again in %.0f s", slot, exc.message, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 60.0)
        self._workers[slot] = worker
        log.info("worker %d replaced after it %s (new pid %s)", slot, why, worker.process.pid)
        return worker

    async def _spawn(self, slot: int) -> _Worker:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=worker_main, args=(child, self.spec), name=f"animebot-worker-{slot}", daemon=True)
        process.start()
        child.close()
        try:
            ready: Up = await asyncio.wait_for(asyncio.to_thread(parent.recv), START_TIMEOUT_S)
        except (EOFError, OSError, asyncio.TimeoutError):
            process.kill()
            raise AnimebotError(f"worker {slot} did not start (exit code {process.exitcode})", code="worker_start")
        except asyncio.CancelledError:  # a stop while it loads: no slot holds it, so nothing else would end it
            process.kill()  # (and the thread waiting for its word gets EOF, and ends)
            raise
        if not isinstance(ready, Ready):
            process.join(STOP_TIMEOUT_S)
            why = ready.message if isinstance(ready, LoadFailed) else f"it said {ready!r}"
            raise AnimebotError(f"worker {slot} could not load its model: {why}", code="worker_start")
        log.info("worker %d ready (pid %s, %d thread(s), %s, face pass %s)", slot, ready.pid, self.spec.threads,
                 ready.loaded.engine, ready.loaded.faces)
        return _Worker(process, parent, ready.loaded)

    @staticmethod
    def _stop(worker: _Worker) -> None:
        try:
            worker.conn.send(Stop())
        except OSError:
            pass
        worker.process.join(STOP_TIMEOUT_S)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(STOP_TIMEOUT_S)
        worker.conn.close()


def _exchange(conn: Connection, order: WorkOrder, progress: Callable[[int, int], None]) -> Converted | WorkFailed:
    """Send one order and wait for its answer, passing on a clip's progress (runs on a pipe thread)."""
    conn.send(order)
    while True:
        reply: Up = conn.recv()
        if isinstance(reply, Progress):
            progress(reply.done, reply.total)
        elif isinstance(reply, (Converted, WorkFailed)):
            return reply
        else:
            raise OSError(f"the worker said {reply!r} in the middle of an order")


def _stopper(conn: Connection) -> Callable[[], None]:
    """How to stop the clip a worker is drawing: a word down its pipe, read between frames."""
    def stop() -> None:
        with contextlib.suppress(OSError):
            conn.send(Cancel())
    return stop


