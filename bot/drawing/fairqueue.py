"""The photos waiting for a worker, one line per user, served in turn.

Someone who sends one photo should wait behind at most one photo of each
other user, not behind somebody's ten. This is start-time fair queuing: a
ticket's *tag* is where its user's line has got to (the sum of the costs of
the user's earlier tickets), but never less than the tag of the ticket a worker
took last, so a newcomer starts at the front, not at zero and not behind
everyone. Workers always take the smallest tag; equal tags go in arrival
order. With every cost 1 that is plain round-robin between users.

Costs are numbers, not counts: a photo drawn at twice the size or with
faces, or a clip of many frames, moves its user's line on further, so heavy
work cannot starve light work. A cost is estimated when the ticket is queued
and corrected with :meth:`FairQueue.charge` once the worker says what it did.

Both pools (local processes and Celery workers) take their work from this
queue, so fairness holds however many machines draw; the journal keeps the
jobs themselves, and a restart queues them again in the order they came.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from inference.drawer import WorkOrder
from inference.pipeline import Converted


@dataclass(eq=False)
class Ticket:
    """One photo to draw. ``started`` is set when a worker takes it, ``result`` when it is drawn."""

    order: WorkOrder
    user_id: int
    key: str  # the result's cache key: names the ticket on the broker, so a resubmission is the same ticket
    cost: float = 1.0
    allowance: float = 1.0  # how many job timeouts its worker may take (bot/drawing/pool.py, ``time_limit``)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    result: asyncio.Future[Converted] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    queued_at: float = field(default_factory=time.monotonic)
    waited_s: float = 0.0
    tag: float = 0.0
    seq: int = 0
    progress: tuple[int, int] | None = None  # a clip's frames drawn, of how many (as its worker reports)
    stop: Callable[[], None] | None = None  # asks its worker to stop it (set by the pool while it is drawn)

    @property
    def job_id(self) -> str:
        return self.order.job_id

    def take(self, at: float | None = None) -> None:
        """Mark the ticket as on its way to a worker since ``at`` (monotonic; default now)."""
        self.waited_s = (time.monotonic() if at is None else at) - self.queued_at
        self.started.set()


class FairQueue:
    """A priority queue of :class:`Ticket` by (tag, arrival); a ticket cancelled while waiting is skipped."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Ticket]] = []
        self._seq = itertools.count()
        self._finish: dict[int, float] = {}  # user -> the tag their next ticket starts at
        self._now = 0.0  # the tag of the ticket taken last
        self._arrival: asyncio.Future[None] | None = None
        self._ranks: dict[Ticket, int] | None = None  # cached order of the waiting tickets

    def put(self, ticket: Ticket) -> None:
        ticket.tag = max(self._now, self._finish.get(ticket.user_id, 0.0))
        ticket.seq = next(self._seq)
        self._finish[ticket.user_id] = ticket.tag + ticket.cost
        heapq.heappush(self._heap, (ticket.tag, ticket.seq, ticket))
        self._ranks = None
        if self._arrival is not None and not self._arrival.done():
            self._arrival.set_result(None)

    def pop(self) -> Ticket | None:
        """The next ticket to draw, or None if nothing waits."""
        while self._heap:
            tag, _, ticket = heapq.heappop(self._heap)
            self._ranks = None
            if ticket.result.done():  # its owner gave up on it while it waited
                continue
            self._now = tag
            self._forget_idle_users()
            return ticket
        return None

    def put_back(self, ticket: Ticket) -> None:
        """Return a ticket taken by :meth:`pop` that could not be handed to a worker, in its old place."""
        heapq.heappush(self._heap, (ticket.tag, ticket.seq, ticket))
        self._ranks = None

    async def arrival(self) -> None:
        """Return when a ticket is put (at once if one is waiting)."""
        if self.waiting:
            return
        if self._arrival is None or self._arrival.done():
            self._arrival = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._arrival)

    def charge(self, user_id: int, extra: float) -> None:
        """Correct a user's line once a ticket's real cost is known (``extra`` may be negative)."""
        if user_id in self._finish:
            self._finish[user_id] = max(self._now, self._finish[user_id] + extra)

    def ahead_of(self, ticket: Ticket) -> int:
        """How many waiting tickets a worker will take before ``ticket`` (as things stand: a newcomer
        may still come in front)."""
        if self._ranks is None:
            live = sorted((tag, seq, t) for tag, seq, t in self._heap if not t.result.done())
            self._ranks = {t: i for i, (_, _, t) in enumerate(live)}
        return self._ranks.get(ticket, 0)

    @property
    def waiting(self) -> int:
        return sum(1 for _, _, t in self._heap if not t.result.done())

    def by_user(self) -> Counter[int]:
        """Waiting tickets per user, for /stats."""
        return Counter(t.user_id for t in self.live())

    def live(self) -> list[Ticket]:
        """The tickets waiting (not given up on while they waited)."""
        return [t for _, _, t in self._heap if not t.result.done()]

    def drop_all(self) -> list[Ticket]:
        """Empty the queue (a stop); the tickets' jobs stay open in the journal."""
        tickets = [t for _, _, t in self._heap]
        self._heap.clear()
        self._ranks = None
        return tickets

    def _forget_idle_users(self) -> None:
        """A user whose line ends at or before the current tag starts there anyway: drop them, so the
        table stays as small as the set of users with recent work."""
        if len(self._finish) > 2 * len(self._heap) + 64:
            self._finish = {u: f for u, f in self._finish.items() if f > self._now}
