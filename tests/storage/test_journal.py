"""The journal on a real SQLite file: updates once, jobs until answered, limits counted from jobs."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

from bot.flow.access import Access, Limits
from bot.flow.requests import Request, Source, StoredRequestError, request_from_json, request_to_json
from inference.pipeline import ConvertSettings
from storage.journal import Journal, NewJob
from storage.schema import STEPS
from storage.database import Database


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_updates_are_stored_once_and_replayed_until_handled(tmp_path: Path) -> None:
    async def go() -> None:
        j_db = await Database.open(tmp_path / "bot.db")
        j = Journal(j_db)
        assert await j.next_offset() == 0
        assert await j.add_updates([(5, "{}"), (6, "{}")]) == [5, 6]
        assert await j.add_updates([(6, "{}"), (7, "{}")]) == [7]  # Telegram sent 6 again
        await j.update_handled(5)
        assert [uid for uid, _ in await j.unhandled_updates()] == [6, 7]
        assert await j.next_offset() == 8
        await j_db.close()
        j_db = await Database.open(tmp_path / "bot.db")  # a restart
        j = Journal(j_db)
        assert [uid for uid, _ in await j.unhandled_updates()] == [6, 7]
        await j.update_handled(6)
        await j.update_handled(7)
        await j.prune()
        assert await j.next_offset() == 8  # the newest row is kept for the offset
        await j_db.close()

    run(go())


def test_open_jobs_count_attempts_and_answered_ones_never_come_back(tmp_path: Path) -> None:
    async def go() -> None:
        j_db = await Database.open(tmp_path / "bot.db")
        j = Journal(j_db)
        assert await j.create_job(NewJob("a", 1, 1, 1, "{}"))
        assert not await j.create_job(NewJob("a", 1, 1, 1, "{}"))  # a replayed update
        assert await j.create_job(NewJob("b", 1, 1, 2, "{}"))
        await j.finish_job("b", "done")
        rows = await j.open_jobs()
        assert [(r.job_id, r.attempts) for r in rows] == [("a", 1)]
        await j.job_running("a")
        assert await j.job_state("a") == "running"
        assert [(r.job_id, r.attempts) for r in await j.open_jobs()] == [("a", 2)]
        await j_db.close()

    run(go())


def test_a_request_survives_the_journal_unchanged() -> None:
    req = Request("42", -100, 7, 3, "zh", "hayao", (Source("F1", "U1", 1234), Source("F2", sha256="ab" * 32)),
                  ConvertSettings(max_side=512, faces=False, strength=75, keep_colours=True), kind="file")
    assert request_from_json(request_to_json(req)) == req


def test_rate_limit_and_quota_count_from_jobs_and_spare_admins(tmp_path: Path) -> None:
    async def go() -> None:
        j_db = await Database.open(tmp_path / "bot.db")
        j = Journal(j_db)
        limits = Limits(j, Access(admins=frozenset({9})), per_minute=3, per_day=5)
        now = time.time()
        assert await limits.allowance(1, 1, now) == (1, None)
        await j.create_job(NewJob("1", 1, 1, 3, "{}"))  # an album of 3, just now
        allowed, refusal = await limits.allowance(1, 1, now)
        assert allowed == 0 and refusal is not None and refusal.code == "rate_limited"
        await j.create_job(NewJob("r", 1, 1, 1, "{}", state="refused", outcome="rate_limited"))
        assert (await limits.allowance(1, 1, now))[1].code == "rate_limited"  # refusals don't extend it
        assert await limits.allowance(1, 1, now + 61) == (1, None)
        await j.create_job(NewJob("b", 1, 1, 5, "{}", state="failed", outcome="busy"))  # the bot's fault, not counted
        assert await limits.allowance(1, 1, now + 61) == (1, None)
        await j.create_job(NewJob("2", 1, 1, 2, "{}"))
        assert (await limits.allowance(1, 1, now))[1].code == "rate_limited"
        allowed, quota = await limits.allowance(1, 1, now + 61)
        assert allowed == 0 and quota is not None and quota.code == "quota_reached"  # 3 + 2 of 5 today
        assert await limits.allowance(9, 100, now) == (100, None)  # an admin
        assert await limits.allowance(2, 1, now) == (1, None)  # someone else
        await j_db.close()

    run(go())


def test_the_daily_quota_counts_photos_drawn_and_an_album_gets_what_fits(tmp_path: Path) -> None:
    async def go() -> None:
        j_db = await Database.open(tmp_path / "bot.db")
        j = Journal(j_db)
        limits = Limits(j, Access(), per_minute=0, per_day=5)
        await j.create_job(NewJob("hits", 1, 1, 3, "{}"))
        await j.finish_job("hits", "done", drawn=0)  # three repeats answered from the cache
        await j.create_job(NewJob("press", 1, 1, 1, "{}"))
        await j.finish_job("press", "done", drawn=0)  # a Full size press of a cached result
        await j.create_job(NewJob("bad", 1, 1, 1, "{}"))
        await j.finish_job("bad", "failed", "corrupt")
        assert await limits.allowance(1, 5) == (5, None)  # nothing was drawn today
        await j.create_job(NewJob("new", 1, 1, 2, "{}"))
        await j.finish_job("new", "done", drawn=2)
        await j.create_job(NewJob("open", 1, 1, 1, "{}"))  # not answered yet: it may be drawn
        allowed, refusal = await limits.allowance(1, 4)
        assert allowed == 2 and refusal is not None and refusal.code == "quota_reached"
        await j_db.close()

    run(go())


def test_the_allowlist_admits_listed_users_groups_and_admins() -> None:
    open_bot = Access()
    assert open_bot.allows(1, 1)
    private = Access(admins=frozenset({9}), allowlist=frozenset({1, -100}))
    assert private.allows(1, 1) and private.allows(9, 9) and private.allows(2, -100)
    assert not private.allows(2, 2) and not private.allows(None, None)


def test_a_request_written_by_an_older_version_still_reads() -> None:
    old = {  # as the first version stored it: no "v", no album/spoiler fields, and one field since dropped
        "job_id": "77", "chat_id": 5, "user_id": 5, "reply_to": 3, "lang": "en", "style": "hayao",
        "sources": [{"file_id": "F", "file_unique_id": "U", "file_size": 10, "sha256": None}],
        "settings": {"max_side": 720, "fmt": "jpg", "jpeg_quality": 92, "faces": True, "strength": 100,
                     "keep_colours": False, "limits": {"max_pixels": 1, "min_side": 32, "max_aspect": 20.0}},
        "as_document": False, "fast": False, "retired_field": 1,
    }
    req = request_from_json(json.dumps(old))
    assert (req.job_id, req.sources[0].file_id, req.sources[0].spoiler, req.album) == ("77", "F", False, None)
    for broken in ("not json", "{}", json.dumps({**old, "sources": "x"})):
        try:
            request_from_json(broken)
        except StoredRequestError:
            continue
        raise AssertionError(f"{broken!r} was read")


def test_a_request_of_version_5_reads_as_the_kind_of_job_its_flags_meant() -> None:
    """A job left open by the release before kinds of job is resumed as what it was: the old flags and
    settings name its kind, and ``deliver`` its way of answering."""
    base = json.loads(request_to_json(Request("5", 5, 5, 3, "en", "hayao", (Source("F"),), ConvertSettings())))
    for field in ("kind", "answer"):
        del base[field]
    base["v"] = 5

    def read(settings: dict[str, object] | None = None, **flags: object) -> tuple[str, str]:
        row = {**base, "settings": {**base["settings"], **(settings or {})}, **flags}
        req = request_from_json(json.dumps(row))
        return req.kind, req.answer

    assert read() == ("photo", "chat")
    assert read(as_document=True) == ("file", "chat")
    assert read({"cut": "cutout", "fmt": "png"}, as_document=True) == ("cutout", "chat")
    assert read({"cut": "sticker", "fmt": "webp"}) == ("sticker", "chat")
    assert read({"avatar": True}) == ("avatar", "chat")
    assert read(styles=["cute", "hayao"]) == ("styles", "chat")
    assert read(styles=["cute", "hayao"], preview=True) == ("preview", "chat")
    assert read(styles=["cute", "hayao"], preview=True, deliver="app") == ("tiles", "app")
    assert read({"strength": 40}, deliver="app") == ("photo", "app")


def test_a_database_of_the_first_schema_is_brought_up_to_date(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "bot.db")
    db.executescript(STEPS[0])  # what the first release created, user_version 0
    db.execute("INSERT INTO jobs (job_id, chat_id, user_id, photos, request, state, created_at)"
               " VALUES ('old', 1, 1, 1, '{}', 'done', ?)", (time.time(),))
    db.commit()
    db.close()

    async def go() -> None:
        j_db = await Database.open(tmp_path / "bot.db")
        j = Journal(j_db)
        assert await j.job_state("old") == "done"
        assert await j.drawn_since(1, 0) == 1  # an old answered job counts as drawn
        assert await j.create_job(NewJob("a", 1, 1, 2, "{}"), album=("G", [10, 11]))
        assert await j.album_parts(1, "G") == {10: "a", 11: "a"}
        await j_db.close()
        again_db = await Database.open(tmp_path / "bot.db")  # opening a current file changes nothing
        again = Journal(again_db)
        assert await again.album_parts(1, "G") == {10: "a", 11: "a"}
        await again_db.close()

    run(go())
    assert sqlite3.connect(tmp_path / "bot.db").execute("PRAGMA user_version").fetchone()[0] == len(STEPS)
