"""The journal on a real SQLite file: updates once, jobs until answered, limits counted from jobs."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bot.access import Access, Limits
from bot.jobs import Request, Source, request_from_json, request_to_json
from inference.pipeline import ConvertSettings
from storage.journal import Journal


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_updates_are_stored_once_and_replayed_until_handled(tmp_path: Path) -> None:
    async def go() -> None:
        j = await Journal.open(tmp_path / "bot.db")
        assert await j.next_offset() == 0
        assert await j.add_updates([(5, "{}"), (6, "{}")]) == [5, 6]
        assert await j.add_updates([(6, "{}"), (7, "{}")]) == [7]  # Telegram sent 6 again
        await j.update_handled(5)
        assert [uid for uid, _ in await j.unhandled_updates()] == [6, 7]
        assert await j.next_offset() == 8
        await j.close()
        j = await Journal.open(tmp_path / "bot.db")  # a restart
        assert [uid for uid, _ in await j.unhandled_updates()] == [6, 7]
        await j.update_handled(6)
        await j.update_handled(7)
        await j.prune()
        assert await j.next_offset() == 8  # the newest row is kept for the offset
        await j.close()

    run(go())


def test_open_jobs_count_attempts_and_answered_ones_never_come_back(tmp_path: Path) -> None:
    async def go() -> None:
        j = await Journal.open(tmp_path / "bot.db")
        assert await j.create_job("a", 1, 1, 1, "{}")
        assert not await j.create_job("a", 1, 1, 1, "{}")  # a replayed update
        assert await j.create_job("b", 1, 1, 2, "{}")
        await j.finish_job("b", "done")
        rows = await j.open_jobs()
        assert [(r.job_id, r.attempts) for r in rows] == [("a", 1)]
        await j.job_running("a")
        assert await j.job_state("a") == "running"
        assert [(r.job_id, r.attempts) for r in await j.open_jobs()] == [("a", 2)]
        await j.close()

    run(go())


def test_a_request_survives_the_journal_unchanged() -> None:
    req = Request("42", -100, 7, 3, "zh", "hayao", (Source("F1", "U1", 1234), Source("F2", sha256="ab" * 32)),
                  ConvertSettings(max_side=512, faces=False, strength=75, keep_colours=True), as_document=True)
    assert request_from_json(request_to_json(req)) == req


def test_rate_limit_and_quota_count_from_jobs_and_spare_admins(tmp_path: Path) -> None:
    async def go() -> None:
        j = await Journal.open(tmp_path / "bot.db")
        limits = Limits(j, Access(admins=frozenset({9})), per_minute=3, per_day=5)
        now = time.time()
        assert await limits.refusal(1, 1, now) is None
        await j.create_job("1", 1, 1, 3, "{}")  # an album of 3, just now
        refusal = await limits.refusal(1, 1, now)
        assert refusal is not None and refusal.code == "rate_limited"
        await j.create_job("r", 1, 1, 1, "{}", state="refused", outcome="rate_limited")
        assert (await limits.refusal(1, 1, now)).code == "rate_limited"  # refusals don't extend it
        assert await limits.refusal(1, 1, now + 61) is None
        await j.create_job("b", 1, 1, 5, "{}", state="failed", outcome="busy")  # the bot's fault, not counted
        assert await limits.refusal(1, 1, now + 61) is None
        await j.create_job("2", 1, 1, 2, "{}")
        assert (await limits.refusal(1, 1, now)).code == "rate_limited"
        quota = await limits.refusal(1, 1, now + 61)
        assert quota is not None and quota.code == "quota_reached"  # 3 + 2 of 5 today
        assert await limits.refusal(9, 100, now) is None  # an admin
        assert await limits.refusal(2, 1, now) is None  # someone else
        await j.close()

    run(go())


def test_the_allowlist_admits_listed_users_groups_and_admins() -> None:
    open_bot = Access()
    assert open_bot.allows(1, 1)
    private = Access(admins=frozenset({9}), allowlist=frozenset({1, -100}))
    assert private.allows(1, 1) and private.allows(9, 9) and private.allows(2, -100)
    assert not private.allows(2, 2) and not private.allows(None, None)
