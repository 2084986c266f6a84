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
import threading
import time
from pathlib import Path

import pytest

from inference import scratch
from storage.cache import ResultFile, result_key
from storage.database import Database
from storage import retention
from storage.erasure import Erased, Erasure, Erasures
from storage.files import remove
from storage.journal import Journal, NewJob
from storage.retention import STRAY_FILE_S, Swept, sweep
from storage.stores import Stores

DAY = 86400.0
KEEP_DAYS = 30


async def keep_photo(db: Database, stores: Stores, journal: Journal, n: int, user_id: int) -> tuple[str, Path]:
    """What the bot keeps once a user's photo was drawn and answered: the result and its file, the upload,
    the holdings, a button, the stored request and the update; returns the photo's hash and the file."""
    sha = f"{n:064x}"
    key = result_key(sha, "hayao", "v1")
    stored = await stores.results.put(key, sha, "hayao", ResultFile(b"result bytes %d" % n, 4, 4))
    await stores.uploads.remember_upload(user_id, f"U{n}", sha, f"FILE{n}")
    await stores.holdings.hold(user_id, sha)
    await stores.holdings.hold(user_id, sha, key)
    await stores.users.set_last_photo(user_id, sha)
    await db.execute("INSERT INTO buttons (id, chat_id, content_sha256, style, settings, created_at)"
                     " VALUES (?, ?, ?, 'hayao', '{}', ?)", (f"button{n:06d}", user_id, sha, time.time()))
    await journal.add_updates([(n, '{"update_id": %d, "message": {"caption": "private words %d"}}' % (n, n))])
    await journal.update_handled(n)
    await journal.create_job(NewJob(str(n), user_id, user_id, 1, '{"sources": [{"file_id": "FILE%d"}]}' % n))
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
        cache_db = await Database.open(db_path)
        stores = Stores.on(cache_db, results)
        journal = Journal(cache_db)
        kept = [await keep_photo(cache_db, stores, journal, n, 700 + n) for n in (1, 2, 3)]
        await cache_db.close()
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

    async def swept_now() -> Swept:
        cache_db = await Database.open(db_path)
        try:
            return await sweep(cache_db, results, KEEP_DAYS * DAY)
        finally:
            await cache_db.close()

    swept = asyncio.run(swept_now())

    assert (swept.results, swept.photos, swept.requests, swept.updates, swept.stray_files) == (1, 1, 1, 1, 1)
    assert not old_file.exists() and young_file.exists() and edge_file.exists()
    assert not stray.exists() and being_written.exists()
    for table, column in (("results", "content_sha256"), ("uploads", "content_sha256"), ("holdings", "content_sha256"),
                          ("buttons", "content_sha256")):
        left = {r[0] for r in rows(db_path, f"SELECT {column} FROM {table}")}
        assert old not in left and {young, edge} <= left, table
    assert rows(db_path, "SELECT job_id FROM jobs ORDER BY job_id") == [("2",), ("3",)]
    assert rows(db_path, "SELECT update_id FROM updates WHERE payload != '' ORDER BY update_id") == [(2,), (3,)]
    assert rows(db_path, "SELECT * FROM users WHERE user_id = 701") == []  # nothing left in it but the id
    assert rows(db_path, "SELECT last_photo FROM users WHERE user_id = 702") == [(young,)]
    # Overwritten, not left in a free page or the write-ahead log: the file itself no longer holds it.
    on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("bot.db*"))
    assert b"private words 1" not in on_disk and b"FILE1\"" not in on_disk and b"private words 2" in on_disk


def test_a_lookup_is_answered_while_the_sweep_deletes_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep deletes old results' files after its transaction, in a thread: a photo sent meanwhile is
    answered from the cache then, not once the disk is done. (Were the files deleted inside the sweep's
    transaction, the lookup would wait for its lock, and come second.)"""
    deleting, answered = threading.Event(), threading.Event()
    order: list[str] = []

    def held_remove(folder: Path, names: list[str]) -> None:
        deleting.set()
        answered.wait(30)  # set by the lookup once answered; only a lookup held up by the sweep outwaits it
        order.append("old files deleted")
        remove(folder, names)

    monkeypatch.setattr(retention, "remove", held_remove)

    async def scenario() -> None:
        db = await Database.open(tmp_path / "bot.db")
        try:
            stores = Stores.on(db, tmp_path / "results")
            old, young = result_key("1" * 64, "hayao", "v1"), result_key("2" * 64, "hayao", "v1")
            old_file = (await stores.results.put(old, "1" * 64, "hayao", ResultFile(b"old", 4, 4))).path
            await stores.results.put(young, "2" * 64, "hayao", ResultFile(b"young", 4, 4))
            await db.execute("UPDATE results SET created_at = 0 WHERE key = ?", (old,))
            sweeping = asyncio.ensure_future(sweep(db, tmp_path / "results", KEEP_DAYS * DAY))
            assert await asyncio.to_thread(deleting.wait, 30), "the sweep never deleted a file"
            hit = await stores.results.get(young)
            order.append("looked up")
            answered.set()
            assert (await sweeping).results == 1
            assert hit is not None and hit.path.read_bytes() == b"young" and not old_file.exists()
        finally:
            await db.close()

    asyncio.run(scenario())
    assert order == ["looked up", "old files deleted"]


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


async def forget_after_upgrade(db_path: Path, results: Path, user_id: int) -> Erased:
    """Open an older release's file (the upgrade), then carry out ``user_id``'s /forget there."""
    db = await Database.open(db_path)
    try:
        erasures = Erasures(db, results)
        erasure = Erasure(9, user_id, user_id, "en")
        await erasures.begin(erasure)
        erased = await erasures.erase(erasure, "key", 0, 0)
        await erasures.finish(erasure)
        return erased
    finally:
        await db.close()


def test_what_an_older_release_kept_is_linked_to_its_users_and_erased_with_them(tmp_path: Path) -> None:
    """A file from before /forget existed: the photos a user's requests, last photo and private buttons
    name become theirs at the upgrade, so their erasure deletes them (and leaves another user's)."""
    from storage.schema import STEPS

    db_path, results = tmp_path / "bot.db", tmp_path / "results"
    mine, theirs = "a" * 64, "b" * 64
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        db.executescript("".join(STEPS[:5]) + "PRAGMA user_version = 5;")
        for sha, n in ((mine, 1), (theirs, 2)):
            db.execute("INSERT INTO results (key, content_sha256, style, filename, bytes, width, height, created_at,"
                       " last_used) VALUES (?, ?, 'hayao', ?, 1, 1, 1, 0, 0)", (f"{sha}:hayao:v", sha, f"{n}.jpg"))
            db.execute("INSERT INTO uploads VALUES (?, ?, ?, 0)", (f"U{n}", sha, f"FILE{n}"))
            (results / f"{n}.jpg").parent.mkdir(parents=True, exist_ok=True)
            (results / f"{n}.jpg").write_bytes(b"result")
        request = '{"v": 4, "sources": [{"file_id": "FILE1", "file_unique_id": "U1"}]}'
        db.execute("INSERT INTO jobs (job_id, chat_id, user_id, photos, request, state, created_at) VALUES"
                   " ('7', 71, 71, 1, ?, 'done', 0)", (request,))
        db.execute("INSERT INTO jobs (job_id, chat_id, user_id, photos, request, state, created_at) VALUES"
                   " ('8', 72, 72, 1, 'not json', 'done', 0)")
        db.execute("INSERT INTO users (user_id, last_photo) VALUES (72, ?)", (theirs,))

    erased = asyncio.run(forget_after_upgrade(db_path, results, 71))
    assert (erased.results, erased.photos, erased.requests) == (1, 1, 1)
    assert rows(db_path, "SELECT content_sha256 FROM uploads") == [(theirs,)]
    assert not (results / "1.jpg").exists() and (results / "2.jpg").exists()
    assert rows(db_path, "SELECT user_id, content_sha256 FROM holdings") == [(72, theirs)]


def test_an_older_releases_file_ids_are_linked_to_whoever_sent_them_and_only_theirs_erased(tmp_path: Path) -> None:
    """Before step 8 a file id named no sender: two users who sent the same bytes as files of their own
    had one row each, with nothing to tell whose. At the upgrade each is linked to the user whose request
    named it, so the first user's /forget deletes their file id and keeps the second's."""
    from storage.schema import STEPS

    db_path, results = tmp_path / "bot.db", tmp_path / "results"
    sha = "c" * 64
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        db.executescript("".join(STEPS[:7]) + "PRAGMA user_version = 7;")
        for n, user in ((1, 81), (2, 82)):
            db.execute("INSERT INTO uploads VALUES (?, ?, ?, 0)", (f"U{n}", sha, f"FILE{n}"))
            request = f'{{"v": 5, "sources": [{{"file_id": "FILE{n}", "file_unique_id": "U{n}"}}]}}'
            db.execute("INSERT INTO jobs (job_id, chat_id, user_id, photos, request, state, created_at) VALUES"
                       " (?, ?, ?, 1, ?, 'done', 0)", (str(n), user, user, request))
            db.execute("INSERT INTO holdings VALUES (?, ?, '', 0)", (user, sha))
        db.execute("INSERT INTO uploads VALUES ('U3', ?, 'FILE3', 0)", (sha,))  # no request names it

    assert asyncio.run(forget_after_upgrade(db_path, results, 81)).photos == 1
    # The unknown sender's file id might have been the forgotten user's: it went with theirs.
    assert rows(db_path, "SELECT file_unique_id, user_id, file_id FROM uploads") == [("U2", 82, "FILE2")]
