"""The users an admin blocked (/block): who, by whom, and when, in the ``blocked`` table.

The ids are also held in memory, read once at start (:meth:`Blocked.load`) and kept in step by
:meth:`Blocked.block` and :meth:`Blocked.unblock`, so that who may use the bot (bot/flow/access.py) is
decided for every update without a read. The bot is the table's only writer.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from storage.database import Database


@dataclass(frozen=True)
class Block:
    """One blocked user, as /blocked lists them."""

    user_id: int
    by: int  # the admin who blocked them
    at: float  # when, in seconds since the epoch


class Blocked:
    """The ``blocked`` table, on the bot's :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._ids: set[int] | None = None  # read by load()

    async def load(self) -> None:
        """Read who is blocked into memory; at start, before the first update."""
        self._ids = {row[0] for row in await self._db.fetchall("SELECT user_id FROM blocked")}

    def is_blocked(self, user_id: int) -> bool:
        if self._ids is None:
            raise RuntimeError("the blocked users were asked about before they were loaded")
        return user_id in self._ids

    async def block(self, user_id: int, by: int, now: float | None = None) -> bool:
        """Block ``user_id``; False if they already were (their first block, its admin and time, stays)."""
        async with self._db.transaction() as tx:
            added = await tx.execute("INSERT INTO blocked (user_id, blocked_by, blocked_at) VALUES (?, ?, ?)"
                                     " ON CONFLICT DO NOTHING", (user_id, by, time.time() if now is None else now))
        self._loaded().add(user_id)
        return added > 0

    async def unblock(self, user_id: int) -> bool:
        """Lift the block; False if ``user_id`` was not blocked."""
        async with self._db.transaction() as tx:
            removed = await tx.execute("DELETE FROM blocked WHERE user_id = ?", (user_id,))
        self._loaded().discard(user_id)
        return removed > 0

    async def listed(self) -> list[Block]:
        """Every block, the oldest first."""
        rows = await self._db.fetchall("SELECT user_id, blocked_by, blocked_at FROM blocked ORDER BY blocked_at, user_id")
        return [Block(uid, by, at) for uid, by, at in rows]

    def _loaded(self) -> set[int]:
        if self._ids is None:
            raise RuntimeError("the blocked users were changed before they were loaded")
        return self._ids
