"""The scaled-out pool: photos drawn by ``animebot worker`` processes, through Celery over Redis.

The broker is transport, not storage. The queue stays in the bot (the fair
queue of :class:`~bot.drawing.pool.Pool`, backed by the journal), and a photo goes
to the broker only when a worker process is free to take it, so Redis holds
at most one photo per worker process and a Redis that loses everything
loses nothing the bot cannot send again.

How the bot knows what happens on the workers:

* every worker process writes a heartbeat to Redis every 2 s (its styles,
  its engine, the task it is drawing), which says how many photos the
  cluster can take now and which tasks are really being drawn;
* results come as Celery's Redis backend pushes them, through its result
  consumer's pub/sub subscription, drained by a thread of its own
  (bot/drawing/celery/results.py): nothing polls them; so do a clip's
  frames so far (its PROGRESS state);
* what to do with each photo at each look (wait, take its result, send it
  again, give it up) is decided by bot/drawing/celery/resend.py.

A photo's bytes wait in a key of their own, which the order names (the
claim check, bot/drawing/celery/wire.py), and the bot deletes that key, and
the result, as soon as it is done with the task: answered, stopped or given
up. A task that vanishes (its worker killed, Redis restarted empty, its
result expired) is sent again under the same task id: the journal's job is
the idempotency key, so whatever is delivered twice is answered once. A copy
of the order that Redis hands out again later (from a worker killed whole)
finds its photo gone, and its worker skips it: nothing else needs removing,
and no revoke is needed for a photo the bot stopped waiting for.

Every blocking Redis or Celery call runs on one thread of its own, and the
results' subscription on another, so the event loop never waits on the
network, and the number of threads and connections does not grow with the
number of users.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import redis
from celery.result import AsyncResult
from kombu.exceptions import KombuError

from storage.errors import AnimebotError
from bot.drawing.celery.app import QUEUE, REDIS_TIMEOUT_S, for_bot, visibility_timeout
from bot.drawing.celery.results import PushedRedisBackend, Results
from bot.drawing.celery.resend import MAX_SENDS, UNREADABLE, Seen, Step, decide
from bot.drawing.celery.wire import (CLAIMED_SINCE, READS_HEADER, TASK_NAME, WIRE_VERSION, BadMessage, WorkerInfo,
                                     cancel_key, order_summary, order_to_message, photo_key, put_photo, read_heartbeats,
                                     result_from_message, task_id_for)
from bot.drawing.fairqueue import Ticket
from bot.drawing.pool import Pool, WorkerLost, WorkerView, fail, time_limit
from inference.drawer import WorkFailed

log = logging.getLogger("animebot.pool")

WORKERS_EVERY_S = 1.0  # how often the heartbeats are read, and every photo in flight decided on
BEAT_STALE_S = 6.0  # a worker process whose heartbeat has not changed for this long is gone (it beats every 2 s)
BROKER_ERRORS = (redis.RedisError, KombuError, OSError)
MISSING_MODEL = ("unknown_style", "not_installed", "weights", "bad_model")  # a worker's answer when it lacks the style


@dataclass(eq=False)
class _InFlight:
    task: Ticket
    task_id: str
    sent_at: float
    seen_at: float  # the last time a live worker's heartbeat named this task (or when it was sent)
    crashes: int = 0  # times its worker died while drawing it
    claimed: bool = False  # a worker's heartbeat has named it
    sends: int = 1  # times its order went to Redis
    drawn_by: tuple[str, int] | None = None  # the process whose heartbeat last named it
    # Processes that died drawing it: their last heartbeat names it until it is stale, and claims nothing.
    dead: set[tuple[str, int]] = field(default_factory=set)
    held: tuple[str, Any] | None = None  # a failure to act on once the pause before a send again is over


class CeleryPool(Pool):
    """Sends photos to Celery as worker processes have room, and collects their results."""

    def __init__(self, broker_url: str, queue_size: int, timeout_s: float, secret: bytes) -> None:
        super().__init__(queue_size, timeout_s)
        self._secret = secret  # keys the task ids (wire.task_id_for)
        self._app = for_bot(broker_url, timeout_s)
        self._redis = redis.Redis.from_url(broker_url, socket_timeout=REDIS_TIMEOUT_S,
                                           socket_connect_timeout=REDIS_TIMEOUT_S)
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker")
        self._in_flight: dict[str, _InFlight] = {}
        self._workers: list[WorkerInfo] = []  # the live ones
        self._beats: dict[tuple[str, int], tuple[float, float]] = {}  # process -> (its last beat, when we saw it change)
        self._down_since: float | None = None  # the broker is unreachable since (wall clock)
        # Every live worker process reads claim checks: orders go without their bytes. Until then (a rolling
        # upgrade, with workers of the release before still up) they carry them, as those workers read.
        self._claims = False
        self._room = asyncio.Event()
        self._ended: list[str] = []  # tasks ended since the last look: their photos and results go
        self._refusals: set[str] = set()  # what workers said refusing an order, each logged once
        self._loops: list[asyncio.Task[None]] = []
        backend = self._app.backend
        assert isinstance(backend, PushedRedisBackend), backend  # for_bot's
        self._results = Results(backend, lambda task_id: task_id in self._in_flight, self._progressed)

    # --- Pool -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Look for workers once (the bot starts even if none is up yet, or Redis is down: photos wait)."""
        try:
            await self._look_for_workers()
            ok, how = self.healthy()
            (log.info if ok else log.warning)("Celery pool: %s", how)
        except BROKER_ERRORS as exc:  # said once; the watch loop says when it is back
            self._broker_down(exc)
        self._results.start()
        self._loops = [asyncio.create_task(self._dispatch(), name="celery-dispatch"),
                       asyncio.create_task(self._watch(), name="celery-watch")]

    async def close(self) -> None:
        self.pause()
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._results.stop()
        self._drop_waiting()
        for flight in self._in_flight.values():  # their jobs stay open in the journal
            flight.task.result.cancel()
        self._in_flight.clear()
        self._io.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self._redis.close)

    @property
    def size(self) -> int:
        return len(self._workers)

    @property
    def running(self) -> int:
        return len(self._in_flight)

    def healthy(self) -> tuple[bool, str]:
        if self._down_since is not None:
            return False, f"the broker is unreachable since {time.strftime('%H:%M:%S', time.gmtime(self._down_since))} UTC"
        if not self._workers:
            return False, "no worker process online"
        nodes = len({w.name for w in self._workers})
        return True, f"{len(self._workers)} drawing process(es) in {nodes} animebot worker(s), via Celery"

    def broker_reachable(self) -> bool | None:
        return self._down_since is None

    def workers(self) -> list[WorkerView]:
        return [WorkerView(f"{w.name} (pid {w.pid})", w.styles, w.engine, w.task is not None) for w in self._workers]

    def drawing(self) -> list[Ticket]:
        return [flight.task for flight in self._in_flight.values()]

    def _progressed(self, task_id: str, meta: object) -> None:
        """A clip's frames so far, as its worker pushed them (anything else in a PROGRESS state is ignored)."""
        flight = self._in_flight.get(task_id)
        done, total = (meta.get("done"), meta.get("total")) if isinstance(meta, dict) else (None, None)
        if flight is not None and type(done) is int and type(total) is int:
            flight.task.progress = (done, total)

    # --- sending ------------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        """Send the next photo in fair order whenever a worker process is free."""
        while True:
            while self._room_on_workers() <= 0:
                self._room.clear()
                await self._room.wait()
            task = await self._next_ticket()
            if task is None:
                return  # paused for a stop
            flight = _InFlight(task, task_id_for(task.job_id, task.key, self._secret), time.monotonic(), time.monotonic())
            if task.order.clip is not None:
                task.stop = self._stopper(flight)
            self._in_flight[flight.task_id] = flight  # before the send: its result may be pushed at once
            if await self._send(flight):
                task.take(at=flight.sent_at)  # the send counts as drawing time: it is the broker's cost
            else:
                self._in_flight.pop(flight.task_id, None)
                self.queue.put_back(task)
                await asyncio.sleep(1.0)

    def _room_on_workers(self) -> int:
        """Photos the live worker processes can take now. One drawing what the bot no longer waits for
        (a photo whose job was stopped, an order of another bot on the same broker) has no room:
        a photo sent to it would wait in Redis while its status said "Drawing…"."""
        elsewhere = sum(1 for w in self._workers if w.task is not None and w.task not in self._in_flight)
        return len(self._workers) - elsewhere - len(self._in_flight)

    async def _send(self, flight: _InFlight) -> bool:
        """Put the photo in its key (unless a worker of the release before may take the order), send the
        order (which follows its result, bot/drawing/celery/results.py), then read its result once: one
        stored before this send is never pushed."""
        order = flight.task.order
        key = photo_key(flight.task_id) if self._claims else None
        message = order_to_message(order, key)
        limit = self._limit(flight)
        loop = asyncio.get_running_loop()

        def send() -> None:
            if key is not None:  # long enough for the order to be taken and drawn, and no longer
                put_photo(self._redis, key, order.data, visibility_timeout(self.timeout_s))
            self._app.send_task(TASK_NAME, args=[message], task_id=flight.task_id, queue=QUEUE, time_limit=round(limit),
                                soft_time_limit=round(limit - min(5.0, limit / 10)), argsrepr=order_summary(order),
                                kwargsrepr="{}", headers={READS_HEADER: WIRE_VERSION})
        try:
            await loop.run_in_executor(self._io, send)
        except Exception as exc:  # kombu and Celery wrap a lost Redis in several types, RuntimeError among them
            self._broker_down(exc)
            return False
        try:
            (stored,) = await loop.run_in_executor(self._io, self._results.read, self._app, [flight.task_id])
        except BROKER_ERRORS:
            self._results.read_all = True  # sent all the same; read at the next look
            return True
        if stored[0] != "PENDING":
            self._results.push(flight.task_id, *stored)
        return True

    # --- watching ------------------------------------------------------------------------------

    async def _watch(self) -> None:
        """Follow the heartbeats, take the results pushed, and send again what vanished: at each push, and
        every WORKERS_EVERY_S."""
        last_look = 0.0
        while True:
            self._results.news.clear()
            try:
                if time.monotonic() - last_look >= WORKERS_EVERY_S:
                    await self._look_for_workers()
                    last_look = time.monotonic()
                if self._in_flight:
                    await self._collect()
                if self._down_since is not None:
                    log.info("the broker is reachable again; %d photo(s) in flight, %d waiting",
                             len(self._in_flight), self.waiting)
                    self._down_since = None
                    for flight in self._in_flight.values():  # nothing could be seen meanwhile: start afresh
                        flight.sent_at = flight.seen_at = time.monotonic()
                    self._results.read_all = True  # nor pushed
            except BROKER_ERRORS as exc:
                self._broker_down(exc)
                await asyncio.sleep(1.0)
            except Exception:  # a bug: keep its traceback, and keep watching, or every photo would hang
                log.exception("Celery pool: watching the workers failed; going on")
                await asyncio.sleep(1.0)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._results.news.wait(), max(0.0, last_look + WORKERS_EVERY_S - time.monotonic()))

    async def _look_for_workers(self) -> None:
        """Read the heartbeats. A process counts as live while its beat keeps changing, as timed by our own
        clock: a killed worker is seen in seconds, not when its key expires, and the machines' clocks
        need not agree."""
        heard = await asyncio.get_running_loop().run_in_executor(self._io, read_heartbeats, self._redis)
        now = time.monotonic()
        beats = {}
        for w, _ in heard:
            last, changed = self._beats.get((w.name, w.pid), (None, now))
            beats[w.name, w.pid] = (w.seen, now if w.seen != last else changed)
        self._beats = beats
        live = [(w, reads) for w, reads in heard if now - beats[w.name, w.pid][1] < BEAT_STALE_S]
        self._workers = [w for w, _ in live]
        self._claims = bool(live) and all(reads >= CLAIMED_SINCE for _, reads in live)
        self._room.set()
        for worker in self._workers:
            flight = self._in_flight.get(worker.task) if worker.task else None
            if flight is not None and (worker.name, worker.pid) not in flight.dead:
                flight.seen_at, flight.claimed, flight.drawn_by = now, True, (worker.name, worker.pid)
                flight.task.progress = worker.progress or flight.task.progress  # a worker of the release before

    def _stopper(self, flight: _InFlight) -> Callable[[], None]:
        """How to stop a clip on a worker: a key in Redis that its heartbeat reads, and its drawing
        between frames (set on the broker's thread, like every Redis call), kept while it may be drawn."""
        task_id = flight.task_id

        def stop() -> None:
            asking = asyncio.get_running_loop().run_in_executor(
                self._io, lambda: self._redis.set(cancel_key(task_id), "1", ex=int(self._limit(flight))))
            asking.add_done_callback(said)

        def said(asking: asyncio.Future[Any]) -> None:
            if not asking.cancelled() and asking.exception() is not None:
                log.warning("task %s: cannot ask its worker to stop (%s); it will finish", task_id, asking.exception())
        return stop

    async def _collect(self) -> None:
        """Decide on every task in flight, with its result if one was pushed (or read, when a look at
        every stored result is due), and carry out what :func:`decide` says for each."""
        flights = list(self._in_flight.values())
        looks: list[tuple[str, Any]] = [("PENDING", None)] * len(flights)
        if self._results.read_all:
            looks = await asyncio.get_running_loop().run_in_executor(self._io, self._results.read, self._app,
                                                                     [f.task_id for f in flights])
            self._results.read_all = False
        looks = [self._results.take(f.task_id, f.held or look) for f, look in zip(flights, looks)]
        now = time.monotonic()
        idle = any(w.task is None for w in self._workers)
        for flight, (state, value) in zip(flights, looks):
            if self._in_flight.get(flight.task_id) is not flight:
                continue
            step = decide(Seen(state, type(value).__name__ if state == "FAILURE" else "", flight.task.result.done(),
                               flight.claimed, now - flight.sent_at, now - flight.seen_at, self._limit(flight),
                               flight.crashes, idle, flight.sends))
            flight.held = (state, value) if step.action == "wait" and state in ("FAILURE", UNREADABLE) else None
            await self._carry_out(flight, step, value)
        if self._ended:
            await asyncio.get_running_loop().run_in_executor(self._io, self._let_go, self._ended)
            self._ended = []

    async def _carry_out(self, flight: _InFlight, step: Step, value: Any) -> None:
        job = flight.task.job_id
        if step.refused and (said := str(getattr(value, "reason", value))) not in self._refusals:
            self._refusals.add(said)  # once each: in a rolling upgrade, which releases met
            log.warning("a worker refused an order unread (%s): of another release? An order is sent at most %d "
                        "times in all, then its user is told to try again later", said, MAX_SENDS)
        if step.action == "take":
            self._finish(flight, value)
        elif step.action == "drop":
            self._forget(flight)
        elif step.action == "give_up":
            log.warning("job %s: task %s given up: %s (%.0f s since sent, %d crash(es) of its worker)", job,
                        flight.task_id, step.why, time.monotonic() - flight.sent_at, flight.crashes + step.crash)
            self._end(flight, AnimebotError(step.why, code="upgrading") if step.refused else WorkerLost(step.why))
        elif step.action == "resend":
            where = ""
            if step.crash:
                flight.crashes += 1
                if flight.drawn_by is not None:
                    flight.dead.add(flight.drawn_by)
                    where = " (it was on {} pid {})".format(*flight.drawn_by)
            log.warning("job %s: task %s not answered (%s); sending it again%s", job, flight.task_id, step.why, where)
            await asyncio.get_running_loop().run_in_executor(self._io, AsyncResult(flight.task_id, app=self._app).forget)
            if await self._send(flight):
                flight.sent_at = flight.seen_at = time.monotonic()
                flight.claimed, flight.drawn_by = False, None
                flight.sends += 1

    def _let_go(self, tasks: list[str]) -> None:
        """Delete the photos and results of the tasks the bot is done with (answered, stopped or given up):
        a copy of an order that comes back from a dead worker finds no photo and is skipped, and a worker
        still drawing one (a photo whose user said /forget) stores nothing (bot/drawing/celery/task.py).
        The photos go first, so that a result stored after its delete is one its worker deletes."""
        self._redis.delete(*(photo_key(task_id) for task_id in tasks))
        for task_id in tasks:
            AsyncResult(task_id, app=self._app).forget()
            self._results.backend.unfollow(task_id)

    def _limit(self, flight: _InFlight) -> float:
        """How long its worker may take: the job timeout, times the allowance the flow gave it."""
        return time_limit(flight.task.allowance, self.timeout_s)

    def _finish(self, flight: _InFlight, message: object) -> None:
        try:
            reply = result_from_message(message)
        except BadMessage as exc:
            log.warning("job %s: unreadable result from a worker: %s", flight.task.job_id, exc.message)
            self._end(flight, WorkerLost("the worker sent an unreadable result"))
            return
        if isinstance(reply, WorkFailed):
            if reply.code in MISSING_MODEL:  # the bot has the style, this worker does not
                log.warning("job %s: a worker cannot draw %s: %s", flight.task.job_id, flight.task.order.style,
                            reply.message)
                reply = WorkFailed(reply.job_id, "style_unavailable", reply.message)
            self._end(flight, AnimebotError(reply.message, reply.code, reply.values))
            return
        self._forget(flight)
        if not flight.task.result.done():
            flight.task.result.set_result(reply)

    def _end(self, flight: _InFlight, exc: Exception) -> None:
        self._forget(flight)
        fail(flight.task, exc)

    def _forget(self, flight: _InFlight) -> None:
        """The bot is done with this task, answered or not: its room is free, and no worker should draw it."""
        del self._in_flight[flight.task_id]
        self._results.drop(flight.task_id)
        self._ended.append(flight.task_id)
        self._room.set()

    def _broker_down(self, exc: BaseException) -> None:
        """One line when the broker goes away (not one per retry); photos keep waiting in the queue."""
        if self._down_since is None:
            self._down_since = time.time()
            self._workers = []
            log.error("the broker is unreachable (%s: %s); photos wait in the queue until it is back",
                      exc.__class__.__name__, exc)
