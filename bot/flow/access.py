"""Who may use the bot, and how much: admins, the allowlist, blocked users, a rate limit and a daily quota.

:meth:`Access.refusal` is the one place it is decided whether someone may use the bot at all: the chat's
gate asks it of every update (bot/chat/commands.py), the Mini App of every call (bot/webapp/api.py), and
admission of every request (bot/flow/admission.py: an album gathered, or a press made, before its user was
blocked), whichever way it came in. A blocked user (/block, storage/blocked.py) is refused everything;
an admin is never blocked.

The limits are counted from the journal's job rows, so they survive a
restart and need no table of their own. The rate limit counts what a user
asks for (photos sent and buttons pressed) in the last minute; the daily
quota counts photos *drawn*: answers from the cache (repeats, a Full size
press) and failures use none of it. Requests refused by a limit count
against neither (otherwise a user who keeps trying would stay locked out).
An album larger than what is left of the quota is drawn as far as it fits.
Admins have no limits.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from storage.blocked import Blocked
from storage.journal import Journal

COUNTED_PER_MINUTE = ("queued", "running", "done", "failed")


@dataclass(frozen=True)
class Access:
    """``allowlist`` holds user ids and group chat ids; empty means everyone may use the bot. ``blocked``: the
    users an admin blocked (None: nobody is, as in tests and the bench)."""

    admins: frozenset[int] = frozenset()
    allowlist: frozenset[int] = frozenset()
    blocked: Blocked | None = None

    def is_admin(self, user_id: int | None) -> bool:
        return user_id is not None and user_id in self.admins

    def is_blocked(self, user_id: int | None) -> bool:
        return (user_id is not None and self.blocked is not None and not self.is_admin(user_id)
                and self.blocked.is_blocked(user_id))

    def refusal(self, user_id: int | None, chat_id: int | None) -> str | None:
        """Why this user, in this chat, may not use the bot (the key of the sentence that says so), or None."""
        if self.is_blocked(user_id):
            return "blocked"
        if not self.allowlist or self.is_admin(user_id):
            return None
        listed = (user_id is not None and user_id in self.allowlist) or (chat_id is not None and chat_id in self.allowlist)
        return None if listed else "not_allowed"

    def allows(self, user_id: int | None, chat_id: int | None) -> bool:
        return self.refusal(user_id, chat_id) is None


@dataclass(frozen=True)
class Refusal:
    """Why a request was not taken on: a sentence's key (bot/words) and its values."""

    code: str
    values: dict[str, object]


class Limits:
    """``per_minute`` and ``per_day`` photos per user; 0 switches a limit off."""

    def __init__(self, journal: Journal, access: Access, per_minute: int, per_day: int) -> None:
        self.journal = journal
        self.access = access
        self.per_minute = per_minute
        self.per_day = per_day

    async def allowance(self, user_id: int, photos: int, now: float | None = None,
                        drawing: int | None = None) -> tuple[int, Refusal | None]:
        """How many of ``photos`` the user may have now (the first ones), and why not the rest.

        ``drawing`` is how many of them must be drawn (default: all), for the quota; answers from the
        cache use none of it. Past the quota, the count returned is how many may still be drawn."""
        if self.access.is_admin(user_id):
            return photos, None
        now = time.time() if now is None else now
        if self.per_minute:
            recent = await self.journal.photos_since(user_id, now - 60, COUNTED_PER_MINUTE)
            if recent and recent + photos > self.per_minute:
                return 0, Refusal("rate_limited", {"count": self.per_minute})
        left = await self.quota_left(user_id, now)
        if left is not None:
            left = max(0, left)
            if left < (photos if drawing is None else drawing):
                return left, Refusal("quota_reached", {"count": self.per_day})
        return photos, None

    async def used(self, user_id: int, now: float | None = None) -> tuple[int, int]:
        """What the user used of the limits: photos asked for in the last minute (the rate) and photos
        drawn today (the quota). /forget keeps these under a one-way key (bot/flow/forgetting.py)."""
        now = time.time() if now is None else now
        return (await self.journal.photos_since(user_id, now - 60, COUNTED_PER_MINUTE),
                await self.journal.drawn_since(user_id, now - now % 86400))

    async def quota_left(self, user_id: int, now: float | None = None) -> int | None:
        """Photos the user may still have drawn today, counting their unanswered jobs as drawn; below
        zero once a job counts more than was left; None when no quota applies (none set, or an admin)."""
        if not self.per_day or self.access.is_admin(user_id):
            return None
        now = time.time() if now is None else now
        day_start = now - now % 86400  # UTC midnight
        return self.per_day - await self.journal.drawn_since(user_id, day_start)
