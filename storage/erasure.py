"""/forget in the database and the result files: everything the bot keeps about one user, deleted.

A user's data is spread over the one SQLite file: their results and the files behind them, the
photos they sent (``uploads``), the buttons under their results, their preferences, their requests
(``jobs``, ``album_parts``) and the updates Telegram sent about them. ``holdings`` says which
photos and results each user asked for, so a result that another user asked for too stays, and
only this user's link to it goes.

The deleting is one transaction on the bot's database (storage/database.py): it lands whole or
not at all. The result files go once it is committed, before the user is told (storage/files.py,
``remove``); a crash in between leaves files that no row names, which the retention sweep deletes.
An erasure is first written down (:meth:`Erasures.begin`) and crossed out only once the user was
told (:meth:`Erasures.finish`): a restart in between finishes it, and running it twice deletes
nothing more the second time. With ``secure_delete`` on (storage/database.py) and the
write-ahead log truncated at the end, the deleted rows cannot be read from the file either.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from storage.database import Database, Transaction
from storage.files import remove

log = logging.getLogger("animebot.privacy")

@dataclass(frozen=True)
class Erased:
    """What one erasure deleted, for the sentence that tells the user."""

    results: int = 0  # results deleted, with their files
    kept: int = 0  # results another user asked for too: only this user's link to each went
    photos: int = 0  # photos whose records went (what Telegram calls their files, their hash), all or the user's own
    requests: int = 0  # stored requests (journal jobs)
    updates: int = 0  # journal rows of updates they sent whose contents were deleted
    buttons: int = 0  # result buttons
    settings: bool = False  # their style, language and drawing options
    # The names of their sticker sets, which live on in Telegram: only their owner can delete them there.
    sticker_sets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Erasure:
    """A /forget being carried out: whose data, and where to say that it is done."""

    update_id: int  # the update that confirmed it
    user_id: int
    chat_id: int
    lang: str
    message_id: int | None = None  # the confirmation message, edited into the answer
    erased: Erased | None = None  # what was deleted, once it was


async def drop_results(tx: Transaction, where: str, params: Iterable[object]) -> list[str]:
    """Delete the rows of the results ``where`` picks; the names of their files, for the caller to
    :func:`~storage.files.remove` once the transaction is committed."""
    names = [row[0] for row in await tx.fetchall(f"SELECT filename FROM results WHERE {where}", tuple(params))]
    await tx.execute(f"DELETE FROM results WHERE {where}", tuple(params))
    return names


async def truncate_log(db: Database) -> None:
    """Fold the write-ahead log into the file and empty it: the log keeps old copies of the pages
    it changed, deleted rows among them, until then. Busy readers make it a no-op, done again next time:
    another reader's, or a statement of this connection's still being read by another request, which
    SQLite refuses with "database table is locked" (a stranger's /forget followed at once by a photo
    logged that as a traceback)."""
    try:
        await db.pragma("wal_checkpoint(TRUNCATE)")
    except sqlite3.OperationalError as exc:
        log.info("the write-ahead log is in use (%s); it is emptied at the next erasure or sweep", exc)


class Erasures:
    """The erasures of the database ``db`` and the result files in ``results_dir``."""

    def __init__(self, db: Database, results_dir: Path) -> None:
        self._db = db
        self.results_dir = results_dir

    async def begin(self, erasure: Erasure) -> None:
        """Write the erasure down before anything is deleted (a confirmation that comes again is one)."""
        await self._db.execute("INSERT OR IGNORE INTO erasures (update_id, user_id, chat_id, lang, message_id)"
                               " VALUES (?, ?, ?, ?, ?)", (erasure.update_id, erasure.user_id, erasure.chat_id,
                                                           erasure.lang, erasure.message_id))

    async def pending(self) -> list[Erasure]:
        """Erasures a crash or a stop interrupted, oldest first."""
        rows = await self._db.fetchall("SELECT update_id, user_id, chat_id, lang, message_id, summary FROM erasures"
                                       " ORDER BY update_id")
        return [Erasure(r[0], r[1], r[2], r[3], r[4], _erased(r[5]) if r[5] else None) for r in rows]

    async def erase(self, erasure: Erasure, who: str, asked: int, drawn: int) -> Erased:
        """Delete everything kept about ``erasure.user_id`` but the erasure itself, and note what went.

        ``who``, ``asked`` and ``drawn`` are the one-way key and the counts that keep the user's
        limits where they were (storage/journal.py, ``who``)."""
        async with self._db.transaction() as tx:
            erased, files = await self._erase(tx, erasure.user_id, erasure.update_id)
            await tx.execute("DELETE FROM spent WHERE who = ?", (who,))  # counted in asked and drawn
            if asked or drawn:
                await tx.execute("INSERT INTO spent (who, at, asked, drawn) VALUES (?, ?, ?, ?)",
                                 (who, time.time(), asked, drawn))
            await tx.execute("UPDATE erasures SET summary = ? WHERE update_id = ?",
                             (json.dumps(asdict(erased)), erasure.update_id))
        await asyncio.to_thread(remove, self.results_dir, files)
        await truncate_log(self._db)
        return erased

    async def finish(self, erasure: Erasure) -> None:
        """The user was told: cross the erasure out, and with it the contents of the update that asked."""
        async with self._db.transaction() as tx:
            await tx.execute("DELETE FROM erasures WHERE update_id = ?", (erasure.update_id,))
            await tx.execute("UPDATE updates SET payload = '' WHERE update_id = ?", (erasure.update_id,))
        await truncate_log(self._db)

    async def _erase(self, tx: Transaction, uid: int, asking_update: int) -> tuple[Erased, list[str]]:
        """What went, and the result files to delete once it is committed."""
        held = await tx.fetchall("SELECT content_sha256, result_key FROM holdings WHERE user_id = ?", (uid,))
        await tx.execute("DELETE FROM holdings WHERE user_id = ?", (uid,))
        files: list[str] = []  # of the results deleted
        kept = buttons = 0
        for key in sorted({key for _, key in held if key}):
            if await _held(tx, "result_key", key):
                kept += 1
            else:
                files += await drop_results(tx, "key = ?", (key,))
        photos: set[str] = {  # whose records (Telegram's ids, the hash) went
            row[0] for row in await tx.fetchall("SELECT DISTINCT content_sha256 FROM uploads WHERE user_id = ?", (uid,))}
        await tx.execute("DELETE FROM uploads WHERE user_id = ?", (uid,))
        for sha in sorted({sha for sha, _ in held}):
            if await _held(tx, "content_sha256", sha):  # someone else sent it too: only this user's part goes
                # A file id an older release kept without its sender may be this user's: it goes too.
                if await tx.execute("DELETE FROM uploads WHERE content_sha256 = ? AND user_id = 0", (sha,)):
                    photos.add(sha)
                continue
            files += await drop_results(tx, "content_sha256 = ?", (sha,))
            if await tx.execute("DELETE FROM uploads WHERE content_sha256 = ?", (sha,)):
                photos.add(sha)
            buttons += await tx.execute("DELETE FROM buttons WHERE content_sha256 = ?", (sha,))
            await tx.execute("UPDATE users SET last_photo = NULL WHERE last_photo = ?", (sha,))
        buttons += await tx.execute("DELETE FROM buttons WHERE chat_id = ?", (uid,))
        settings = await tx.execute("DELETE FROM users WHERE user_id = ?", (uid,)) > 0
        settings |= await tx.execute("DELETE FROM render_prefs WHERE owner_id = ?", (uid,)) > 0
        await tx.execute("DELETE FROM album_parts WHERE chat_id = ? OR job_id IN (SELECT job_id FROM jobs"
                         " WHERE user_id = ?)", (uid, uid))
        requests = await tx.execute("DELETE FROM jobs WHERE user_id = ?", (uid,))
        updates = await _clear_updates(tx, uid, asking_update)
        sets = tuple(row[0] for row in await tx.fetchall(
            "SELECT name FROM sticker_sets WHERE user_id = ? ORDER BY number", (uid,)))
        await tx.execute("DELETE FROM sticker_sets WHERE user_id = ?", (uid,))
        await tx.execute("DELETE FROM stickers WHERE user_id = ?", (uid,))
        return Erased(len(files), kept, len(photos), requests, updates, buttons, settings, sets), files


def _erased(summary: str) -> Erased:
    raw = json.loads(summary)
    return Erased(**{**raw, "sticker_sets": tuple(raw.get("sticker_sets", ()))})


async def _held(tx: Transaction, column: str, value: str) -> bool:
    """Whether any user (the one being forgotten no longer) holds this photo or result."""
    return await tx.fetchone(f"SELECT 1 FROM holdings WHERE {column} = ? LIMIT 1", (value,)) is not None


async def _clear_updates(tx: Transaction, uid: int, asking_update: int) -> int:
    """Empty the stored updates that name the user; the update ids stay (they are what makes an update
    handled once). Their own updates are marked handled too, so that a restart replays none of them
    (their jobs were stopped first). Another user's update that names them (a reply in a group) is
    kept whole until it was handled: that user's request needs it, and handled updates are pruned within
    the hour. The update asking to forget keeps its contents while it runs (:meth:`Erasures.finish`)."""
    named = re.compile(rf"(?<![\w.]){uid}(?![\w.])")
    rows = await tx.fetchall("SELECT update_id, payload, handled FROM updates WHERE payload != ''")
    cleared = 0
    for update_id, payload, handled in rows:
        if update_id == asking_update or not named.search(payload):
            continue
        theirs = _sender(payload) == uid
        if handled or theirs:
            await tx.execute("UPDATE updates SET payload = '', handled = 1 WHERE update_id = ?", (update_id,))
            cleared += theirs  # another's that named them (an admin's /forget USER_ID) is not theirs to count
    return cleared


def _sender(payload: str) -> int | None:
    """Who sent an update: a message's sender, who pressed a button, or who typed an inline query."""
    try:
        update = json.loads(payload)
    except ValueError:
        return None
    for kind in ("message", "edited_message", "callback_query", "inline_query"):
        sender = (update.get(kind) or {}).get("from") or {}
        if "id" in sender:
            return int(sender["id"])
    return None

