"""Where a request's drawings are in the pool: what a way of answering shows while the user waits.

The flow fills it (each photo's ticket, as it is queued); the chat turns it
into a status message (bot/chat/status.py) and the Mini App's page asks it for
the place in the queue (bot/webapp/jobs.py). Neither is known to the flow.
"""
from __future__ import annotations

from collections.abc import Callable

from bot.drawing.fairqueue import Ticket
from bot.drawing.pool import Pool


class Progress:
    """A request's tickets in the pool, and who wants to hear of its first one."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.tickets: list[Ticket] = []
        self._on_first: list[Callable[[], None]] = []

    def on_first(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when the first photo is queued: nothing is shown for answers from the cache."""
        self._on_first.append(listener)

    def add(self, ticket: Ticket) -> None:
        self.tickets.append(ticket)
        if len(self.tickets) == 1:
            for listener in self._on_first:
                listener()

    def ahead(self) -> int | None:
        """Photos before this request's first waiting one; None once one of its photos is being drawn,
        or is next while a worker is free (it starts at once)."""
        if any(ticket.started.is_set() for ticket in self.tickets):
            return None
        waiting = [ticket for ticket in self.tickets if not ticket.result.done()]
        if not waiting:
            return None
        ahead = min(self.pool.place(ticket) for ticket in waiting)
        return None if ahead == 0 and self.pool.running < self.pool.size else ahead

    @property
    def clip(self) -> bool:
        """Whether a clip is drawn: as its bytes turned out, not as the message said (a GIF file of
        one frame is a picture)."""
        return any(ticket.order.clip is not None for ticket in self.tickets)

    @property
    def frames(self) -> tuple[int, int] | None:
        """A clip's frames drawn so far, and how many it has; None before its first."""
        return next((ticket.progress for ticket in self.tickets if ticket.progress), None)
