"""Each user's sticker sets, and which of their results are in them.

Telegram keeps the sets; the bot keeps only what it needs to add to them:
the set it is filling for each user, one for still stickers and one for
video stickers (its name, and how many stickers it holds, so a full set
moves on to the next), and for each result made into a
sticker, the set it went into and the sticker's file id, so a second press
sends the same sticker instead of adding it twice.

A sticker is written down in two steps around the call that adds it: before
(``file_id`` empty, with the place it will take in the set) and after. A
restart between the two finds the pending row and asks Telegram whether the
sticker landed, so a sticker asked for before a crash is added once.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from storage.database import Database

FULL = 120  # the most stickers Telegram takes in a static set


@dataclass(frozen=True)
class StickerSet:
    """A user's set as the bot last knew it."""

    name: str
    kind: str  # "static" or "video"
    number: int  # 1 for the user's first set of its kind, then 2, ...: a full set moves on to the next
    count: int

    @property
    def full(self) -> bool:
        return self.count >= FULL


@dataclass(frozen=True)
class Placed:
    """A result made into a sticker: the set it went into, its place there, and its file id ('' while
    the call that adds it has not answered)."""

    set_name: str
    position: int
    file_id: str


class StickerBook:
    """Lives in the bot's database (storage/database.py)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def current(self, user_id: int, kind: str) -> StickerSet | None:
        """The set the user's next sticker of ``kind`` goes into: their latest of that kind."""
        row = await self._db.fetchone(
            "SELECT name, number, count FROM sticker_sets WHERE user_id = ? AND kind = ? ORDER BY number DESC LIMIT 1",
            (user_id, kind),
        )
        return StickerSet(row[0], kind, int(row[1]), int(row[2])) if row else None

    async def made(self, user_id: int, made: StickerSet) -> None:
        """A set now exists on Telegram with ``made.count`` stickers (made by the bot, or found there)."""
        await self._db.execute(
            "INSERT INTO sticker_sets (name, user_id, kind, number, count, used_at) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET count = excluded.count, used_at = excluded.used_at",
            (made.name, user_id, made.kind, made.number, made.count, time.time()))

    async def gone(self, name: str) -> None:
        """The set no longer exists on Telegram (its owner deleted it): forget it and what it held."""
        async with self._db.transaction() as tx:
            await tx.execute("DELETE FROM stickers WHERE set_name = ?", (name,))
            await tx.execute("DELETE FROM sticker_sets WHERE name = ?", (name,))

    async def placed(self, user_id: int, result_key: str) -> Placed | None:
        row = await self._db.fetchone(
            "SELECT set_name, position, file_id FROM stickers WHERE user_id = ? AND result_key = ?",
            (user_id, result_key),
        )
        return Placed(row[0], int(row[1]), row[2]) if row else None

    async def adding(self, user_id: int, result_key: str, set_name: str, position: int) -> None:
        """About to add the result's sticker to ``set_name`` at ``position`` (0-based)."""
        await self._db.execute(
            "INSERT OR REPLACE INTO stickers (user_id, result_key, set_name, position, file_id, added_at)"
            " VALUES (?, ?, ?, ?, '', ?)", (user_id, result_key, set_name, position, time.time()))

    async def added(self, user_id: int, result_key: str, file_id: str, count: int) -> None:
        """The sticker is in its set, as ``file_id``; the set now holds ``count``."""
        async with self._db.transaction() as tx:
            await tx.execute("UPDATE stickers SET file_id = ? WHERE user_id = ? AND result_key = ?",
                             (file_id, user_id, result_key))
            await tx.execute(
                "UPDATE sticker_sets SET count = ?, used_at = ? WHERE name = (SELECT set_name FROM stickers"
                " WHERE user_id = ? AND result_key = ?)", (count, time.time(), user_id, result_key))

    async def drop(self, user_id: int, result_key: str) -> None:
        """Forget one result's sticker (it is no longer in its set)."""
        await self._db.execute("DELETE FROM stickers WHERE user_id = ? AND result_key = ?", (user_id, result_key))
