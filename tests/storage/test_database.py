"""The bot's one SQLite connection: a transaction lands whole or not at all, whatever else runs meanwhile.

Before storage/database.py, each store called ``commit()`` on the shared connection, so one
coroutine's commit could land between another's two statements, and a failed statement's earlier
work went out with the next commit.
"""
from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from storage.database import Database
from storage.journal import Journal, NewJob


def stored(path: Path, sql: str) -> list[tuple[object, ...]]:
    """What another process reading the file sees."""
    with sqlite3.connect(path) as other:
        return other.execute(sql).fetchall()


def test_a_failed_transaction_leaves_nothing_though_another_commits_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "bot.db"

    async def scenario() -> None:
        db = await Database.open(path)
        halfway, other_done = asyncio.Event(), asyncio.Event()

        async def failing() -> None:
            async with db.transaction() as tx:
                await tx.execute("INSERT INTO stats (name, value) VALUES ('first half', 1)")
                halfway.set()
                await asyncio.sleep(0)  # let the other coroutine try to write now
                await tx.execute("INSERT INTO stats (name, value) VALUES ('first half', 2)")  # the same key: fails

        async def other() -> None:
            await halfway.wait()
            await db.execute("INSERT INTO stats (name, value) VALUES ('other', 7)")
            other_done.set()

        results = await asyncio.gather(failing(), other(), return_exceptions=True)
        assert isinstance(results[0], sqlite3.IntegrityError) and results[1] is None
        assert other_done.is_set()
        await db.close()

    asyncio.run(scenario())
    assert stored(path, "SELECT name, value FROM stats") == [("other", 7)]


def test_a_reader_never_sees_a_write_that_is_then_rolled_back(tmp_path: Path) -> None:
    async def scenario() -> list[str]:
        db = await Database.open(tmp_path / "bot.db")
        seen: list[str] = []
        inside, reading = asyncio.Event(), asyncio.Event()

        async def writer() -> None:
            async with db.transaction() as tx:
                await tx.execute("INSERT INTO stats (name, value) VALUES ('never', 1)")
                inside.set()
                await reading.wait()  # the reader has asked (its query is queued, or waits its turn)
                await tx.execute("SELECT 1")
                raise RuntimeError("the next step failed")

        async def reader() -> None:
            await inside.wait()
            query = asyncio.ensure_future(db.fetchall("SELECT name FROM stats ORDER BY name"))
            await asyncio.sleep(0)  # the query starts: it takes the lock, or queues behind it
            reading.set()
            seen.extend(row[0] for row in await query)

        results = await asyncio.gather(writer(), reader(), return_exceptions=True)
        assert isinstance(results[0], RuntimeError) and results[1] is None
        await db.close()
        return seen

    assert asyncio.run(scenario()) == []


def test_a_store_called_inside_a_transaction_joins_it(tmp_path: Path) -> None:
    """A job and its album parts, and whatever the caller writes beside them, are rolled back together."""
    path = tmp_path / "bot.db"

    async def scenario() -> None:
        db = await Database.open(path)
        journal = Journal(db)
        with pytest.raises(RuntimeError):
            async with db.transaction():
                assert await journal.create_job(NewJob("job1", 5, 5, 2, "{}"), album=("album1", [10, 11]))
                assert await journal.job_state("job1") == "queued"  # a read inside sees the write
                raise RuntimeError("the caller's next step failed")
        assert await journal.job_state("job1") is None
        await db.close()

    asyncio.run(scenario())
    assert stored(path, "SELECT COUNT(*) FROM jobs") == [(0,)]
    assert stored(path, "SELECT COUNT(*) FROM album_parts") == [(0,)]
