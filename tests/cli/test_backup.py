"""`animebot backup` and `animebot restore` as an operator runs them: separate processes, real SQLite, real files.

A backup taken while a writer keeps writing restores whole; a running bot's home, backed up while it draws and
restored into an empty home, answers a repeat from the cache and still forgets a user; and a cut-short,
damaged or newer release's backup, or a home in use, is refused in one sentence with the target untouched.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import sqlite3
import tarfile
import threading
import time
from pathlib import Path

import pytest

from storage.backup import FORMAT, MANIFEST, back_up
from storage.database import Database
from storage.schema import STEPS, pending_steps
from testkit.bot_harness import private_chat, start_bot
from testkit.cli import animebot
from testkit.fake_telegram import FakeTelegram
from testkit.journal import drawn_by, jobs_for, journal_rows, settled
from testkit.pictures import synthetic_photo
from testkit.privacy import BOT_ENV, files_holding, forget, rows_naming, traces_of
from testkit.replies import drawn, first_answer
from testkit.worker_harness import held
from weights.store import ModelStore


def content(i: int) -> bytes:
    return f"result {i} ".encode() * (50 + i)


class Writer(threading.Thread):
    """Writes as the bot does, on the bot's own Database, until told to stop: a result's file, then its row and a
    user's row in one transaction; and every third time the oldest result's row, then its file, deleted."""

    def __init__(self, home: Path) -> None:
        super().__init__(daemon=True)
        self.home, self.written, self.done = home, 0, threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._write())
        except BaseException as exc:  # the test says it
            self.failure = exc

    async def _write(self) -> None:
        db = await Database.open(self.home / "bot.db")
        results = self.home / "results"
        try:
            while not self.done.is_set():
                i = self.written + 1
                (results / f"{i % 7}").mkdir(parents=True, exist_ok=True)
                (results / f"{i % 7}/{i}.jpg").write_bytes(content(i))
                async with db.transaction() as tx:
                    await tx.execute("INSERT INTO results (key, content_sha256, style, filename, bytes, width, height,"
                                     " created_at, last_used) VALUES (?, ?, 'hayao', ?, ?, 1, 1, ?, ?)",
                                     (f"k{i}", f"h{i}", f"{i % 7}/{i}.jpg", len(content(i)), i, i))
                    await tx.execute("INSERT INTO users (user_id, style) VALUES (?, 'hayao')", (i,))
                if i % 3 == 0:
                    row = await db.fetchone("SELECT key, filename FROM results ORDER BY created_at LIMIT 1")
                    assert row is not None
                    await db.execute("DELETE FROM results WHERE key = ?", (row[0],))
                    (results / row[1]).unlink()
                self.written = i
        finally:
            await db.close()


def tree(path: Path) -> dict[str, bytes | None]:
    """Everything under ``path``: each file's bytes, each folder as None."""
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): (p.read_bytes() if p.is_file() else None) for p in sorted(path.rglob("*"))}


def refused(target: Path, backup: Path, tmp_path: Path) -> str:
    """Restore ``backup`` into ``target``, which must be refused in one sentence and leave it as it was."""
    before = tree(target)
    existed = target.exists()
    done = animebot(target, "restore", str(backup), cwd=tmp_path)
    assert done.returncode != 0, done.stdout
    assert done.stderr.startswith("animebot: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert tree(target) == before and target.exists() == existed, "the target changed"
    return done.stderr


def test_a_backup_taken_while_a_writer_writes_restores_whole(tmp_path: Path) -> None:
    home, restored = tmp_path / "home", tmp_path / "restored"
    writer = Writer(home)
    writer.start()
    try:
        while writer.written < 30 and writer.is_alive():
            time.sleep(0.01)
        before = writer.written
        done = animebot(home, "backup", str(tmp_path / "backups" / "home.tar"), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        after = writer.written
    finally:
        writer.done.set()
        writer.join()
    assert writer.failure is None, writer.failure
    assert writer.written > after, "the writer wrote after the backup, too"
    assert [p.name for p in (tmp_path / "backups").iterdir()] == ["home.tar"], "no temporary file is left"

    done = animebot(restored, "restore", str(tmp_path / "backups" / "home.tar"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in restored.iterdir()) == ["bot.db", "results"]
    with contextlib.closing(sqlite3.connect(restored / "bot.db")) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        users = [row[0] for row in db.execute("SELECT user_id FROM users ORDER BY user_id")]
        rows = db.execute("SELECT key, filename FROM results").fetchall()
    # One moment's copy: every user written up to some point and none after, taken while the writer wrote.
    assert users == list(range(1, len(users) + 1)) and before < len(users) <= after
    files = {str(p.relative_to(restored / "results")): p.read_bytes()
             for p in (restored / "results").rglob("*") if p.is_file()}
    assert set(files) <= {name for _, name in rows}, "only files the copy names"
    assert all(files[name] == content(int(key[1:])) for key, name in rows if name in files)
    said = json.loads(tarfile.open(tmp_path / "backups" / "home.tar").extractfile("sums.json").read())  # type: ignore[union-attr]
    assert len(files) + said["skipped"] == len(rows), "a file deleted since the copy is skipped, and counted"


@pytest.fixture(scope="module")
def small_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("small") / "home"
    writer = Writer(home)
    writer.start()
    while writer.written < 5 and writer.is_alive():
        time.sleep(0.01)
    writer.done.set()
    writer.join()
    assert writer.failure is None, writer.failure
    return home


@pytest.fixture(scope="module")
def backup(small_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("backups") / "small.tar"
    done = animebot(small_home, "backup", str(path), cwd=path.parent)
    assert done.returncode == 0, done.stderr
    return path


def with_manifest(source: Path, dest: Path, **changes: object) -> Path:
    """``source`` written again with its manifest changed."""
    with tarfile.open(source) as old, tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as new:
        for member in old.getmembers():
            data = old.extractfile(member).read()  # type: ignore[union-attr]
            if member.name == MANIFEST:
                data = json.dumps({**json.loads(data), **changes}).encode()
                member.size = len(data)
            new.addfile(member, io.BytesIO(data))
    return dest


@pytest.mark.slow  # a dozen runs of the real command: out of the quick loop
def test_a_cut_short_damaged_or_newer_backup_is_refused_and_the_target_left_as_it_was(backup: Path, tmp_path: Path
                                                                                        ) -> None:
    whole = backup.read_bytes()
    empty, with_models = tmp_path / "never-made", tmp_path / "models-only"
    (with_models / "models").mkdir(parents=True)
    (with_models / "models" / "hayao.pt").write_bytes(b"weights")
    with tarfile.open(backup) as tar:
        members = {m.name.partition("/")[0]: m for m in tar.getmembers()}  # one of each kind
    last = members["sums.json"]  # the last: what is cut after its end is the tar's padding
    for cut in (last.offset_data + last.size - 1, last.offset, len(whole) // 2, 700, 100):
        (tmp_path / "cut.tar").write_bytes(whole[:cut])
        for target in (empty, with_models):
            said = refused(target, tmp_path / "cut.tar", tmp_path)
            assert "damaged or cut short" in said and "is as it was" in said
    for at in (members[name].offset_data + members[name].size // 2 for name in ("results", "bot.db")):
        damaged = bytearray(whole)
        damaged[at] ^= 0xFF
        (tmp_path / "damaged.tar").write_bytes(bytes(damaged))
        assert "damaged" in refused(empty, tmp_path / "damaged.tar", tmp_path)
    for changes in ({"format": FORMAT + 1}, {"schema": len(STEPS) + 1}):
        said = refused(with_models, with_manifest(backup, tmp_path / "newer.tar", **changes), tmp_path)
        assert "made by a newer animebot" in said
    refused(empty, tmp_path / "no-such.tar", tmp_path)
    (tmp_path / "notes.txt").write_text("not a backup")
    assert "damaged" in refused(empty, tmp_path / "notes.txt", tmp_path)


def test_a_home_in_use_is_refused_and_left_as_it_was(backup: Path, small_home: Path, tmp_path: Path) -> None:
    said = refused(small_home, backup, tmp_path)
    assert "is not empty (it holds bot.db" in said
    stray = tmp_path / "stray"
    (stray / "results").mkdir(parents=True)
    assert "is not empty (it holds results)" in refused(stray, backup, tmp_path)


def test_an_older_releases_backup_restores_and_the_bot_brings_it_up_to_date(tmp_path: Path) -> None:
    older, restored = tmp_path / "older", tmp_path / "restored"
    older.mkdir()
    with contextlib.closing(sqlite3.connect(older / "bot.db", isolation_level=None)) as db:
        for number, statements in pending_steps(0):
            if number > 6:  # the release of the privacy step: before sticker sets
                break
            for statement in statements:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {number}")
        db.execute("INSERT INTO users (user_id, style, lang) VALUES (41, 'shinkai', 'de')")
    done = animebot(older, "backup", str(tmp_path / "older.tar"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = animebot(restored, "restore", str(tmp_path / "older.tar"), cwd=tmp_path)
    assert done.returncode == 0 and "database schema 6" in done.stdout, done.stderr

    async def opened() -> tuple[int, object]:
        db = await Database.open(restored / "bot.db")
        try:
            version = await db.fetchone("PRAGMA user_version")
            user = await db.fetchone("SELECT style, lang FROM users WHERE user_id = 41")
            return int(version[0]) if version else 0, tuple(user) if user else None
        finally:
            await db.close()
    assert asyncio.run(opened()) == (len(STEPS), ("shinkai", "de"))


def test_prune_deletes_backups_older_than_the_keep_days_and_nothing_else(small_home: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "backups"
    back_up(small_home, folder / "old.tar", now=time.time() - 8 * 86400)
    back_up(small_home, folder / "recent.tar.gz", now=time.time() - 6 * 86400)
    (folder / "notes.txt").write_text("mine")
    (folder / "old-copy.tar").write_bytes((folder / "old.tar").read_bytes())  # a copy: its date is inside
    monkeypatch.setenv("ANIMEBOT_KEEP_DAYS", "7")
    done = animebot(small_home, "backup", str(folder / "now.tar"), "--prune", str(folder), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "now.tar", "recent.tar.gz"]
    assert "2 deleted, 2 kept" in done.stdout
    restored = tmp_path / "restored"
    assert animebot(restored, "restore", str(folder / "recent.tar.gz"), cwd=tmp_path).returncode == 0


def test_a_running_bots_home_restored_answers_repeats_from_the_cache_and_forgets(
        tiny_store: ModelStore, tmp_path: Path) -> None:
    home, restored, backup = tmp_path / "home", tmp_path / "restored", tmp_path / "backups" / "bot.tar"
    (chat, alice), (chat_b, bob), (chat_c, carol) = (private_chat(uid) for uid in (770058001, 770058002, 770058003))
    data = synthetic_photo(seed=5801)
    with FakeTelegram() as fake:
        bot = start_bot(fake, home, tiny_store.home, **BOT_ENV)
        try:
            photo, answer = drawn(fake, chat, alice, data)
            fake.text_message(chat_c, carol, "/settings")
            menu = fake.wait_for(lambda: [c for c in fake.messages_to(chat_c["id"]) if "reply_markup" in c.params])[0]
            fake.press(carol, menu.result, "o:strength:50")
            fake.wait_for(lambda: settled(home, fake), 60)
            with held(*bot.worker_pids().values()):  # Bob's photo is being drawn while the backup is made
                busy = fake.photo_message(chat_b, bob, synthetic_photo(seed=5802))
                fake.wait_for(lambda: jobs_for(home, busy), 60)
                done = animebot(home, "backup", str(backup), cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            first_answer(fake, busy, "sendPhoto", timeout=120)
            fake.wait_for(lambda: settled(home, fake), 60)
        finally:
            bot.stop()
        # As they were at the backup: not Bob's, whose photo was drawn after it (and is again, below).
        kept = ("SELECT * FROM users WHERE user_id != 770058002 ORDER BY user_id",
                "SELECT * FROM render_prefs ORDER BY owner_id", "SELECT * FROM secrets",
                "SELECT * FROM holdings WHERE user_id = 770058001")
        before = [journal_rows(home, sql) for sql in kept]

        done = animebot(restored, "restore", str(backup), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert before[1] and before[3], "Carol's settings and Alice's holdings are there to be kept"
        assert [journal_rows(restored, sql) for sql in kept] == before, "settings, the ids' key, what Alice holds"
        assert journal_rows(restored, "SELECT state FROM jobs WHERE user_id = ?", bob["id"]) in ([("queued",)],
                                                                                               [("running",)])
        bot = start_bot(fake, restored, tiny_store.home, **BOT_ENV)
        try:
            fake.wait_for(lambda: settled(restored, fake), 120)  # Bob's photo, open in the copy, is finished
            assert len(fake.calls_to("sendPhoto", chat_b["id"])) == 2
            again = fake.photo_message(chat, alice, data)
            repeat = first_answer(fake, again, "sendPhoto", timeout=120)
            fake.wait_for(lambda: settled(restored, fake), 60)
            assert "photo" not in repeat.files, "sent again by its file id, not drawn and uploaded"
            assert repeat.params["photo"] == answer.result["photo"][-1]["file_id"]
            assert drawn_by(restored, alice["id"]) == 1, "the repeat was not drawn"
            traces = traces_of(fake, photo, answer, hashlib.sha256(data).hexdigest(), alice["id"])
            assert rows_naming(restored, traces) and files_holding(restored, traces.result), "there to be forgotten"
            said = forget(fake, chat, alice)
            assert "results, with their files: 1" in said
            fake.wait_for(lambda: settled(restored, fake), 60)
            assert files_holding(restored, traces.result) == []
            assert rows_naming(restored, traces) == [], "found by the restored key, and deleted"
        finally:
            bot.stop()
