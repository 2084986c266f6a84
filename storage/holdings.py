"""Who asked for which photo and which result of it: what /forget, the retention sweep and inline mode go by.

A user holds a photo once they sent it (or asked /anime for it in a group), and a result once they
asked for it. A photo or result held by two users is kept when one of them forgets it
(storage/erasure.py); inline mode offers a user the results they hold.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from storage.database import Database


@dataclass(frozen=True)
class OwnResult:
    """A result its user was sent, as inline mode offers it again: by Telegram's file id."""

    key: str
    style: str
    kind: str  # what it was sent as: "photo", "sticker", or a clip's "animation", "video" or "video_note"
    media_file_id: str


class Holdings:
    """The ``holdings`` table, on the bot's :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def hold(self, user_id: int, content_sha256: str, key: str = "") -> None:
        """Note that ``user_id`` asked for this photo, and with ``key`` for this result of it, in one
        commit: /forget erases what only they hold, and leaves what another user holds too
        (storage/erasure.py)."""
        now = time.time()
        # One execute each, not executemany: under a burst, Python's sqlite3 failed an executemany
        # now and then with "bad parameter or other API misuse" (bench.load caught it).
        async with self._db.transaction() as tx:
            for k in dict.fromkeys(("", key)):
                await tx.execute(
                    "INSERT INTO holdings (user_id, content_sha256, result_key, used_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT DO UPDATE SET used_at = excluded.used_at",
                    (user_id, content_sha256, k, now),
                )

    async def holds(self, user_id: int, content_sha256: str) -> bool:
        """Whether ``user_id`` asked for this photo (sent it, or asked /anime for it in a group)."""
        return await self._db.fetchone("SELECT 1 FROM holdings WHERE user_id = ? AND content_sha256 = ? LIMIT 1",
                                       (user_id, content_sha256)) is not None

    async def own_results(self, user_id: int, limit: int, offset: int = 0, style: str | None = None
                          ) -> list[OwnResult]:
        """The results ``user_id`` asked for and was sent (so Telegram has a file id for them), newest
        first, ``limit`` from ``offset`` on, only of ``style`` when given; preview sheets are not results."""
        rows = await self._db.fetchall(
            "SELECT r.key, r.style, r.media_kind, r.media_file_id FROM holdings h JOIN results r ON r.key = h.result_key"
            " WHERE h.user_id = ? AND r.media_file_id IS NOT NULL AND r.media_kind IS NOT NULL AND r.style NOT LIKE '@%'"
            " AND (? IS NULL OR r.style = ?)"
            " ORDER BY h.used_at DESC, r.key LIMIT ? OFFSET ?",
            (user_id, style, style, limit, offset),
        )
        return [OwnResult(key, style_, kind, file_id) for key, style_, kind, file_id in rows]
