"""The retention sweep: nothing about a photo outlives ``ANIMEBOT_KEEP_DAYS``.

Results (and the files behind them), the records of the photos people sent, the buttons under
results, who asked for what, stored requests and the contents of stored updates are deleted once
they are older than the operator's bound, whoever they belong to; the cache's size cap still
evicts earlier. Preferences (a user's style and language) are not about a photo and stay until
/forget. A file under ``results/`` that no row names (one a crash left half-written, or whose row
went first) is deleted once it is an hour old, which is long past any write in progress. A row
always goes first: the cache's eviction, /forget and this sweep commit the rows' deletion, then
delete their files in a thread (storage/files.py), so a crash in between leaves only such files,
which nothing finds meanwhile.

The sweep's transaction holds only its statements, no file's deletion, so a lookup waits for the
statements alone, never for the disk.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from storage.database import Database
from storage.erasure import drop_results, truncate_log
from storage.files import remove

STRAY_FILE_S = 3600.0  # a file no row names, this old, is not one being written


@dataclass(frozen=True)
class Swept:
    """What one sweep deleted, for its log line."""

    results: int
    photos: int
    requests: int
    updates: int
    stray_files: int

    def __bool__(self) -> bool:
        return any((self.results, self.photos, self.requests, self.updates, self.stray_files))


async def sweep(db: Database, results_dir: Path, keep_s: float, now: float | None = None) -> Swept:
    """Delete what is older than ``keep_s`` seconds, in one transaction, then the files of the results it
    deleted, and stray result files."""
    now = time.time() if now is None else now
    cutoff = now - keep_s
    async with db.transaction() as tx:
        files = await drop_results(tx, "created_at < ?", (cutoff,))
        photos = await tx.execute("DELETE FROM uploads WHERE seen_at < ?", (cutoff,))
        await tx.execute("DELETE FROM buttons WHERE created_at < ?", (cutoff,))
        await tx.execute("DELETE FROM holdings WHERE used_at < ?", (cutoff,))
        # The sets stay in Telegram, their owner's; the bot forgets which is whose (a later sticker finds the
        # set by its name again) and which result went where.
        await tx.execute("DELETE FROM stickers WHERE added_at < ?", (cutoff,))
        await tx.execute("DELETE FROM sticker_sets WHERE used_at < ?", (cutoff,))
        await tx.execute("UPDATE users SET last_photo = NULL WHERE last_photo IS NOT NULL"
                         " AND last_photo NOT IN (SELECT content_sha256 FROM uploads)")
        await tx.execute("DELETE FROM users WHERE style IS NULL AND lang IS NULL AND last_photo IS NULL")
        # An open job is still to be answered, whatever its age: its request stays until it is.
        requests = await tx.execute("DELETE FROM jobs WHERE created_at < ? AND state NOT IN ('queued', 'running')",
                                    (cutoff,))
        await tx.execute("DELETE FROM album_parts WHERE job_id NOT IN (SELECT job_id FROM jobs)")
        # Telegram keeps an update for a day; one still unhandled after this long is past answering.
        updates = await tx.execute(
            "UPDATE updates SET payload = '', handled = 1 WHERE received_at < ? AND payload != ''", (cutoff,))
    await asyncio.to_thread(remove, results_dir, files)
    named = {row[0] for row in await db.fetchall("SELECT filename FROM results")}
    stray = await asyncio.to_thread(_drop_stray_files, results_dir, named, now)
    await truncate_log(db)
    return Swept(len(files), photos, requests, updates, stray)


def _drop_stray_files(results_dir: Path, named: set[str], now: float) -> int:
    dropped = 0
    for path in results_dir.rglob("*"):
        if not path.is_file() or path.relative_to(results_dir).as_posix() in named:
            continue
        try:
            if now - path.stat().st_mtime > STRAY_FILE_S:
                path.unlink()
                dropped += 1
        except FileNotFoundError:  # gone meanwhile
            continue
    return dropped
