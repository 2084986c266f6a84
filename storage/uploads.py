"""Which photo each Telegram file holds: the photos users sent, by Telegram's ids.

Telegram's ``file_unique_id`` is mapped to the content hash, so a photo sent
again is recognised without downloading it; its ``file_id`` fetches the
bytes again for a redraw, since the bot keeps no photo of its own.
"""
from __future__ import annotations

import time

from storage.database import Database


class Uploads:
    """The ``uploads`` table, on the bot's :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def remember_upload(self, user_id: int, file_unique_id: str, content_sha256: str, file_id: str) -> None:
        """Remember which bytes a Telegram file holds, how to fetch them again for a re-render, and that
        ``user_id`` sent it (their /forget deletes it, another sender's copy of the same bytes stays)."""
        await self._db.execute(
            "INSERT INTO uploads (file_unique_id, user_id, content_sha256, file_id, seen_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO UPDATE SET file_id = excluded.file_id, seen_at = excluded.seen_at",
            (file_unique_id, user_id, content_sha256, file_id, time.time()),
        )

    async def file_id_of(self, content_sha256: str) -> str | None:
        """The Telegram file_id that fetches these bytes again (for a redraw), newest first."""
        row = await self._db.fetchone(
            "SELECT file_id FROM uploads WHERE content_sha256 = ? ORDER BY seen_at DESC LIMIT 1", (content_sha256,)
        )
        return row[0] if row else None

    async def content_of(self, file_unique_id: str) -> str | None:
        row = await self._db.fetchone(
            "SELECT content_sha256 FROM uploads WHERE file_unique_id = ?", (file_unique_id,)
        )
        return row[0] if row else None
