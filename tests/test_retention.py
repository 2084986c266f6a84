"""The retention sweep (``ANIMEBOT_KEEP_DAYS``) on a real SQLite file and real result files, and the
clip folders a killed drawing process leaves: what is older goes, nothing younger does."""
from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inference import scratch
from storage.cache import Cache, result_key
from storage.journal import Journal
from storage.retention import STRAY_FILE_S, sweep

DAY = 86400.0
KEEP_DAYS = 30


async def keep_photo(cache: Cache, journal: Journal, n: int, user_id: int) -> tuple[str, Path]:
    """What the bot keeps once a user's photo was drawn and answered: the result and its file, the upload,
    the holdings, a button, the stored request and the update; returns the photo's hash and the file."""
    sha = f"{n:064x}"
    key = result_key(sha, "hayao", "v1")
    stored = await cache.put(key, sha, "hayao", b"result bytes %d" % n, 4, 4)
    await cache.remember_upload(f"U{n}", sha, f"FILE{n}")
    await cache.hold(user_id, sha)
    await cache.hold(user_id, sha, key)
    await cache.set_last_photo(user_id, sha)
    await cache.db.execute("INSERT INTO buttons (id, chat_id, content_sha256, style, settings, created_at)"
                           " VALUES (?, ?, ?, 'hayao', '{}', ?)", (f"button{n:06d}", user_id, sha, time.time()))
    await cache.db.commit()
    await journal.add_updates([(n, '{"update_id": %d, "message": {"caption": "private words %d"}}' % (n, n))])
    await journal.update_handled(n)
    await journal.create_job(str(n), user_id, user_id, 1, '{"sources": [{"file_id": "FILE%d"}]}' % n)
    await journal.finish_job(str(n), "done", drawn=1)
    return sha, stored.path


def backdate(db_path: Path, sha: str, n: int, age_s: float) -> None:
    """Make everything about photo ``n`` ``age_s`` seconds old, as if kept since then."""
    then = time.time() - age_s
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        db.execute("UPDATE results SET created_at = ?, last_used = ? WHERE content_sha256 = ?", (then, then, sha))
        db.execute("UPDATE uploads SET seen_at = ? WHERE content_sha256 = ?", (then, sha))
        db.execute("UPDATE holdings SET used_at = ? WHERE content_sha256 = ?", (then, sha))
        db.execute("UPDATE buttons SET created_at = ? WHERE content_sha256 = ?", (then, sha))
        db.execute("UPDATE jobs SET created_at = ? WHERE job_id = ?", (then, str(n)))
        db.execute("UPDATE updates SET received_at = ? WHERE update_id = ?", (then, n))


def rows(db_path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        return db.execute(sql, params).fetchall()


def test_the_sweep_deletes_what_is_older_than_keep_days_and_nothing_younger(tmp_path: Path) -> None:
    db_path, results = tmp_path / "bot.db", tmp_path / "results"

    async def keep() -> list[tuple[str, Path]]:
        cache = await Cache.open(db_path, results)
        journal = await Journal.using(cache.db)
        kept = [await keep_photo(cache, journal, n, 700 + n) for n in (1, 2, 3)]
        await cache.close()
        return kept

    (old, old_file), (young, young_file), (edge, edge_file) = asyncio.run(keep())
    backdate(db_path, old, 1, (KEEP_DAYS + 1) * DAY)
    backdate(db_path, young, 2, (KEEP_DAYS - 1) * DAY)
    backdate(db_path, edge, 3, KEEP_DAYS * DAY - 60)  # a minute short of the bound: stays
    stray = results / "ab" / ".partial-left-by-a-crash"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"half a result")
    os.utime(stray, (time.time() - STRAY_FILE_S - 60,) * 2)
    being_written = results / "ab" / ".partial-being-written"
    being_written.write_bytes(b"a result on its way")

    swept = asyncio.run(sweep(db_path, results, KEEP_DAYS * DAY))

    assert (swept.results, swept.photos, swept.requests, swept.updates, swept.stray_files) == (1, 1, 1, 1, 1)
    assert not old_file.exists() and young_file.exists() and edge_file.exists()
    assert not stray.exists() and being_written.exists()
    for table, column in (("results", "content_sha256"), ("uploads", "content_sha256"), ("holdings", "content_sha256"),
                          ("buttons", "content_sha256")):
        left = {r[0] for r in rows(db_path, f"SELECT {column} FROM {table}")}
        assert old not in left and {young, edge} <= left, table
    assert rows(db_path, "SELECT job_id FROM jobs ORDER BY job_id") == [("2",), ("3",)]
    assert rows(db_path, "SELECT update_id FROM updates WHERE payload != '' ORDER BY update_id") == [(2,), (3,)]
    assert rows(db_path, "SELECT last_photo FROM users WHERE user_id = 701") == [(None,)]
    assert rows(db_path, "SELECT last_photo FROM users WHERE user_id = 702") == [(young,)]
    # Overwritten, not left in a free page or the write-ahead log: the file itself no longer holds it.
    on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("bot.db*"))
    assert b"private words 1" not in on_disk and b"FILE1\"" not in on_disk and b"private words 2" in on_disk


def test_a_killed_drawing_process_leaves_no_clip_behind(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    left = Path(tempfile.gettempdir()) / f"{scratch.PREFIX}{dead.stdout.strip()}-abc123"
    left.mkdir()
    (left / "out.mp4").write_bytes(b"a drawn clip, with the user's sound")
    mine = scratch.scratch_dir()
    try:
        assert scratch.sweep() >= 1
        assert not left.exists()
        assert Path(mine.name).is_dir()  # a living process's folder stays
    finally:
        mine.cleanup()
