"""A bounded pool of inference worker processes, driven from asyncio.

The event loop never runs a model: it puts a :class:`Task` on a bounded
queue, and one dispatcher coroutine per worker hands tasks to its process
over a pipe. The blocking pipe calls run on a small thread pool of their
own (one thread per worker), so a 20 MB photo never stalls the loop.

A worker that dies, or takes longer than the timeout, is killed and
replaced; its task fails with :class:`WorkerLost` so the user can be told.
Room in the queue can be reserved before a photo is downloaded
(:meth:`WorkerPool.reserve`), so a burst of users is told "busy" before the
bot fetches megabytes it has no room to draw. (Over 300 lines because
the reservations change the same counts the dispatchers keep.)
"""
from __future__ import annotations

import asyncio
import logging
import multiprocessing as mp
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from bot.worker_process import WorkerSpec, WorkFailed, WorkOrder, serve
from inference.errors import AnimebotError
from inference.pipeline import ConvertSettings, Converted

log = logging.getLogger("animebot.pool")

START_TIMEOUT_S = 600.0  # the first start may export TorchScript
STOP_TIMEOUT_S = 10.0
RESPAWN_DELAY_S = 5.0


class PoolBusy(AnimebotError):
    code = "busy"


class WorkerLost(AnimebotError):
    """The worker running a task crashed or hung; the task is not retried."""

    code = "worker_lost"


@dataclass
class Task:
    """One queued conversion. ``started`` is set when a worker takes it."""

    job_id: str
    data: bytes
    style: str
    settings: ConvertSettings
    position: int
    started: asyncio.Event = field(default_factory=asyncio.Event)
    result: asyncio.Future[Converted] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    queued_at: float = field(default_factory=time.monotonic)
    waited_s: float = 0.0


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection


class WorkerPool:
    """``await pool.start()``, then ``pool.submit(...)`` and ``await task.result``."""

    def __init__(self, spec: WorkerSpec, size: int, queue_size: int, timeout_s: float) -> None:
        self.spec = spec
        self.size = size
        self.queue_size = queue_size
        self.timeout_s = timeout_s
        self._ctx = mp.get_context("spawn")
        self._queue: asyncio.Queue[Task] = asyncio.Queue()
        self._workers: list[_Worker | None] = [None] * size
        self._busy = 0
        self._reserved = 0  # queue places promised to requests still downloading
        self._dispatchers: list[asyncio.Task[None]] = []
        self._paused = asyncio.Event()  # set: dispatchers take no new tasks (shutting down)
        self._threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix="pool-pipe")

    # --- public ---------------------------------------------------------------

    async def start(self) -> None:
        """Start every worker and wait until each has loaded its model."""
        self._workers = list(await asyncio.gather(*(self._spawn(i) for i in range(self.size))))
        self._dispatchers = [asyncio.create_task(self._dispatch(i), name=f"dispatch-{i}") for i in range(self.size)]

    def free_slots(self) -> int:
        """How many more tasks the queue accepts now (places reserved but not yet used count as taken)."""
        return max(0, self.queue_size - self._queue.qsize() - self._reserved)

    @property
    def waiting(self) -> int:
        return self._queue.qsize()

    @property
    def running(self) -> int:
        return self._busy

    def alive(self) -> int:
        """How many worker processes are up (a slot being refilled is not)."""
        return sum(1 for w in self._workers if w is not None and w.process.is_alive())

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w is not None and w.process.pid is not None]

    def reserve(self, places: int) -> "Reservation | None":
        """Hold ``places`` in the queue for photos still to be downloaded; None if there is no room."""
        if places > self.free_slots():
            return None
        self._reserved += places
        return Reservation(self, places)

    def submit(self, job_id: str, data: bytes, style: str, settings: ConvertSettings) -> Task:
        """Queue a conversion, or raise :class:`PoolBusy` when the queue is full."""
        if self.free_slots() < 1:
            raise PoolBusy("the queue is full")
        return self._put(job_id, data, style, settings)

    async def submit_when_room(self, job_id: str, data: bytes, style: str, settings: ConvertSettings) -> Task:
        """Queue a conversion, waiting for room: for jobs already promised an answer (recovered ones)."""
        while self.free_slots() < 1:
            await asyncio.sleep(0.2)
        return self.submit(job_id, data, style, settings)

    def _put(self, job_id: str, data: bytes, style: str, settings: ConvertSettings) -> Task:
        """Queue a task. Its place counts the tasks ahead of it that no idle worker will take at once:
        0 or less means a worker starts it now, 1 that it is next."""
        ahead, idle = self._queue.qsize(), self.size - self._busy
        task = Task(job_id, data, style, settings, position=ahead - idle + 1)
        self._queue.put_nowait(task)
        return task

    def pause(self) -> None:
        """Let running tasks finish but start no new ones: the first step of a graceful stop.
        From here on a worker that dies is not replaced."""
        self._paused.set()

    async def close(self) -> None:
        """Stop dispatching, drop what is still queued (its jobs stay in the journal), stop every worker."""
        for d in self._dispatchers:
            d.cancel()
        await asyncio.gather(*self._dispatchers, return_exceptions=True)
        while not self._queue.empty():
            self._queue.get_nowait().result.cancel()
        await asyncio.gather(*(asyncio.to_thread(self._stop, w) for w in self._workers if w is not None))
        self._threads.shutdown(wait=False, cancel_futures=True)

    # --- dispatching --------------------------------------------------------------

    async def _dispatch(self, slot: int) -> None:
        loop = asyncio.get_running_loop()
        while True:
            task = await self._next_task()
            if task is None:
                return  # paused for a stop
            if task.result.done():  # cancelled by its owner while queued
                continue
            worker = self._workers[slot]
            if worker is None or not worker.process.is_alive():
                worker = await self._replace(slot, "found dead")
                if worker is None:
                    _fail(task, WorkerLost("the worker is gone"))
                    return
            self._busy += 1
            task.waited_s = time.monotonic() - task.queued_at
            task.started.set()
            order = WorkOrder(task.job_id, task.data, task.style, task.settings)
            try:
                reply = await asyncio.wait_for(
                    loop.run_in_executor(self._threads, _exchange, worker.conn, order), self.timeout_s
                )
            except asyncio.TimeoutError:
                log.warning("job %s: worker %d (pid %s) passed %.0f s; replacing it",
                            task.job_id, slot, worker.process.pid, self.timeout_s)
                _fail(task, WorkerLost("the worker timed out"))
                if await self._replace(slot, "timed out") is None:
                    return
                continue
            except (EOFError, OSError) as exc:
                log.warning("job %s: worker %d (pid %s) died (%s)%s", task.job_id, slot, worker.process.pid,
                            exc.__class__.__name__, "" if self._paused.is_set() else "; replacing it")
                _fail(task, WorkerLost("the worker crashed"))
                if await self._replace(slot, "crashed") is None:
                    return
                continue
            finally:
                self._busy -= 1
            if isinstance(reply, WorkFailed):
                _fail(task, AnimebotError(reply.message, code=reply.code))
            elif not task.result.done():
                task.result.set_result(reply)

    async def _next_task(self) -> Task | None:
        """The next queued task, or None once the pool is paused (even while waiting for one)."""
        if self._paused.is_set():
            return None
        getting = asyncio.ensure_future(self._queue.get())
        pausing = asyncio.ensure_future(self._paused.wait())
        try:
            await asyncio.wait([getting, pausing], return_when=asyncio.FIRST_COMPLETED)
        finally:
            pausing.cancel()
            if not getting.done():
                getting.cancel()
        if getting.cancelled():
            return None
        task = getting.result()
        if self._paused.is_set():  # both at once: leave it queued for close() to drop
            self._queue.put_nowait(task)
            return None
        return task

    async def _replace(self, slot: int, why: str) -> _Worker | None:
        """Kill the slot's worker and start another, retrying with backoff until one starts;
        None, and the slot left empty, once the pool is stopping.

        A running pool's slot must never stay empty: its dispatcher is the
        only one that serves the tasks it takes from the queue.
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
        process = self._ctx.Process(target=serve, args=(child, self.spec), name=f"animebot-worker-{slot}", daemon=True)
        process.start()
        child.close()
        try:
            ready = await asyncio.wait_for(asyncio.to_thread(parent.recv), START_TIMEOUT_S)
        except (EOFError, OSError, asyncio.TimeoutError):
            process.kill()
            raise AnimebotError(f"worker {slot} did not start (exit code {process.exitcode})", code="worker_start")
        if ready[0] != "ready":
            process.join(STOP_TIMEOUT_S)
            raise AnimebotError(f"worker {slot} could not load its model: {ready[1]}", code="worker_start")
        log.info("worker %d ready (pid %s, %d thread(s), %s, face pass %s)", slot, ready[1], self.spec.threads,
                 ready[3], ready[2])
        return _Worker(process, parent)

    @staticmethod
    def _stop(worker: _Worker) -> None:
        try:
            worker.conn.send(None)
        except OSError:
            pass
        worker.process.join(STOP_TIMEOUT_S)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(STOP_TIMEOUT_S)
        worker.conn.close()


class Reservation:
    """Places held in a pool's queue for one request; each :meth:`submit` uses one.

    Release what is left (``with`` does) once the request needs no more: a
    photo found in the cache after its download needs no place.
    """

    def __init__(self, pool: WorkerPool, places: int) -> None:
        self._pool = pool
        self.places = places

    def submit(self, job_id: str, data: bytes, style: str, settings: ConvertSettings) -> Task:
        if self.places < 1:  # more photos than reserved: queue like anyone else
            return self._pool.submit(job_id, data, style, settings)
        self.places -= 1
        self._pool._reserved -= 1
        return self._pool._put(job_id, data, style, settings)

    def release(self) -> None:
        self._pool._reserved -= self.places
        self.places = 0

    def __enter__(self) -> "Reservation":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _exchange(conn: Connection, order: WorkOrder) -> Converted | WorkFailed:
    """Send one order and wait for its answer (runs on a pipe thread)."""
    conn.send(order)
    return conn.recv()


def _fail(task: Task, exc: Exception) -> None:
    if not task.result.done():
        task.result.set_exception(exc)
