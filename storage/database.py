"""The bot's SQLite file: one connection, and the one place where a transaction begins and ends.

Every store (the cache, the journal, the buttons, the sticker book, the erasures, the sweep)
works on the same :class:`Database`. A write is a block::

    async with db.transaction() as tx:
        await tx.execute("INSERT ...")
        await tx.execute("UPDATE ...")

which holds the database's lock, begins with ``BEGIN IMMEDIATE`` and ends with a commit, or a
rollback if the block raises: its statements land together or not at all. Without the lock,
another coroutine's commit could land between two of them (they ``await`` in between) and
commit half of a whole. Reads (:meth:`Database.fetchone`, :meth:`Database.fetchall`) take the
same lock, so no one reads another's unfinished write. A store that reads or writes inside a
transaction its own task already holds joins it rather than waiting for itself: the whole
outer block is one transaction.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from storage.schema import migrate

Params = Sequence[Any]


class Database:
    """Open with ``await Database.open(path)``; close with ``await db.close()``."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()
        self._holder: asyncio.Task[Any] | None = None

    @classmethod
    async def open(cls, path: Path) -> Database:
        """The file at ``path``, made or brought up to the current schema."""
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: sqlite3 begins nothing on its own; every transaction is ours.
        conn = await aiosqlite.connect(path, timeout=30, isolation_level=None)
        await conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL: a commit survives the process dying (kill -9), which is what we promise; only a
        # power cut may lose the last few.
        await conn.execute("PRAGMA synchronous=NORMAL")
        # A deleted row's bytes are overwritten, not left in a free page: what /forget and the
        # retention sweep delete must not be readable in the file afterwards.
        await conn.execute("PRAGMA secure_delete=ON")
        await migrate(conn)
        return cls(conn)

    async def close(self) -> None:
        async with self._lock:
            await self._conn.close()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """The connection, inside one transaction: committed when the block ends, rolled back if it raises."""
        async with self._held() as joined:
            if joined:  # the whole outer block is the transaction
                yield self._conn
                return
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                await asyncio.shield(self._conn.rollback())
                raise
            await self._conn.commit()

    async def execute(self, sql: str, params: Params = ()) -> int:
        """One statement as a transaction of its own; how many rows it changed."""
        async with self.transaction() as tx:
            async with tx.execute(sql, params) as cur:
                return cur.rowcount

    async def fetchone(self, sql: str, params: Params = ()) -> aiosqlite.Row | None:
        async with self._held():
            async with self._conn.execute(sql, params) as cur:
                return await cur.fetchone()

    async def fetchall(self, sql: str, params: Params = ()) -> Iterable[aiosqlite.Row]:
        async with self._held():
            async with self._conn.execute(sql, params) as cur:
                return await cur.fetchall()

    async def pragma(self, text: str) -> None:
        """``PRAGMA text`` outside any transaction: a checkpoint of the log, or a setting of the connection."""
        async with self._held():
            await self._conn.execute(f"PRAGMA {text}")

    @contextlib.asynccontextmanager
    async def _held(self) -> AsyncIterator[bool]:
        """The lock, for this task; True if the task already held it (it is inside a transaction)."""
        me = asyncio.current_task()
        if me is not None and self._holder is me:
            yield True
            return
        async with self._lock:
            self._holder = me
            try:
                yield False
            finally:
                self._holder = None
