"""What a running bot has stored and finished, read from its own journal (``HOME/bot.db``).

Read on a connection of our own, as an operator could (storage/journal.py writes it): whether
an update was handled, what state each job is in. This is how a test knows the bot is done,
rather than by how long it has had: a job is ``done``, ``failed`` or ``refused`` only once its
answer is out, and an answered job never runs again, so once every update is handled and no
job is open the bot sends nothing more of its own accord (only the job's status message may
still be deleted, just after); a duplicate that has not arrived by then never will.
"""
from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from testkit.fake_telegram import FakeTelegram

OPEN_STATES = ("queued", "running")


def journal_rows(home: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    """Rows of ``sql`` from the journal of the bot whose home is ``home``."""
    with contextlib.closing(sqlite3.connect(home / "bot.db", timeout=30)) as db:
        return db.execute(sql, params).fetchall()


_CARRYING = ("json_extract(payload, '$.message.message_id') = ? AND json_extract(payload, '$.message.chat.id') = ?")


def handled(home: Path, message: dict[str, Any]) -> bool:
    """Whether the bot has stored the update carrying ``message`` and its handler has returned:
    after that, a reply to it can only come from a job it created (see :func:`jobs_for`)."""
    rows = journal_rows(home, f"SELECT handled FROM updates WHERE {_CARRYING}", message["message_id"],
                        message["chat"]["id"])
    return rows == [(1,)]


def jobs_for(home: Path, message: dict[str, Any]) -> list[str]:
    """The states of the jobs the bot took on for the update carrying ``message`` (a single photo's
    job is named after its update)."""
    return _of_jobs(home, message, "state")


def job_of(home: Path, message: dict[str, Any]) -> str:
    """The id of the one job the bot took on for the update carrying ``message``, as its log names it."""
    ids = _of_jobs(home, message, "job_id")
    assert len(ids) == 1, ids
    return ids[0]


def _of_jobs(home: Path, message: dict[str, Any], column: str) -> list[str]:
    rows = journal_rows(home, f"SELECT j.{column} FROM jobs j JOIN updates u ON j.job_id = CAST(u.update_id AS TEXT)"
                              f" WHERE {_CARRYING.replace('payload', 'u.payload')}", message["message_id"],
                        message["chat"]["id"])
    return [str(r[0]) for r in rows]


def open_jobs(home: Path) -> int:
    """Jobs taken on and not yet answered."""
    marks = ", ".join("?" * len(OPEN_STATES))
    return int(journal_rows(home, f"SELECT COUNT(*) FROM jobs WHERE state IN ({marks})", *OPEN_STATES)[0][0])  # type: ignore[call-overload]


def all_handled(home: Path, fake: FakeTelegram) -> bool:
    """Whether every update ``fake`` has handed out is stored and handled. Updates are stored in
    order, before they are handled, and the journal prunes old handled ones but always keeps the
    latest: so the latest one pushed stored and handled, and none unhandled, means all were."""
    if journal_rows(home, "SELECT 1 FROM updates WHERE handled = 0"):
        return False
    return not fake.pushed or journal_rows(home, "SELECT handled FROM updates WHERE update_id = ?",
                                           max(fake.pushed)) == [(1,)]


def settled(home: Path, fake: FakeTelegram) -> bool:
    """Every update ``fake`` pushed handled and every job answered: from here on the bot sends
    nothing of its own accord (see the module's docstring)."""
    return all_handled(home, fake) and not open_jobs(home)


def drawn_by(home: Path, user_id: int) -> int:
    """Photos the bot actually drew for ``user_id`` (not answered from the cache): what the daily quota counts."""
    return int(journal_rows(home, "SELECT COALESCE(SUM(drawn), 0) FROM jobs WHERE user_id = ?", user_id)[0][0])  # type: ignore[call-overload]
