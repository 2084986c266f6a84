"""Running counts for /stats: cache hits, photos drawn, errors by code."""
from __future__ import annotations

from storage.database import Database


class Counters:
    """The ``stats`` table, on the bot's :class:`Database`: named counts that only go up."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def bump(self, name: str, by: int = 1) -> None:
        await self._db.execute(
            "INSERT INTO stats (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + ?",
            (name, by, by),
        )

    async def all(self) -> dict[str, int]:
        return {name: value for name, value in await self._db.fetchall("SELECT name, value FROM stats")}
