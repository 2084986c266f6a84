"""The bot under trouble from outside: long flood control, a stop signal to its whole
process group, a Bot API that is down when it starts, and a kill -9.

Each test starts its own real bot process (real model, real worker processes)
against the fake Bot API, because each ends or disturbs it.
"""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.bot_harness import REPO, private_chat, start_bot
from testkit.replies import final_answer
from testkit.fake_telegram import DROP, FakeTelegram, flood
from weights.store import ModelStore


def job_states(home: Path) -> list[str]:
    with sqlite3.connect(home / "bot.db") as db:
        return [row[0] for row in db.execute("SELECT state FROM jobs")]


@pytest.mark.parametrize("method", ["sendPhoto", "getFile"])
def test_flood_control_however_long_is_waited_out(real_store: ModelStore, photos: list[Path], tmp_path: Path,
                                                  method: str) -> None:
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home, ANIMEBOT_MAX_SIDE="256")
        try:
            fake.inject(method, *[flood(1)] * 5)  # more than the rate limiter's own 3 retries
            chat, user = private_chat(4001)
            msg = fake.photo_message(chat, user, photos[0].read_bytes())
            assert final_answer(fake, msg, timeout=120) == "photo"
            assert len(fake.calls_to("sendPhoto", chat["id"])) == 1
        finally:
            assert bot.stop() == 0
    log = bot.log()
    waits = [line for line in log.splitlines() if "flood control" in line]
    assert waits and all(" WARNING " in line and "job " in line for line in waits)
    assert "Traceback" not in log and " ERROR " not in log


def test_sigterm_to_the_whole_process_group_still_delivers_the_photo_being_drawn(
        real_store: ModelStore, photos: list[Path], tmp_path: Path) -> None:
    """systemd's KillMode=control-group, `kill -TERM -PGID` and `timeout` signal every process at once.

    The stop's wait is set far beyond any drawing, so a slow machine (CI runs four test processes
    on two cores) cannot turn "delivered before exit" into "journalled for the next start"; the
    bot exits as soon as the photo is sent, so the long wait costs nothing.
    """
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home, ANIMEBOT_STOP_WAIT="900")
        chat, user = private_chat(4011)
        biggest = max(photos, key=lambda p: p.stat().st_size)
        msg = fake.photo_message(chat, user, biggest.read_bytes())
        fake.wait_for(lambda: "running" in job_states(bot.home), 120)
        os.killpg(bot.process.pid, signal.SIGTERM)
        assert bot.process.wait(900) == 0, bot.log()
        assert [c.method for c in fake.replies_to(msg) if c.method == "sendPhoto"] == ["sendPhoto"]
    log = bot.log()
    assert "replaced" not in log and "died" not in log and "Traceback" not in log, log
    assert job_states(bot.home) == ["done"]


def test_a_bot_api_that_is_down_at_start_is_waited_for(real_store: ModelStore, photos: list[Path],
                                                       tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        fake.inject("getMe", DROP, DROP, DROP)
        bot = start_bot(fake, tmp_path / "bot", real_store.home, ANIMEBOT_MAX_SIDE="256")
        try:
            chat, user = private_chat(4021)
            assert final_answer(fake, fake.photo_message(chat, user, photos[0].read_bytes())) == "photo"
        finally:
            assert bot.stop() == 0
    unreachable = [line for line in bot.log().splitlines() if "Bot API is unreachable" in line]
    assert len(unreachable) == 3 and "Traceback" not in bot.log()


def test_after_a_kill_9_the_workers_die_too_and_health_says_so_at_once(real_store: ModelStore,
                                                                       tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home, ANIMEBOT_MAX_SIDE="256")
        env = {**os.environ, "PYTHONPATH": str(REPO), "ANIMEBOT_HOME": str(bot.home)}
        health = [sys.executable, "-m", "bot", "health"]
        fake.wait_for(lambda: (bot.home / "heartbeat").exists(), 60)
        assert subprocess.run(health, env=env, capture_output=True, timeout=60).returncode == 0
        workers = list(bot.worker_pids().values())
        os.kill(bot.process.pid, signal.SIGKILL)  # the bot alone, as the OOM killer does
        bot.process.wait()
        fake.wait_for(lambda: not any(_alive(pid) for pid in workers), 30)
        done = subprocess.run(health, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and "not running" in done.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead, only not yet reaped
        return stat.read().split(")")[-1].split()[0] != "Z"
