"""Start the real ``animebot run`` process against the fake Bot API, and play users.

A process is for what only a process shows: signals, kill -9, restarts. A test module that
just talks to the bot uses :func:`testkit.bot_in_process.serving` instead.

Each bot gets its own data dir (its own SQLite file and result cache) but
shares installed models and the TorchScript export with the others through
symlinks, so only the first start in a session pays for the export.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.fake_telegram import TOKEN, FakeTelegram
from testkit.releases import command
from testkit.wait import wait_for

REPO = Path(__file__).resolve().parents[1]


READY_LINE = "ready: styles"  # logged once updates are about to be taken


def prepare_home(home: Path, shared_home: Path) -> None:
    """Make ``home``, with the installed models and exports shared by every bot of the session."""
    home.mkdir(parents=True, exist_ok=True)
    for name in ("models", "cache"):
        (shared_home / name).mkdir(parents=True, exist_ok=True)
        if not (home / name).exists():
            (home / name).symlink_to(shared_home / name)


def bot_environment(fake: FakeTelegram, home: Path, env: Mapping[str, str]) -> dict[str, str]:
    """What a bot in ``home`` on ``fake`` is configured by: this process's environment, then
    ours, then ``env``."""
    return {**os.environ, "TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_API_BASE_URL": fake.base_url,
            "TELEGRAM_API_FILE_URL": fake.file_url, "ANIMEBOT_HOME": str(home), **env}


def parse_worker_pids(log: str) -> dict[int, int]:
    """The current pid of each worker slot, as the bot logged them."""
    pids: dict[int, int] = {}
    for slot, pid in re.findall(r"worker (\d+) (?:ready \(pid|replaced after it \w+ \(new pid) (\d+)", log):
        pids[int(slot)] = int(pid)
    return pids


def private_chat(uid: int, lang: str = "en") -> tuple[dict[str, Any], dict[str, Any]]:
    """(chat, user) of a private conversation with user ``uid``."""
    user = {"id": uid, "is_bot": False, "first_name": f"User{uid}", "language_code": lang}
    return {"id": uid, "type": "private", "first_name": user["first_name"]}, user


def group_chat(gid: int) -> dict[str, Any]:
    return {"id": -gid, "type": "supergroup", "title": f"Group {gid}"}


def pick_style(fake: FakeTelegram, chat: dict[str, Any], user: dict[str, Any], name: str, shown: str) -> None:
    """The user picks style ``name`` in /style, as a person would, and waits for the bot's "Style set
    to ``shown``": a test whose bot draws a quick style by default picks a slow one for its user."""
    before = len(fake.messages_to(chat["id"]))
    fake.text_message(chat, user, "/style")
    menu = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"])[before:] if "reply_markup" in c.params], 60)[0]
    fake.press(user, menu.result, f"s:{name}:{user['id']}")
    fake.wait_for(lambda: [c for c in fake.calls_to("editMessageText", chat["id"])
                           if str(c.params.get("text", "")).startswith(f"Style set to {shown}")], 60)


@dataclass
class RunningProcess:
    """A process of ours started in a session of its own, with its output in a log file."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill9(self) -> None:
        """A crash: SIGKILL to the process and its children at once, as when a container dies."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, as ``docker stop`` sends it; SIGKILL (and an error) if it does not exit in ``timeout``."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise

    def wait_until_serving(self, url: str, expected: str, timeout: float) -> None:
        """Wait until ``GET url`` answers ``expected``. Raise with the log if the process exits first, and
        kill it if it never answers."""
        def answers() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.log_path.stem} exited with {self.process.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(url, timeout=5) as reply:
                    return bool(reply.read().decode(errors="replace").strip() == expected)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False
        try:
            wait_for(answers, timeout, f"answer {expected!r} from {url}", context=self.log, interval=0.2)
        except BaseException:
            self.kill9()
            raise


@dataclass
class RunningBot(RunningProcess):
    fake: FakeTelegram
    home: Path

    def worker_pids(self) -> dict[int, int]:
        return parse_worker_pids(self.log())


def start_bot(fake: FakeTelegram, home: Path, shared_home: Path, *args: str, code: Path = REPO, **env: str) -> RunningBot:
    """``animebot run ARGS`` in ``home`` (cwd too, so no developer .env is read), ready for updates;
    ``code``: what it runs, this tree, or an earlier release's tree or virtualenv (testkit/releases.py)."""
    prepare_home(home, shared_home)
    argv, full_env = command(code, "run", bot_environment(fake, home, env))
    log_path = home / "bot.log"
    before = log_path.stat().st_size if log_path.exists() else 0
    with log_path.open("ab") as log:  # a restarted bot appends
        process = subprocess.Popen([*argv, *args], cwd=home, env=full_env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    bot = RunningBot(process, log_path, fake, home)
    try:
        fake.wait_for(lambda: process.poll() is not None or READY_LINE.encode() in log_path.read_bytes()[before:],
                      timeout=600)
        if process.poll() is not None:
            raise RuntimeError(f"the bot exited with {process.returncode}:\n{bot.log()}")
    except BaseException:
        bot.stop()
        raise
    return bot
