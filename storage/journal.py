"""The bot's journal: every update and every accepted request, durably, in SQLite.

This is what makes "never lose a photo" true across a crash or a restart.

- ``updates`` holds each update exactly as Telegram sent it. It is written
  before the update's offset is confirmed to Telegram (our next getUpdates)
  or before a webhook answers 200, and marked handled once its handler has
  returned. At start the unhandled ones are handed to the handlers again.
- ``jobs`` holds one row per request the bot took on, with the request itself
  (as JSON) so it can run again. A job is ``queued`` or ``running`` until it is
  answered: ``done`` (the image was sent), ``failed`` (a sentence saying why
  was sent) or ``refused`` (a rate limit or quota said no). Answered jobs are
  never run again, so a result is never sent twice.

The bot keeps it in its one SQLite file, beside the cache (storage/database.py),
so that a job's row and what it touches elsewhere can be written in one transaction.
"""
from __future__ import annotations

import hmac
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from storage.database import Database


OPEN_STATES = ("queued", "running")
_OPEN = "(?, ?)"  # placeholders for OPEN_STATES
KEEP_JOBS_S = 3 * 86400  # long enough for a day's quota and for /stats
KEEP_SPENT_S = 86400  # a forgotten user's counts matter for the day's quota, no longer
_STATE_SHOWN = "CASE WHEN state = 'failed' AND outcome = 'cancelled' THEN 'cancelled' ELSE state END"


@dataclass(frozen=True)
class NewJob:
    """A request to record: its job's id, its chat and its user, the photos it counts against the quota, and the
    request itself (JSON, to run it again); and the state it starts in, with why for one that ends at once (a
    refusal)."""

    job_id: str
    chat_id: int
    user_id: int
    photos: int
    request: str
    state: str = "queued"
    outcome: str | None = None


@dataclass(frozen=True)
class JobRow:
    job_id: str
    chat_id: int
    request: str
    attempts: int
    status_message_id: int | None


@dataclass(frozen=True)
class JobCounts:
    """What /stats shows about the jobs of a recent period."""

    by_state: dict[str, int]
    photos_done: int
    top_outcomes: list[tuple[str, int]]


class Journal:
    """The journal in the bot's database ``db``, which stays the caller's to close."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._secret: bytes | None = None

    # --- updates -------------------------------------------------------------------

    async def add_updates(self, updates: Sequence[tuple[int, str]]) -> list[int]:
        """Store ``(update_id, json)`` pairs; return the ids not seen before, in order.

        Telegram re-sends an update until a later offset confirms it, so after
        a restart some arrive twice: those are stored once and handed out once.
        """
        if not updates:
            return []
        ids = [uid for uid, _ in updates]
        marks = ",".join("?" * len(ids))
        async with self._db.transaction() as tx:
            known = {row[0] for row in await tx.fetchall(f"SELECT update_id FROM updates WHERE update_id IN ({marks})", ids)}
            now = time.time()
            fresh = [(uid, payload, now) for uid, payload in updates if uid not in known]
            await tx.executemany("INSERT INTO updates (update_id, payload, received_at) VALUES (?, ?, ?)", fresh)
        return [uid for uid, _, _ in fresh]

    async def update_handled(self, update_id: int) -> None:
        await self._db.execute("UPDATE updates SET handled = 1 WHERE update_id = ?", (update_id,))

    async def unhandled_updates(self) -> list[tuple[int, str]]:
        rows = await self._db.fetchall("SELECT update_id, payload FROM updates WHERE handled = 0 ORDER BY update_id")
        return [(row[0], row[1]) for row in rows]

    async def next_offset(self) -> int:
        """The offset that confirms every update stored so far (0: none yet)."""
        row = await self._db.fetchone("SELECT MAX(update_id) FROM updates")
        return int(row[0]) + 1 if row and row[0] is not None else 0

    # --- jobs -----------------------------------------------------------------------

    async def job_state(self, job_id: str) -> str | None:
        row = await self._db.fetchone("SELECT state FROM jobs WHERE job_id = ?", (job_id,))
        return row[0] if row else None

    async def create_job(self, job: NewJob, album: tuple[str, Sequence[int]] | None = None) -> bool:
        """Record a request; False if a job of that id already exists (a replayed update).

        ``album`` is (media_group_id, message ids): the album parts this job
        takes on, recorded in the same transaction so none is taken on twice.
        """
        async with self._db.transaction() as tx:
            created = await tx.execute(
                "INSERT OR IGNORE INTO jobs (job_id, chat_id, user_id, photos, request, state, outcome, created_at,"
                " finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job.job_id, job.chat_id, job.user_id, job.photos, job.request, job.state, job.outcome, time.time(),
                 None if job.state in OPEN_STATES else time.time()),
            ) == 1
            if created and album is not None:
                group, message_ids = album
                await tx.executemany(
                    "INSERT OR IGNORE INTO album_parts (chat_id, message_id, media_group_id, job_id)"
                    " VALUES (?, ?, ?, ?)", [(job.chat_id, mid, group, job.job_id) for mid in message_ids])
        return created

    async def album_parts(self, chat_id: int, media_group_id: str) -> dict[int, str]:
        """The album's messages already taken on, each with its job's id."""
        rows = await self._db.fetchall(
            "SELECT message_id, job_id FROM album_parts WHERE chat_id = ? AND media_group_id = ?",
            (chat_id, media_group_id),
        )
        return {row[0]: row[1] for row in rows}

    async def job_request(self, job_id: str) -> str | None:
        row = await self._db.fetchone("SELECT request FROM jobs WHERE job_id = ?", (job_id,))
        return row[0] if row else None

    async def job_running(self, job_id: str) -> None:
        await self._db.execute("UPDATE jobs SET state = 'running' WHERE job_id = ? AND state = 'queued'", (job_id,))

    async def count_job_photos(self, job_id: str, photos: int) -> None:
        """Change what an open job counts as against the quota: a clip sent as a file counts one photo
        until its header says how long it is, and then one per second."""
        await self._db.execute(f"UPDATE jobs SET photos = ? WHERE job_id = ? AND state IN {_OPEN}",
                               (photos, job_id, *OPEN_STATES))

    async def finish_job(self, job_id: str, state: str, outcome: str | None = None, drawn: int = 0) -> None:
        """Mark a job answered; ``drawn`` is how many of its photos were drawn, not taken from the cache."""
        await self._db.execute("UPDATE jobs SET state = ?, outcome = ?, finished_at = ?, drawn = ? WHERE job_id = ?",
                               (state, outcome, time.time(), drawn, job_id))

    async def set_status_message(self, job_id: str, message_id: int | None) -> None:
        await self._db.execute("UPDATE jobs SET status_message_id = ? WHERE job_id = ?", (message_id, job_id))

    async def open_jobs(self) -> list[JobRow]:
        """Jobs taken on but not answered, oldest first, each counted as one more attempt."""
        async with self._db.transaction() as tx:
            await tx.execute(f"UPDATE jobs SET attempts = attempts + 1 WHERE state IN {_OPEN}", OPEN_STATES)
            return [JobRow(*row) for row in await tx.fetchall(
                f"SELECT job_id, chat_id, request, attempts, status_message_id FROM jobs WHERE state IN {_OPEN}"
                " ORDER BY created_at", OPEN_STATES)]

    # --- limits and stats ---------------------------------------------------------------

    async def secret(self) -> bytes:
        """This database's own random key, made with it: it keys :meth:`who`, and the Celery task ids
        (bot/drawing/celery/wire.py), so that neither can be worked out from a user id or a photo."""
        if self._secret is None:
            row = await self._db.fetchone("SELECT value FROM secrets WHERE name = 'ids'")
            assert row is not None, "made by the schema's privacy step"
            self._secret = bytes(row[0])
        return self._secret

    async def who(self, user_id: int) -> str:
        """A one-way key for ``user_id`` (HMAC-SHA256 under :meth:`secret`): what the day's counts of a
        user who said /forget are kept under (storage/erasure.py), instead of their id."""
        return hmac.new(await self.secret(), str(user_id).encode(), "sha256").hexdigest()

    async def photos_since(self, user_id: int, since: float, states: Iterable[str]) -> int:
        """Photos in the user's jobs created since ``since`` whose state is one of ``states``, and what
        was set aside for them at a /forget since then.

        A job that failed only because the queue was full is never counted:
        that was the bot's doing, not the user's.
        """
        wanted = tuple(states)
        marks = ",".join("?" * len(wanted))
        rows = await self._db.fetchall(
            f"SELECT COALESCE(SUM(photos), 0) FROM jobs WHERE user_id = ? AND created_at >= ? AND state IN ({marks})"
            " AND NOT (state = 'failed' AND outcome = 'busy')"
            " UNION ALL SELECT COALESCE(SUM(asked), 0) FROM spent WHERE who = ? AND at >= ?",
            (user_id, since, *wanted, await self.who(user_id), since),
        )
        return sum(int(row[0]) for row in rows)

    async def drawn_since(self, user_id: int, since: float) -> int:
        """Photos drawn for the user since ``since``, counting an unanswered job's photos as drawn
        (they may yet be); photos answered from the cache, or not drawn at all, are not counted."""
        rows = await self._db.fetchall(
            f"SELECT COALESCE(SUM(CASE WHEN state IN {_OPEN} THEN photos"
            "  WHEN drawn IS NOT NULL THEN drawn WHEN state = 'done' THEN photos ELSE 0 END), 0)"
            " FROM jobs WHERE user_id = ? AND created_at >= ?"
            " UNION ALL SELECT COALESCE(SUM(drawn), 0) FROM spent WHERE who = ? AND at >= ?",
            (*OPEN_STATES, user_id, since, await self.who(user_id), since),
        )
        return sum(int(row[0]) for row in rows)

    async def counts_since(self, since: float, top: int = 5) -> JobCounts:
        """Jobs since ``since`` by state, with the ones their user cancelled (kept as failed, with the
        outcome ``cancelled``) counted apart: a cancel is the user's choice, not a problem of the bot's."""
        rows = await self._db.fetchall(
            f"SELECT {_STATE_SHOWN} AS shown, COUNT(*), COALESCE(SUM(photos), 0) FROM jobs WHERE created_at >= ?"
            " GROUP BY shown",
            (since,),
        )
        by_state = {state: count for state, count, _ in rows}
        photos_done = sum(photos for state, _, photos in rows if state == "done")
        outcomes = [(o, n) for o, n in await self._db.fetchall(
            "SELECT outcome, COUNT(*) FROM jobs WHERE created_at >= ? AND state IN ('failed', 'refused')"
            " AND outcome IS NOT NULL AND outcome != 'cancelled' GROUP BY outcome ORDER BY COUNT(*) DESC LIMIT ?",
            (since, top),
        )]
        return JobCounts(by_state, photos_done, outcomes)

    async def top_drawn(self, since: float, top: int = 5) -> list[tuple[int, int]]:
        """The users with the most photos drawn since ``since`` (cache answers not counted; a clip's seconds
        are), most first, as (user id, photos): the admin page's busiest users."""
        rows = await self._db.fetchall(
            "SELECT user_id, SUM(COALESCE(drawn, CASE WHEN state = 'done' THEN photos ELSE 0 END)) AS n FROM jobs"
            " WHERE created_at >= ? GROUP BY user_id HAVING n > 0 ORDER BY n DESC, user_id LIMIT ?", (since, top))
        return [(int(uid), int(n)) for uid, n in rows]

    async def prune(self, now: float | None = None) -> None:
        """Forget answered jobs after a few days, handled updates (but the newest, for the offset) and
        forgotten users' counts after a day."""
        now = time.time() if now is None else now
        async with self._db.transaction() as tx:
            await tx.execute(f"DELETE FROM jobs WHERE state NOT IN {_OPEN} AND created_at < ?",
                             (*OPEN_STATES, now - KEEP_JOBS_S))
            await tx.execute("DELETE FROM spent WHERE at < ?", (now - KEEP_SPENT_S,))
            await tx.execute("DELETE FROM updates WHERE handled = 1 AND update_id < (SELECT MAX(update_id) FROM updates)")
