"""Running counts for /stats: cache hits, photos drawn, errors by code; and the day's drawings, for the admin page.

A bump is counted in memory, and the counts are written together now and then (:meth:`Counters.flush`:
every few seconds from the bot's chores, bot/root/life.py, and at a stop before the database closes),
so a cache hit, already a write (it marks its result used), is not a second one. A kill -9 loses
what was bumped since the last flush, a few seconds of counts, never a result or a request. /stats
reads the written counts and the unwritten together.
"""
from __future__ import annotations

import time
from collections import Counter

from storage.database import Database, to_the_end


class Counters:
    """The ``stats`` table, on the bot's :class:`Database`: named counts that only go up."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._unwritten: Counter[str] = Counter()

    async def bump(self, name: str, by: int = 1) -> None:
        """Count ``by`` more of ``name``, in memory until the next :meth:`flush`."""
        self._unwritten[name] += by

    async def bump_today(self, name: str, now: float | None = None) -> None:
        """Count one more of ``name`` today (UTC): a count of its own, ``name@YYYY-MM-DD``, so that the admin
        page says what today drew without a table of every drawing."""
        await self.bump(f"{name}@{_day(now)}")

    async def today(self, now: float | None = None) -> dict[str, int]:
        """What :meth:`bump_today` counted today (UTC), by name."""
        suffix = f"@{_day(now)}"
        return {name.removesuffix(suffix): n for name, n in (await self.all()).items() if name.endswith(suffix)}

    async def flush(self) -> None:
        """Write what was bumped since the last flush, in one transaction. It runs to its end though the
        caller is cancelled meanwhile, so that the counts are written or kept for the next flush, never
        both; kept too if the file refuses them (then :class:`~storage.database.Unwritable` is raised). Not
        from inside a transaction: the write is a task of its own, which would wait for the caller's."""
        if self._unwritten:
            await to_the_end(self._write())

    async def all(self) -> dict[str, int]:
        counts = Counter({name: value for name, value in await self._db.fetchall("SELECT name, value FROM stats")})
        counts.update(self._unwritten)
        return dict(counts)

    async def _write(self) -> None:
        taken, self._unwritten = self._unwritten, Counter()
        try:
            async with self._db.transaction() as tx:
                for name, by in taken.items():
                    await tx.execute("INSERT INTO stats (name, value) VALUES (?, ?)"
                                     " ON CONFLICT(name) DO UPDATE SET value = value + ?", (name, by, by))
        except BaseException:
            self._unwritten.update(taken)
            raise


def _day(now: float | None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if now is None else now))
