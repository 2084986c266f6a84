"""The stores of results, uploads, users' settings and counts (storage/stores.py): a real file, real WAL,
real eviction."""
from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

from storage.cache import ResultFile, result_key
from storage.database import Database
from storage.stores import Stores
from storage.users import Prefs


def run(coro):  # small helper: these tests are plain functions
    return asyncio.run(coro)


def test_put_get_and_file_ids_survive_reopening(tmp_path: Path) -> None:
    async def scenario() -> None:
        cache_db = await Database.open(tmp_path / "bot.db")
        stores = Stores.on(cache_db, tmp_path / "results")
        key = result_key("a" * 64, "hayao", "v1")
        assert await stores.results.get(key) is None
        stored = await stores.results.put(key, "a" * 64, "hayao", ResultFile(b"JPEGDATA", 720, 480))
        assert stored.path.read_bytes() == b"JPEGDATA"
        await stores.results.set_media(key, "PHOTO1", "photo")
        await stores.results.set_document(key, "DOC1")
        await stores.uploads.remember_upload(1, "uniq-1", "a" * 64, "FILE-1")
        await cache_db.close()

        again_db = await Database.open(tmp_path / "bot.db")

        again = Stores.on(again_db, tmp_path / "results")
        hit = await again.results.get(key)
        assert hit is not None and (hit.media_file_id, hit.document_file_id) == ("PHOTO1", "DOC1")
        assert (hit.width, hit.height) == (720, 480)
        assert await again.uploads.content_of("uniq-1") == "a" * 64
        assert await again.uploads.content_of("uniq-2") is None
        assert await again.uploads.file_id_of("a" * 64) == "FILE-1"
        assert await again.uploads.file_id_of("b" * 64) is None
        await again.users.set_render_pref(-100, "strength", 50)
        await again.users.set_render_pref(-100, "faces", 0)
        assert await again.users.render_prefs(-100) == {"strength": 50, "faces": 0}
        assert await again.users.render_prefs(7) == {}
        await again_db.close()

    run(scenario())
    mode = sqlite3.connect(tmp_path / "bot.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_least_recently_used_results_are_evicted_beyond_the_cap(tmp_path: Path) -> None:
    async def scenario() -> None:
        cache_db = await Database.open(tmp_path / "bot.db")
        stores = Stores.on(cache_db, tmp_path / "results", max_bytes=2500)
        keys = [result_key(f"{i:064d}", "hayao", "v1") for i in range(3)]
        for i, key in enumerate(keys[:2]):
            await stores.results.put(key, f"{i:064d}", "hayao", ResultFile(b"x" * 1000, 10, 10))
        assert await stores.results.get(keys[0]) is not None  # 0 is now more recent than 1
        await stores.results.put(keys[2], f"{2:064d}", "hayao", ResultFile(b"x" * 1000, 10, 10))
        assert await stores.results.get(keys[1]) is None  # evicted, file removed too
        assert await stores.results.get(keys[0]) is not None and await stores.results.get(keys[2]) is not None
        assert await stores.results.total_bytes() == 2000
        assert len(list((tmp_path / "results").rglob("*.jpg"))) == 2
        await cache_db.close()

    run(scenario())


def test_a_result_whose_file_vanished_is_a_miss(tmp_path: Path) -> None:
    async def scenario() -> None:
        cache_db = await Database.open(tmp_path / "bot.db")
        stores = Stores.on(cache_db, tmp_path / "results")
        key = result_key("b" * 64, "cute", "v1")
        stored = await stores.results.put(key, "b" * 64, "cute", ResultFile(b"data", 1, 1))
        stored.path.unlink()
        assert await stores.results.get(key) is None
        await cache_db.close()

    run(scenario())


def test_a_miss_is_answered_while_another_connection_writes(tmp_path: Path) -> None:
    """Looking up a result that is not there writes nothing, so it needs no write lock on the file: another
    connection in the middle of a write (an operator's sqlite3, a tool) does not hold it up. A hit still
    waits its turn, since it marks the result used."""
    path = tmp_path / "bot.db"

    async def scenario() -> None:
        db = await Database.open(path)
        try:
            stores = Stores.on(db, tmp_path / "results")
            with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:
                other.execute("BEGIN IMMEDIATE")
                other.execute("INSERT INTO stats (name, value) VALUES ('written elsewhere', 1)")
                assert await stores.results.get(result_key("e" * 64, "hayao", "v1")) is None
                other.execute("ROLLBACK")
        finally:
            await db.close()

    run(scenario())


def test_user_prefs_and_stats(tmp_path: Path) -> None:
    async def scenario() -> None:
        cache_db = await Database.open(tmp_path / "bot.db")
        stores = Stores.on(cache_db, tmp_path / "results")
        assert await stores.users.prefs(7) == Prefs(None, None)
        await stores.users.set_style(7, "cute")
        await stores.users.set_lang(7, "zh")
        assert await stores.users.prefs(7) == Prefs("cute", "zh")
        await stores.counters.bump("cache_hits")
        await stores.counters.bump("cache_hits", 2)
        assert (await stores.counters.all())["cache_hits"] == 3
        # The admin page's day: counted by UTC day, read back whether flushed or not, yesterday's apart.
        midnight = 86400.0 * 20_000
        for name, at in (("photos", midnight - 1), ("photos", midnight), ("clips", midnight + 5), ("photos", midnight + 9)):
            await stores.counters.bump_today(name, now=at)
        assert await stores.counters.today(now=midnight + 60) == {"photos": 2, "clips": 1}
        await stores.counters.flush()
        await stores.counters.bump_today("hd", now=midnight + 70)
        assert await stores.counters.today(now=midnight + 80) == {"photos": 2, "clips": 1, "hd": 1}
        assert await stores.counters.today(now=midnight - 80) == {"photos": 1}
        await cache_db.close()

    run(scenario())


def test_results_of_one_photo_with_other_settings_are_files_of_their_own(tmp_path: Path) -> None:
    """Two users draw the same photo in the same style with different /settings: each keeps its own file,
    and evicting one leaves the other's intact."""
    async def scenario() -> None:
        cache_db = await Database.open(tmp_path / "bot.db")
        stores = Stores.on(cache_db, tmp_path / "results", max_bytes=2500)
        sha = "c" * 64
        full, half = result_key(sha, "hayao", "v1-s100"), result_key(sha, "hayao", "v1-s50")
        first = await stores.results.put(full, sha, "hayao", ResultFile(b"FULL" * 250, 10, 10))
        second = await stores.results.put(half, sha, "hayao", ResultFile(b"HALF" * 250, 10, 10))
        assert first.path != second.path
        assert (await stores.results.get(full)).path.read_bytes() == b"FULL" * 250
        assert (await stores.results.get(half)).path.read_bytes() == b"HALF" * 250
        await stores.results.put(result_key("d" * 64, "hayao", "v1"), "d" * 64, "hayao", ResultFile(b"x" * 1000, 10, 10))
        assert await stores.results.get(full) is None  # the least recently used went...
        assert (await stores.results.get(half)).path.read_bytes() == b"HALF" * 250  # ...and took nothing else with it
        await cache_db.close()

    run(scenario())


def test_a_last_photo_that_was_a_clip_is_forgotten_and_spoilers_are_kept(tmp_path: Path) -> None:
    """Releases before schema step 4 remembered a clip as a user's last "photo", which /style's preview
    then drew as a clip in every style; opening such a file forgets it, and keeps a real photo."""
    from storage.buttons import ResultButtons, ShownResult
    from storage.schema import STEPS
    from inference.pipeline import ConvertSettings

    db = sqlite3.connect(tmp_path / "bot.db")
    db.executescript("".join(STEPS[:3]) + "PRAGMA user_version = 3;")
    for sha, filename in (("c" * 64, "clip.mp4"), ("p" * 64, "photo.jpg")):
        db.execute("INSERT INTO results (key, content_sha256, style, filename, bytes, width, height, created_at,"
                   " last_used) VALUES (?, ?, 'hayao', ?, 1, 1, 1, 0, 0)", (f"{sha}:hayao:v", sha, filename))
        db.execute("INSERT INTO uploads VALUES (?, ?, ?, 0)", (f"u-{filename}", sha, f"F-{filename}"))
    db.executemany("INSERT INTO users (user_id, last_photo) VALUES (?, ?)", [(1, "c" * 64), (2, "p" * 64)])
    db.commit()
    db.close()

    async def scenario() -> None:
        cache_db = await Database.open(tmp_path / "bot.db")
        stores = Stores.on(cache_db, tmp_path / "results")
        assert await stores.users.last_photo(1) is None
        kept = await stores.users.last_photo(2)
        assert kept is not None and (kept.content_sha256, kept.file_id, kept.spoiler) == ("p" * 64, "F-photo.jpg", False)
        await stores.users.set_last_photo(2, "p" * 64, spoiler=True)
        assert (await stores.users.last_photo(2)).spoiler  # type: ignore[union-attr]

        buttons = ResultButtons(cache_db, ConvertSettings)
        plain = ShownResult(5, "p" * 64, "hayao", ConvertSettings())
        first = await buttons.id_for(plain)
        assert (await buttons.find(first, 5)).spoiler is False  # type: ignore[union-attr]
        # shown again in that chat with a spoiler: the same id, and from now on every answer has one
        assert await buttons.id_for(ShownResult(5, "p" * 64, "hayao", ConvertSettings(), spoiler=True)) == first
        assert await buttons.id_for(plain) == first
        assert (await buttons.find(first, 5)).spoiler is True  # type: ignore[union-attr]
        await cache_db.close()

    run(scenario())


def test_buttons_stored_by_earlier_releases_still_act_on_their_results(tmp_path: Path) -> None:
    """A result's buttons keep working across an upgrade: its row's settings read back as they were drawn
    (a row from before a setting existed gets that setting's default), and showing the result again finds
    its row by the same stored text, so it keeps its id (the Mini App lists it once)."""
    from storage.buttons import ResultButtons, ShownResult
    from inference.pipeline import ConvertSettings

    drawn = ConvertSettings(max_side=512, strength=75, keep_colours=True)
    limits = '"limits": {"max_aspect": 20.0, "max_pixels": 100000000, "min_side": 32}'
    before_cut = ('{"faces": true, "fmt": "jpg", "jpeg_quality": 92, "keep_colours": true, ' + limits
                  + ', "max_side": 512, "strength": 75}')
    now = '{"avatar": false, "cut": "", ' + before_cut[1:]

    async def scenario() -> None:
        db = await Database.open(tmp_path / "bot.db")
        try:
            for rid, chat, settings in (("old", 7, before_cut), ("new", 8, now)):
                await db.execute("INSERT INTO buttons (id, chat_id, content_sha256, style, settings, created_at,"
                                 " spoiler) VALUES (?, ?, ?, 'hayao', ?, 1.0, 0)", (rid, chat, "p" * 64, settings))
            buttons = ResultButtons(db, ConvertSettings)
            assert (await buttons.find("old", 7)) == ShownResult(7, "p" * 64, "hayao", drawn, shown_at=1.0)
            assert await buttons.find("old", 8) is None  # shown in another chat
            assert [s.settings for _, s in await buttons.shown_in(8, 10)] == [drawn]
            assert await buttons.id_for(ShownResult(8, "p" * 64, "hayao", drawn)) == "new"
        finally:
            await db.close()  # its connection's thread would keep a failed test's process alive

    run(scenario())
