"""What the request flow needs from the workers, whichever machines they run on.

:class:`Pool` owns the waiting photos (a :class:`~bot.drawing.fairqueue.FairQueue`),
the bound on how many may wait, and the places reserved for photos still
being downloaded. Subclasses only move tickets from that queue to workers as
they have room: :class:`bot.drawing.local.pool.LocalPool` to the bot's own
processes (the default), :class:`bot.drawing.celery.pool.CeleryPool` to
``animebot worker`` processes through Celery. Because the queue stays here,
in the bot, the order of service is fair across every worker, and nothing
but the photos being drawn sits in a broker.
"""
from __future__ import annotations

import abc
import asyncio
import time
from dataclasses import dataclass

from storage.errors import AnimebotError
from bot.drawing.fairqueue import FairQueue, Ticket
from inference.drawer import WorkOrder
from inference.pipeline import DEFAULT_MAX_SIDE, ConvertSettings

FACE_COST = 0.5  # a face pass costs about half a photo (docs/benchmarks.md, "The face pass")
# The most job timeouts a worker may take on one ticket, whatever its allowance: the flow gives a clip 10
# (bot/flow/orders.py) and an HD 4 (bot/flow/kinds/hd.py), and Celery's visibility timeout is set past this.
LONGEST_ALLOWANCE = 10
FRAME_COST = 0.25  # a frame at 480 px, against a photo at 720 (0.27 s against 1.2 s, docs/clips.md)


def time_limit(allowance: float, timeout_s: float) -> float:
    """How long a worker may take on a ticket: the job timeout times its allowance (the flow's), at most the longest."""
    return timeout_s * min(allowance, LONGEST_ALLOWANCE)


class PoolBusy(AnimebotError):
    code = "busy"


class WorkerLost(AnimebotError):
    """The worker running a ticket crashed or hung; the ticket is not retried."""

    code = "worker_lost"


@dataclass(frozen=True)
class WorkerView:
    """One worker as /stats shows it."""

    name: str
    styles: tuple[str, ...]
    engine: str
    busy: bool


@dataclass(frozen=True)
class Line:
    """One user's photos in the pool now, as the admin page shows the queue."""

    user_id: int
    waiting: int
    drawing: int
    oldest_s: float  # how long their photo waiting longest has waited (0 when none waits)


def photo_cost(settings: ConvertSettings) -> float:
    """A photo's cost before it is drawn: proportional to the pixels drawn (faces are charged after)."""
    return max(0.25, (settings.max_side / DEFAULT_MAX_SIDE) ** 2)


def order_cost(order: WorkOrder) -> float:
    """What an order moves its user's line on by: a photo's cost, or a clip's frames at most (it is
    charged what it really drew once done)."""
    if order.clip is None:
        return photo_cost(order.settings)
    limits = order.clip.limits
    return FRAME_COST * limits.max_fps * limits.max_seconds


class Pool(abc.ABC):
    """Waiting photos in a fair queue, drawn by some workers. ``await start()`` first."""

    def __init__(self, queue_size: int, timeout_s: float) -> None:
        self.queue_size = queue_size
        self.timeout_s = timeout_s
        self.queue = FairQueue()
        self._reserved = 0  # queue places promised to requests still downloading
        self._paused = asyncio.Event()  # set: no new ticket goes to a worker (shutting down)

    # --- what subclasses provide ---------------------------------------------------------

    @abc.abstractmethod
    async def start(self) -> None:
        """Start (or find) the workers; return once the pool can draw."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop taking tickets, drop what waits (its jobs stay in the journal), let go of the workers."""

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """How many photos the workers can draw at once (0 while none is reachable)."""

    @property
    @abc.abstractmethod
    def running(self) -> int:
        """Photos on a worker now."""

    @abc.abstractmethod
    def healthy(self) -> tuple[bool, str]:
        """Whether photos are being drawn, and a few words on the workers for /healthz and /stats."""

    @abc.abstractmethod
    def workers(self) -> list[WorkerView]:
        """The workers drawing for this bot."""

    @abc.abstractmethod
    def drawing(self) -> list[Ticket]:
        """The tickets on a worker now: whose photos are being drawn (:meth:`lines`)."""

    def online(self) -> int:
        """Drawing processes up now, for the operator's alerts: ``size``, unless the pool counts
        processes that may be down (the bot's own, while one is being started again)."""
        return self.size

    def broker_reachable(self) -> bool | None:
        """Whether the broker answers, for the operator's alerts; None for a pool that needs none."""
        return None

    # --- the queue, shared by every kind of pool --------------------------------------------

    @property
    def waiting(self) -> int:
        return self.queue.waiting

    def lines(self) -> list[Line]:
        """Each user with photos waiting or drawn now, the longest wait first: the admin page's queue, which
        shows whose photos the bot is busy with, and whether anyone has been waiting too long."""
        now = time.monotonic()
        waiting, drawing = self.queue.live(), self.drawing()
        users = {t.user_id for t in waiting} | {t.user_id for t in drawing}
        lines = [Line(uid, sum(t.user_id == uid for t in waiting), sum(t.user_id == uid for t in drawing),
                      max((now - t.queued_at for t in waiting if t.user_id == uid), default=0.0)) for uid in users]
        return sorted(lines, key=lambda line: (-line.oldest_s, -line.drawing, line.user_id))

    def free_slots(self) -> int:
        """How many more photos may be taken on now: the queue's free places plus the idle workers
        (a photo still downloading is headed for one of those, not for the queue). Places reserved
        but not yet used count as taken."""
        idle = max(0, self.size - self.running)
        return max(0, self.queue_size + idle - self.queue.waiting - self._reserved)

    def reserve(self, places: int) -> Reservation | None:
        """Hold ``places`` in the queue for photos still to be downloaded; None if there is no room."""
        if places > self.free_slots():
            return None
        self._reserved += places
        return Reservation(self, places)

    def submit(self, order: WorkOrder, user_id: int, key: str, allowance: float = 1.0) -> Ticket:
        """Queue a photo, or raise :class:`PoolBusy` when the queue is full. ``allowance``: how many job
        timeouts its worker may take (:func:`time_limit`)."""
        if self.free_slots() < 1:
            raise PoolBusy("the queue is full")
        return self.requeue(order, user_id, key, allowance)

    def requeue(self, order: WorkOrder, user_id: int, key: str, allowance: float = 1.0) -> Ticket:
        """Queue a photo whatever the bound: for one already promised an answer (after a restart)."""
        ticket = Ticket(order, user_id, key, cost=order_cost(order), allowance=allowance)
        self.queue.put(ticket)
        return ticket

    def settle(self, ticket: Ticket, faces: int, frames: int | None = None) -> None:
        """Charge the ticket's user for what the worker really did: its face passes, or for a clip the
        frames it drew rather than the most it could have."""
        extra = FACE_COST * faces
        if frames is not None:
            extra += FRAME_COST * frames - ticket.cost
        self.queue.charge(ticket.user_id, extra)

    def cancel(self, ticket: Ticket) -> None:
        """Stop a ticket: dropped if it still waits; a clip on a worker is asked to stop, and the worker
        answers "cancelled" at its next frame (a Celery worker hears it with its next heartbeat); a
        photo on a worker is no longer waited for."""
        if ticket.stop is not None:
            ticket.stop()
        else:
            ticket.result.cancel()

    def place(self, ticket: Ticket) -> int:
        """How many photos a worker will take before this one (0: it is next)."""
        return self.queue.ahead_of(ticket)

    def pause(self) -> None:
        """Let running tickets finish but start no new ones: the first step of a graceful stop."""
        self._paused.set()

    async def _next_ticket(self) -> Ticket | None:
        """The next ticket in fair order, waiting for one; None once the pool is paused."""
        while not self._paused.is_set():
            ticket = self.queue.pop()
            if ticket is not None:
                return ticket
            arrival = asyncio.ensure_future(self.queue.arrival())
            pausing = asyncio.ensure_future(self._paused.wait())
            try:
                await asyncio.wait([arrival, pausing], return_when=asyncio.FIRST_COMPLETED)
            finally:
                arrival.cancel()
                pausing.cancel()
        return None

    def _drop_waiting(self) -> None:
        for ticket in self.queue.drop_all():
            ticket.result.cancel()


class Reservation:
    """Places held in a pool's queue for one request; each :meth:`submit` uses one.

    Release what is left (``with`` does) once the request needs no more: a
    photo found in the cache after its download needs no place.
    """

    def __init__(self, pool: Pool, places: int) -> None:
        self._pool = pool
        self.places = places

    def submit(self, order: WorkOrder, user_id: int, key: str, allowance: float = 1.0) -> Ticket:
        if self.places < 1:  # more photos than reserved: queue like anyone else
            return self._pool.submit(order, user_id, key, allowance)
        self.places -= 1
        self._pool._reserved -= 1
        return self._pool.requeue(order, user_id, key, allowance)

    def release(self) -> None:
        self._pool._reserved -= self.places
        self.places = 0

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def fail(ticket: Ticket, exc: Exception) -> None:
    """End a ticket with an error, unless its owner already gave up on it."""
    if not ticket.result.done():
        ticket.result.set_exception(exc)
