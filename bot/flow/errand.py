"""One request being answered, as each of its drawings needs it (bot/flow/results.py, bot/flow/kinds/)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bot.drawing.pool import Reservation
from bot.flow.progress import Progress
from bot.flow.requests import Request, Source
from bot.flow.running import RunningJob

Fetched = dict[Source, "asyncio.Task[bytes]"]  # each photo of a request downloaded once, however many styles


@dataclass(frozen=True)
class Errand:
    """One request being answered, as each of its drawings needs it: the request; its running job (for
    Cancel and /forget); its progress (what the user is shown); its queue places, reserved at take-on
    (None: recovered after a restart, it waits for room); and its photos' downloads."""

    req: Request
    job: RunningJob
    progress: Progress
    reservation: Reservation | None
    fetched: Fetched
