"""The bot's SQLite file: one connection, and the one place where a transaction begins and ends.

Every store (the cache, the journal, the buttons, the sticker book, the erasures, the sweep)
works on the same :class:`Database`, and so do the schema's upgrades (storage/schema.py). A write
is a block::

    async with db.transaction() as tx:
        await tx.execute("INSERT ...")
        await tx.execute("UPDATE ...")

which holds the database's lock, begins with ``BEGIN IMMEDIATE`` and ends with a commit, or a
rollback if the block raises: its statements land together or not at all. ``tx`` is a
:class:`Transaction`, which runs statements and reads their rows and nothing else: nothing outside
this module can begin, commit or roll back, so no block can end another's. Without the lock,
another coroutine's commit could land between two of them (they ``await`` in between) and
commit half of a whole. Reads (:meth:`Database.fetchone`, :meth:`Database.fetchall`) take the
same lock, so no one reads another's unfinished write. A store that reads or writes inside a
transaction its own task already holds joins it rather than waiting for itself: the whole
outer block is one transaction.

A cancelled task is the case every line here is written for. aiosqlite runs each statement on
its own thread, and a task cancelled while it awaits one gets its ``CancelledError`` at once while
the statement still runs. So the block's end (commit, or rollback) is awaited to its finish
whatever comes meanwhile (:func:`to_the_end`), and only then is the lock let go and the
cancellation passed on: the next holder finds the connection outside any transaction, and a
block cancelled before its commit was queued is rolled back, one cancelled after it is committed.
Statements queue on that one thread in order, so a rollback queued behind a statement still
running runs after it.

A write that fails for the file's sake (locked by another program, the disk full, read-only, damaged)
raises :class:`Unwritable` and leaves :attr:`Database.unwritable` saying why, until a write succeeds
again: /healthz and the metrics read it, and the log says it once, not once per job.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from storage.errors import AnimebotError
from storage.schema import pending_steps

log = logging.getLogger("animebot.database")

Params = Sequence[Any]
T = TypeVar("T")


class Unwritable(AnimebotError):
    """A write the database file refused: nothing of its transaction was kept."""

    code = "unwritable"


class Transaction:
    """The statements of one block of :meth:`Database.transaction` (and of a read, which takes the lock and
    begins nothing): what they changed, what they read. There is nothing here to begin, commit or roll
    back with; the block's end does that."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Params = ()) -> int:
        """One statement; how many rows it changed."""
        async with self._conn.execute(sql, params) as cur:
            return cur.rowcount

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        async with self._conn.executemany(sql, rows):
            pass  # the block is for its end, which closes the cursor

    async def fetchone(self, sql: str, params: Params = ()) -> aiosqlite.Row | None:
        async with self._conn.execute(sql, params) as cur:
            return await cur.fetchone()

    async def fetchall(self, sql: str, params: Params = ()) -> Iterable[aiosqlite.Row]:
        async with self._conn.execute(sql, params) as cur:
            return await cur.fetchall()


class Database:
    """Open with ``await Database.open(path)``; close with ``await db.close()``."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()
        self._holder: asyncio.Task[Any] | None = None
        self.unwritable: str | None = None  # why the last write failed, until one succeeds
        self.failed_writes = 0  # transactions the file refused, since the start (a metric)

    @classmethod
    async def open(cls, path: Path, busy_s: float = 30.0) -> Database:
        """The file at ``path``, made or brought up to the current schema. A write waits up to ``busy_s``
        for another program's write to the same file to end, then fails as :class:`Unwritable`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: sqlite3 begins nothing on its own; every transaction is ours.
        conn = await aiosqlite.connect(path, timeout=busy_s, isolation_level=None)
        await conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL: a commit survives the process dying (kill -9), which is what we promise; only a
        # power cut may lose the last few.
        await conn.execute("PRAGMA synchronous=NORMAL")
        # A deleted row's bytes are overwritten, not left in a free page: what /forget and the
        # retention sweep delete must not be readable in the file afterwards.
        await conn.execute("PRAGMA secure_delete=ON")
        db = cls(conn)
        await db._migrate()
        return db

    async def close(self) -> None:
        async with self._lock:
            await self._conn.close()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        """One transaction's statements: committed when the block ends, rolled back if it raises
        (a cancellation included, wherever it lands)."""
        async with self._held() as joined:
            if joined:  # the whole outer block is the transaction
                yield Transaction(self._conn)
                return
            failure: BaseException | None = None
            try:
                await self._begin()
                yield Transaction(self._conn)
            except sqlite3.DatabaseError as exc:
                failure = exc
                if not _the_files_fault(exc):  # the statement's own fault (a constraint, a typo): the caller's
                    raise
                self._refused(exc)
                raise Unwritable(f"the database refused a write ({exc})") from exc
            except BaseException as exc:
                failure = exc
                raise
            finally:
                await to_the_end(self._end(commit=failure is None))
            # Reached only when the commit landed, which the file accepting a write means.
            self._writable()

    async def execute(self, sql: str, params: Params = ()) -> int:
        """One statement as a transaction of its own; how many rows it changed."""
        async with self.transaction() as tx:
            return await tx.execute(sql, params)

    async def fetchone(self, sql: str, params: Params = ()) -> aiosqlite.Row | None:
        async with self._held():
            return await Transaction(self._conn).fetchone(sql, params)

    async def fetchall(self, sql: str, params: Params = ()) -> Iterable[aiosqlite.Row]:
        async with self._held():
            return await Transaction(self._conn).fetchall(sql, params)

    async def probe(self) -> None:
        """A write that changes nothing, to learn whether the file takes writes again after it refused one
        (:attr:`unwritable` is cleared if it does; :class:`Unwritable` if not)."""
        await self.execute("UPDATE secrets SET value = value WHERE name = 'ids'")

    async def pragma(self, text: str) -> None:
        """``PRAGMA text`` outside any transaction: a checkpoint of the log, or a setting of the connection."""
        async with self._held():
            await self._conn.execute(f"PRAGMA {text}")

    async def _migrate(self) -> None:
        """Bring the file's tables up to storage/schema.py's steps, each in a transaction of its own with
        the version it brings the file to: a step lands whole or not at all, and an upgrade cut short
        goes on from the step it was in at the next start."""
        row = await self.fetchone("PRAGMA user_version")
        for number, statements in pending_steps(int(row[0]) if row else 0):
            async with self.transaction() as tx:
                for statement in statements:
                    await tx.execute(statement)
                await tx.execute(f"PRAGMA user_version = {number}")

    async def _begin(self) -> None:
        """``BEGIN IMMEDIATE``. A transaction found open is one nothing will finish (this connection's
        transactions are all ours, each ended before the lock is let go): it is rolled back, and said."""
        try:
            await self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not self._conn.in_transaction:
                raise
            log.error("the database was left inside a transaction (%s); rolling it back and going on", exc)
            await self._conn.rollback()
            await self._conn.execute("BEGIN IMMEDIATE")

    async def _end(self, commit: bool) -> None:
        """Commit, or roll back. A failure is noted (:meth:`_refused`) and raised as :class:`Unwritable`,
        after a rollback of what a failed commit left open (sqlite3 leaves it so)."""
        try:
            await (self._conn.commit() if commit else self._conn.rollback())
        except sqlite3.Error as exc:
            self._refused(exc)
            if self._conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # refused too: nothing more can be done here
                    await self._conn.rollback()
            raise Unwritable(f"the database refused to {'commit' if commit else 'roll back'} ({exc})") from exc

    def _refused(self, exc: sqlite3.Error) -> None:
        self.failed_writes += 1
        if self.unwritable is None:
            log.error("the database cannot be written (%s: %s); nothing new is recorded until it can, and /healthz "
                      "says so", exc.__class__.__name__, exc)
        self.unwritable = f"{exc.__class__.__name__}: {exc}"

    def _writable(self) -> None:
        if self.unwritable is not None:
            log.warning("the database can be written again")
            self.unwritable = None

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


def _the_files_fault(exc: sqlite3.DatabaseError) -> bool:
    """Whether a failed statement says the file cannot be written (locked, full, read-only, damaged),
    not that the statement was wrong."""
    return isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError


async def to_the_end(step: Awaitable[T]) -> T:
    """``step`` awaited to its finish even if this task is cancelled meanwhile; the cancellation is
    raised once it has finished. Its statements run on aiosqlite's thread whatever the task does, so
    waiting for them is the only way to know what they did."""
    running = asyncio.ensure_future(step)
    cancelled: asyncio.CancelledError | None = None
    while not running.done():
        try:
            await asyncio.wait([running])
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        if not running.cancelled():
            running.exception()  # retrieved: what it raised is noted by the step itself
        raise cancelled
    return running.result()
