"""The real bot served from this process: the Application, its handlers, the request flow,
SQLite and the worker processes, started as ``animebot run`` starts them, minus the bot
process of its own to import and wait for.

The service runs on an event loop in a thread of its own, and a test drives it over real HTTP
through the fake Bot API, exactly as it drives a bot process. What only a process shows (a
signal, kill -9, a restart, the Docker steps) stays with :func:`testkit.bot_harness.start_bot`.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from bot.root.app import build_application
from bot.service.config import Config, load_config
from bot.root.life import run_service
from bot.service.logs import LINE_FORMAT, RedactingFormatter, quiet_libraries
from testkit.bot_harness import READY_LINE, bot_environment, prepare_home, parse_worker_pids
from testkit.fake_telegram import TOKEN, FakeTelegram
from weights.provision import provision
from weights.store import ModelStore

# Which bot a line is logged for: each bot's thread sets it, and its tasks inherit it. Several
# bots can serve at once (a test's own bot beside its module's), each logging to its own file.
_serving: contextvars.ContextVar["InProcessBot | None"] = contextvars.ContextVar("serving", default=None)


class InProcessBot:
    """A bot serving from a thread of this process, logging to ``home/bot.log`` as a process would."""

    def __init__(self, fake: FakeTelegram, home: Path, cfg: Config) -> None:
        self.fake, self.home, self.log_path, self._cfg = fake, home, home / "bot.log", cfg
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="in-process-bot", daemon=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        """Still serving: nothing it was sent has brought it down."""
        return self._thread.is_alive()

    def worker_pids(self) -> dict[int, int]:
        return parse_worker_pids(self.log())

    def start(self) -> None:
        """Serve, and return once updates are taken (at the line a bot process logs then)."""
        before = len(self.log()) if self.log_path.is_file() else 0  # a restart in the same home: its own line
        self._thread.start()
        self.fake.wait_for(lambda: not self._thread.is_alive() or READY_LINE in self.log()[before:], timeout=600)
        if not self._thread.is_alive():
            raise RuntimeError(f"the bot stopped while starting ({self._failure!r}):\n{self.log()}")

    def stop(self, timeout: float = 60) -> int:
        """What SIGTERM does to a bot process: a graceful stop. 0 once it stopped cleanly."""
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the in-process bot did not stop within {timeout:.0f} s:\n{self.log()}")
        return 0 if self._failure is None else 1

    def _serve(self) -> None:
        _serving.set(self)

        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            app, styles = build_application(self._cfg)
            await run_service(app, self._cfg, styles, self._stop)

        try:
            asyncio.run(main())
        except BaseException as exc:  # stop() answers 1, and the log has the traceback
            self._failure = exc
            logging.getLogger("animebot").exception("the in-process bot failed")


@contextlib.contextmanager
def _bot_log(bot: InProcessBot) -> Iterator[None]:
    """``bot``'s lines into its log at the level `animebot run` logs them, through the formatter
    that keeps the token out (pytest leaves the root logger at WARNING). A line from a thread of
    no bot's (a worker pipe's) goes to every bot's log."""
    handler = logging.FileHandler(bot.log_path)
    handler.setFormatter(RedactingFormatter(LINE_FORMAT, [TOKEN]))
    handler.addFilter(lambda record: _serving.get() in (None, bot))
    root, ours = logging.getLogger(), logging.getLogger("animebot")
    level = ours.level
    root.addHandler(handler)
    ours.setLevel(logging.INFO)
    quiet_libraries()
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        ours.setLevel(level)


@contextlib.contextmanager
def bot_in_process(fake: FakeTelegram, home: Path, shared_home: Path, **env: str) -> Iterator[InProcessBot]:
    """The real bot on ``fake``, served from this process with ``env`` over the environment, until
    the block ends; then it must stop cleanly, with the token nowhere in its log."""
    prepare_home(home, shared_home)
    cfg = load_config(bot_environment(fake, home, env), dotenv=None)
    provision(ModelStore(cfg.home), cfg.weights, cfg.baked_models)
    bot = InProcessBot(fake, home, cfg)
    with _bot_log(bot):
        try:
            bot.start()
            yield bot
        finally:
            code = bot.stop()
        assert code == 0, bot.log()
        assert TOKEN not in bot.log()


@contextlib.contextmanager
def serving(home: Path, shared_home: Path, **env: str) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    """A fake Bot API with the real bot on it, served from this process: for a whole test module."""
    with FakeTelegram() as fake, bot_in_process(fake, home, shared_home, **env) as bot:
        yield bot, fake
