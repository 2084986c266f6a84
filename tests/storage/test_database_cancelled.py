"""A task cancelled at any await of the database leaves it whole: outside any transaction, the lock free,
and each transaction's writes all kept or all gone.

aiosqlite runs every statement on its own thread, so a cancelled task's statement still runs. Before
storage/database.py waited for the end of each block, a task cancelled while it began its transaction left
the one connection inside it, and every later write failed with "cannot start a transaction within a
transaction" until the process was restarted (a bot killed and restarted hung so, 4 runs in 6).

Two ways of cutting, each until the operation finishes before the cut comes:
- after 0, 1, 2, ... turns of the event loop (where those land depends on the thread's speed);
- while the k-th statement runs on aiosqlite's thread, held there until the task has been cancelled:
  the very race, met at every statement (begin, each statement, commit) on any machine.
"""
from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from storage.counters import Counters
from storage.database import Database, Unwritable
from storage.journal import Journal, NewJob

MAX_TURNS = 200  # far past the last await of any operation here: the loop ends once one finishes uncancelled


async def cancelled_after(turns: int, work: Callable[[], Awaitable[object]]) -> bool:
    """Start ``work``, let the loop turn ``turns`` times, cancel it; whether it had finished before."""
    task = asyncio.ensure_future(work())
    for _ in range(turns):
        await asyncio.sleep(0)
    finished = task.done()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        assert not finished
    return finished


class Gate:
    """Holds aiosqlite's thread as it starts the ``at``-th statement (a trace callback runs there), until
    :attr:`go` is set: the statement is in flight while its task is cancelled."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.traced: list[str] = []
        self.reached = threading.Event()
        self.go = threading.Event()

    def __call__(self, sql: str) -> None:
        self.traced.append(sql)
        if len(self.traced) == self.at:
            self.reached.set()
            self.go.wait(30)


async def cancelled_in_statement(db: Database, at: int, work: Callable[[], Awaitable[object]]) -> str | None:
    """Start ``work``, cancel it while its ``at``-th statement runs; that statement, or None if it ran
    fewer (it finished uncancelled)."""
    gate = Gate(at)
    await db._conn.set_trace_callback(gate)  # noqa: SLF001 - the test's window on aiosqlite's thread
    task = asyncio.ensure_future(work())
    done = asyncio.ensure_future(asyncio.to_thread(gate.reached.wait, 30))
    await asyncio.wait([task, done], return_when=asyncio.FIRST_COMPLETED)
    cut = gate.traced[at - 1] if gate.reached.is_set() else None
    if cut is not None:
        task.cancel()
    gate.reached.set()  # (for the waiting thread, when the work finished first)
    gate.go.set()
    try:
        await task
    except asyncio.CancelledError:
        assert cut is not None
    await done
    await db._conn.set_trace_callback(None)  # noqa: SLF001
    return cut


async def still_works(db: Database, run: int) -> None:
    """The next write and read succeed, at once (no lock left held)."""
    marker = f"after {run}"
    await asyncio.wait_for(db.execute("INSERT INTO stats (name, value) VALUES (?, 1)", (marker,)), 10)
    row = await asyncio.wait_for(db.fetchone("SELECT value FROM stats WHERE name = ?", (marker,)), 10)
    assert row is not None and row[0] == 1


def run_each_cut(tmp_path: Path, work: Callable[[Database, int], Awaitable[object]],
                 check: Callable[[Database, int], Awaitable[None]]) -> list[str]:
    """Cancel ``work`` after every number of turns, then in every statement, each until it finishes first;
    after each cut, ``check`` and :func:`still_works`. Returns the statements cut in."""
    async def scenario() -> list[str]:
        db = await Database.open(tmp_path / "bot.db")
        run = 0
        for turns in range(MAX_TURNS):
            finished = await cancelled_after(turns, lambda: work(db, run))
            await check(db, run)
            await still_works(db, run)
            run += 1
            if finished:
                break
        else:
            raise AssertionError(f"the work never finished within {MAX_TURNS} turns")
        statements = []
        for at in range(1, MAX_TURNS):
            cut = await cancelled_in_statement(db, at, lambda: work(db, run))
            await check(db, run)
            await still_works(db, run)
            run += 1
            if cut is None:
                break
            statements.append(cut.split()[0])
        await db.close()
        return statements

    return asyncio.run(scenario())


async def rows_named(db: Database, name: str) -> int:
    row = await db.fetchone("SELECT COUNT(*) FROM stats WHERE name LIKE ?", (name,))
    assert row is not None
    return int(row[0])


def test_a_write_cancelled_anywhere_leaves_all_or_nothing_and_the_next_write_works(tmp_path: Path) -> None:
    async def work(db: Database, run: int) -> None:
        async with db.transaction() as tx:
            await tx.execute("INSERT INTO stats (name, value) VALUES (?, 1)", (f"a {run}",))
            await tx.execute("INSERT INTO stats (name, value) VALUES (?, 2)", (f"b {run}",))

    kept: list[int] = []

    async def check(db: Database, run: int) -> None:
        both = await rows_named(db, f"_ {run}")
        assert both in (0, 2), f"cut {run}: {both} of the transaction's 2 rows kept"
        kept.append(both)

    assert run_each_cut(tmp_path, work, check) == ["BEGIN", "INSERT", "INSERT", "COMMIT"]
    # Cut in its statements (the last five runs): before the commit was queued, rolled back; in it, committed.
    assert kept[-5:] == [0, 0, 0, 2, 2]


def test_a_single_statement_cancelled_anywhere_leaves_the_database_writable(tmp_path: Path) -> None:
    async def work(db: Database, run: int) -> None:
        await db.execute("INSERT INTO stats (name, value) VALUES (?, 1)", (f"one {run}",))

    async def check(db: Database, run: int) -> None:
        assert await rows_named(db, f"one {run}") in (0, 1)

    assert run_each_cut(tmp_path, work, check) == ["BEGIN", "INSERT", "COMMIT"]


def test_a_read_cancelled_anywhere_leaves_the_database_writable(tmp_path: Path) -> None:
    async def work(db: Database, run: int) -> None:
        await db.fetchall("SELECT name FROM stats")

    async def check(db: Database, run: int) -> None:
        pass

    assert run_each_cut(tmp_path, work, check) == ["SELECT"]


def test_a_joined_transaction_cancelled_anywhere_is_kept_or_dropped_whole(tmp_path: Path) -> None:
    """A store's write inside the caller's transaction (journal.create_job joins it) goes with the caller's."""
    async def work(db: Database, run: int) -> None:
        journal = Journal(db)
        async with db.transaction() as tx:
            await tx.execute("INSERT INTO stats (name, value) VALUES (?, 1)", (f"job {run}",))
            await journal.create_job(NewJob(f"job{run}", 5, 5, 1, "{}"), album=("album", [run]))

    async def check(db: Database, run: int) -> None:
        stat = await rows_named(db, f"job {run}")
        job = await db.fetchone("SELECT COUNT(*) FROM jobs WHERE job_id = ?", (f"job{run}",))
        assert job is not None and (stat, job[0]) in ((0, 0), (1, 1)), (run, stat, job[0])

    assert run_each_cut(tmp_path, work, check) == ["BEGIN", "INSERT", "INSERT", "INSERT", "COMMIT"]


def test_counts_flushed_and_cancelled_anywhere_are_counted_once(tmp_path: Path) -> None:
    """/stats' counts wait in memory for a flush (storage/counters.py): a flush cut anywhere has written
    them, or keeps them for the next, never both and never neither."""
    made: dict[int, Counters] = {}
    bumped: list[int] = []

    def counters_of(db: Database) -> Counters:
        return made.setdefault(id(db), Counters(db))

    async def work(db: Database, run: int) -> None:
        await counters_of(db).bump("cache_hits")
        bumped.append(run)  # (no await between: counted in memory exactly when this runs)
        await counters_of(db).flush()

    async def check(db: Database, run: int) -> None:
        assert (await counters_of(db).all()).get("cache_hits", 0) == len(bumped), run
        await counters_of(db).flush()
        row = await db.fetchone("SELECT value FROM stats WHERE name = 'cache_hits'")
        assert (row[0] if row else 0) == len(bumped), run

    assert run_each_cut(tmp_path, work, check) == ["BEGIN", "INSERT", "COMMIT"]


def test_sixty_writes_cancelled_after_each_of_zero_to_five_turns_then_a_write_succeeds(tmp_path: Path) -> None:
    """The issue's probe, as the independent check runs it."""
    async def scenario() -> None:
        db = await Database.open(tmp_path / "bot.db")
        for round_ in range(60):
            await cancelled_after(round_ % 6, lambda: db.execute("INSERT INTO stats (name, value) VALUES (?, 1)",
                                                                 (f"probe {round_}",)))
        await still_works(db, 60)
        await db.close()

    asyncio.run(scenario())


def test_a_transaction_left_open_is_rolled_back_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """What an older release's cancelled begin left behind (or any path around transaction()): the next
    write rolls it back, logs it, and goes on."""
    async def scenario() -> None:
        db = await Database.open(tmp_path / "bot.db")
        await db._conn.execute("BEGIN IMMEDIATE")  # noqa: SLF001 - what nothing public can do any more
        await db._conn.execute("INSERT INTO stats (name, value) VALUES ('orphan', 1)")  # noqa: SLF001
        await db.execute("INSERT INTO stats (name, value) VALUES ('next', 1)")
        assert await rows_named(db, "orphan") == 0 and await rows_named(db, "next") == 1
        await db.close()

    with caplog.at_level(logging.ERROR, logger="animebot.database"):
        asyncio.run(scenario())
    assert "left inside a transaction" in caplog.text


def test_a_file_another_program_holds_is_unwritable_said_once_and_writable_again_after(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "bot.db"

    async def scenario() -> None:
        db = await Database.open(path, busy_s=0.2)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another program's write, never ended
        for n in range(3):
            with pytest.raises(Unwritable):
                await db.execute("INSERT INTO stats (name, value) VALUES (?, 1)", (f"locked {n}",))
        assert db.unwritable is not None and "locked" in db.unwritable
        assert db.failed_writes == 3
        assert await db.fetchone("SELECT COUNT(*) FROM stats") is not None  # reads still work
        other.execute("ROLLBACK")
        other.close()
        await db.execute("INSERT INTO stats (name, value) VALUES ('free', 1)")
        assert db.unwritable is None and db.failed_writes == 3
        await db.close()

    with caplog.at_level(logging.WARNING, logger="animebot.database"):
        asyncio.run(scenario())
    said = [r.getMessage() for r in caplog.records if r.name == "animebot.database"]
    assert len(said) == 2 and "cannot be written" in said[0] and "written again" in said[1], said
