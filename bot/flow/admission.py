"""Admission: whether a new request may be drawn, and how much of it, before anything is sent.

It weighs a request against the user's rate, daily quota and waiting limit
and against the room left in the queue, keeps the part that fits (an album
or "All styles" may be cut short), reserves its queue places and writes its
job to the journal. One request of a user is weighed at a time (:meth:`turn`),
since the quota and the waiting limit count the user's earlier jobs.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace

from bot.drawing.pool import Pool, Reservation
from bot.flow.access import Access, Limits, Refusal
from bot.flow.kinds.registry import plan
from bot.flow.requests import Failed, Request, Source, StoredRequestError, request_from_json, request_to_json
from bot.service import metrics
from inference.clip_settings import ClipLimits
from storage.journal import Journal, NewJob

log = logging.getLogger("animebot.jobs")


@dataclass(frozen=True)
class FlowSettings:
    """What an operator tunes about the request flow (bot/service/config.py reads it)."""

    per_user_limit: int  # photos one user may have waiting or drawing at once
    limits: Limits | None = None  # the rate and the daily quota; None: no limits (tests, the bench)
    fast_styles: dict[str, str] = field(default_factory=dict)  # style -> its lite style, drawn when the queue is long
    fast_queue: int = 4  # from this many photos waiting, the lite styles are drawn instead
    clip_limits: ClipLimits = ClipLimits()


class Admission:
    """The per-user counts of photos in flight, and the checks a request passes to be taken on."""

    def __init__(self, journal: Journal, pool: Pool, settings: FlowSettings, forgetting: set[int]) -> None:
        self.journal = journal
        self.forgetting = forgetting  # users being forgotten (bot/flow/running.py)
        self.pool = pool
        self.settings = settings
        self.limits = settings.limits
        self.access = settings.limits.access if settings.limits is not None else Access()
        self.per_user_limit = settings.per_user_limit
        self._in_flight: Counter[int] = Counter()
        self._turns: dict[int, tuple[asyncio.Lock, int]] = {}  # user -> their intake lock, and its users

    def clip_lengths(self, req: Request) -> Request:
        """A clip counts only the seconds that will be drawn (one of unknown length: see Source.units)."""
        if not any(src.clip for src in req.sources):
            return req
        cap = self.settings.clip_limits.max_seconds
        return replace(req, sources=tuple(replace(s, seconds=min(s.seconds, cap) if s.seconds else None) if s.clip
                                          else s for s in req.sources))

    async def take_on(self, req: Request, needs: list[bool], held: contextlib.ExitStack
                      ) -> tuple[Request, Reservation] | Refusal | None:
        """Check the limits and write the job: the request as taken on (with its queue places, held by
        ``held``), a refusal, or None if the job already exists (its update came again).

        ``needs`` says, for each drawing, whether it must be drawn (neither cached nor under way): a
        press of a cached result's button draws nothing. Run it in the user's :meth:`turn`."""
        if await self.journal.job_state(req.job_id) is not None:
            log.info("job %s: already taken on; its update came again", req.job_id)
            return None
        if req.user_id in self.forgetting:  # not written down: it would name them again
            log.info("job %s: refused while its user is being forgotten", req.job_id)
            return Refusal("forgetting", {})
        if self.access.is_blocked(req.user_id):  # asked before the block (an album gathered); nothing written
            log.info("job %s: refused: user %s is blocked", req.job_id, req.user_id)
            return Refusal("blocked", {})
        kind = plan(req)
        n = kind.units(req)
        parts = [s.message_id for s in req.sources if s.message_id is not None]
        album = (req.album, parts) if req.album else None  # all of them, even those the quota leaves out
        refusal = None
        if self.limits is not None and n:
            # The rate counts what was asked for; the quota only what must be drawn (a preview sheet is one).
            drawing = kind.weighed(req, needs)
            allowed, refusal = await self.limits.allowance(req.user_id, n, drawing=drawing)
            if refusal is not None and refusal.code == "quota_reached" and req.sources[0].clip and allowed > 0:
                refusal = Refusal("clip_over_quota", {"units": drawing, "left": allowed, "count": self.limits.per_day})
            elif refusal is not None and refusal.code == "quota_reached" and allowed > 0 and kind.divisible:
                # an album, or "All styles", over what is left of today's quota: draw what fits
                keep = _keep(needs, allowed)
                req, refusal = replace(req.first(keep), left_out=len(needs) - keep), None
                needs = needs[:keep]
        # From here to reserve() and counted(), no await: other users' requests race for the same room.
        reservation = None
        if refusal is None:
            req, refusal = self._fit(req, needs)
            reservation = self.pool.reserve(sum(needs[:len(req.items)])) if refusal is None else None
        if refusal is not None or reservation is None:
            refusal = refusal or Refusal("busy", {})
            job = NewJob(req.job_id, req.chat_id, req.user_id, n, request_to_json(req), "refused", refusal.code)
            await self.journal.create_job(job, album)
            log.info("job %s: refused (%s) for user %s", req.job_id, refusal.code, req.user_id)
            metrics.JOBS.labels("refused").inc()
            return refusal
        held.enter_context(reservation)
        held.enter_context(self.counted(req.user_id, _waiting_units(req, needs[:len(req.items)])))
        job = NewJob(req.job_id, req.chat_id, req.user_id, kind.units(req), request_to_json(req))
        if not await self.journal.create_job(job, album):
            return None
        return req, reservation

    @contextlib.asynccontextmanager
    async def turn(self, user_id: int) -> AsyncIterator[None]:
        """One request of ``user_id`` at a time through the limits (the lock is dropped once unused)."""
        lock, users = self._turns.get(user_id, (asyncio.Lock(), 0))
        self._turns[user_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._turns[user_id]
            if users == 1:
                del self._turns[user_id]
            else:
                self._turns[user_id] = (lock, users - 1)

    def _fit(self, req: Request, needs: list[bool]) -> tuple[Request, Refusal | None]:
        """The part of the request that fits the user's waiting limit and the queue: all of it, the
        first drawings of an album or of "All styles" (the rest counted in ``left_out``), or none (a
        refusal). A preview sheet is all or nothing, and counts one photo against the user's waiting
        limit, as it does against the quota (its tiles are small); the sample's (the bot's own) is not
        the user's at all."""
        need = sum(needs)
        if not need:
            return req, None
        kind = plan(req)
        unlimited = self.access.is_admin(req.user_id) or not kind.units(req)
        if not kind.divisible:
            if not unlimited and self._in_flight[req.user_id] + _waiting_units(req, needs) > self.per_user_limit:
                return req, Refusal("per_user_limit", {"count": self.per_user_limit})
            return (req, None) if need <= self.pool.free_slots() else (req, Refusal("busy", {}))
        if req.sources[0].clip:  # one clip, all or nothing: it counts one photo per second against the limit
            units = req.sources[0].units
            room = self.per_user_limit - self._in_flight[req.user_id]
            if not unlimited and units > room:
                return req, Refusal("clip_over_limit", {"units": units, "count": self.per_user_limit,
                                                        "room": max(0, room)})
            return (req, None) if self.pool.free_slots() >= 1 else (req, Refusal("busy", {}))
        user_room = need if unlimited else self.per_user_limit - self._in_flight[req.user_id]
        room = min(user_room, self.pool.free_slots())
        if need <= room:
            return req, None
        why = "limit" if user_room <= room else "busy"
        if room <= 0:
            return req, (Refusal("per_user_limit", {"count": self.per_user_limit}) if why == "limit"
                         else Refusal("busy", {}))
        keep = _keep(needs, room)
        left_out = req.left_out + len(needs) - keep
        return replace(req.first(keep), left_out=left_out, left_out_why=why), None

    @contextlib.contextmanager
    def counted(self, user_id: int, photos: int) -> Iterator[None]:
        """Count ``photos`` as the user's in flight while the block runs (for the per-user cap)."""
        self._in_flight[user_id] += photos
        try:
            yield
        finally:
            self._in_flight[user_id] -= photos
            if self._in_flight[user_id] <= 0:
                del self._in_flight[user_id]

    async def weigh_clip(self, req: Request, src: Source, measured: Source) -> None:
        """A clip sent as a file, once its header gave its length (``measured``): weigh it again
        against what is left of the user's quota and waiting limit (a clip is all or nothing, as one
        sent as a video is), and raise :class:`Failed` with the numbers when it does not fit."""
        units = plan(req).units(req)
        if not units or self.access.is_admin(req.user_id):
            return
        extra = measured.units - src.units
        async with self.turn(req.user_id):  # as at take-on: the user's other requests are weighed one at a time
            left = await self.limits.quota_left(req.user_id) if self.limits is not None else None
            room = self.per_user_limit - self._in_flight[req.user_id]
            refusal = None
            if left is not None and extra > left:
                refusal = Failed("clip_over_quota", units=measured.units, left=max(0, left + src.units),
                                 count=self.limits.per_day if self.limits else 0)
            elif extra > room:
                refusal = Failed("clip_over_limit", units=measured.units, count=self.per_user_limit,
                                 room=max(0, room + src.units))
            # What the job counts against today's quota from now on: the clip's seconds, or nothing
            # once it will not be drawn (the user's other clips weighed after it must not pay for it).
            await self.journal.count_job_photos(req.job_id, 0 if refusal else units + extra)
        if refusal is not None:
            raise refusal

    async def album_taken(self, chat_id: int, media_group_id: str) -> tuple[set[int], str | None]:
        """The messages of an album already taken on, and the style the album is drawn in (if any is)."""
        parts = await self.journal.album_parts(chat_id, media_group_id)
        style = None
        for job_id in sorted(set(parts.values())):
            stored = await self.journal.job_request(job_id)
            with contextlib.suppress(StoredRequestError):
                style = request_from_json(stored).style if stored else None
            if style is not None:
                break
        return set(parts), style


def _waiting_units(req: Request, needs: list[bool]) -> int:
    """What the request counts against its user's waiting limit: what it weighs (a preview sheet one
    photo), and nothing if it does not count at all (the sample's sheet, the bot's own)."""
    kind = plan(req)
    return kind.weighed(req, needs) if kind.units(req) else 0


def _keep(needs: list[bool], room: int) -> int:
    """How many of the first drawings to keep so that at most ``room`` of them must be drawn (those
    answered from the cache come along for free)."""
    keep, taken = 0, 0
    while keep < len(needs) and (taken < room or not needs[keep]):
        taken += needs[keep]
        keep += 1
    return keep
