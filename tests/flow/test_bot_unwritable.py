"""A database that cannot be written is never silent, and loses no photo.

Another program holds the SQLite file's write lock (an operator's ``sqlite3 bot.db`` left inside a
transaction, a backup tool): every write of the bot's waits its 30 s, then fails. The real bot must then
say so on /healthz, /livez and /metrics and in one log line, leave the photo sent meanwhile with Telegram
(its offset unconfirmed), and answer it once the file takes writes again.
"""
from __future__ import annotations

import contextlib
import json
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from testkit.bot_harness import private_chat, start_bot
from testkit.fake_telegram import FakeTelegram
from testkit.journal import journal_rows, settled
from testkit.pictures import synthetic_photo
from testkit.redis_server import free_port
from testkit.replies import final_answer
from weights.store import ModelStore


def get(port: int, path: str) -> tuple[int, Any]:
    """Status and body (JSON where it is) of a GET on the bot's health and metrics server."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as response:
            status, body = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read().decode()
    return status, json.loads(body) if path != "/metrics" else body


def metric(port: int, name: str) -> float:
    page = get(port, "/metrics")[1]
    return float(next(line.split()[-1] for line in page.splitlines() if line.startswith(name + " ")))


def test_a_locked_journal_turns_health_red_says_why_once_and_its_photo_is_answered_once_free(
        tiny_store: ModelStore, tmp_path: Path) -> None:
    port = free_port()
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", tiny_store.home, ANIMEBOT_METRICS_PORT=str(port))
        try:
            warm = fake.photo_message(*private_chat(7100), synthetic_photo(seed=1))
            assert final_answer(fake, warm) == "photo"
            fake.wait_for(lambda: settled(bot.home, fake), 60, "the first photo recorded as answered")
            assert get(port, "/healthz")[0] == 200 and get(port, "/livez")[0] == 200
            assert metric(port, "animebot_database_writable") == 1.0
            with contextlib.closing(sqlite3.connect(bot.home / "bot.db", isolation_level=None)) as other:
                other.execute("BEGIN IMMEDIATE")  # the file's write lock, held by another program
                msg = fake.photo_message(*private_chat(7101), synthetic_photo(seed=2))
                status, health = fake.wait_for(lambda: (lambda s: s if s[0] == 503 else None)(get(port, "/healthz")),
                                               180, "/healthz to say the database cannot be written")
                assert health["ok"] is False and "locked" in health["database"], health
                assert health["workers"] == "1 of 1 worker process(es) up"  # the workers are fine
                assert get(port, "/livez") == (503, {"ok": False, "database": health["database"]})
                assert metric(port, "animebot_database_writable") == 0.0
                assert metric(port, "animebot_database_write_failures_total") >= 1
                assert metric(port, "animebot_healthy") == 0.0
                assert not fake.replies_to(msg)  # not taken on: Telegram still has it
                assert journal_rows(bot.home, "SELECT COUNT(*) FROM jobs WHERE chat_id = 7101") == [(0,)]
                other.execute("ROLLBACK")
            assert final_answer(fake, msg) == "photo"
            fake.wait_for(lambda: get(port, "/healthz")[0] == 200, 120, "/healthz to be ok again")
            assert get(port, "/livez")[0] == 200 and metric(port, "animebot_database_writable") == 1.0
            assert [c.method for c in fake.replies_to(msg) if c.method != "sendMessage"] == ["sendPhoto"]
            fake.wait_for(lambda: settled(bot.home, fake), 60, "the second photo recorded as answered")
        finally:
            assert bot.stop() == 0, bot.log()
    log = bot.log()
    assert log.count("the database cannot be written") == 1, log
    assert log.count("the database can be written again") == 1, log
    assert "Traceback" not in log and "failed unexpectedly" not in log, log
