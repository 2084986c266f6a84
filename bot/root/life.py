"""The bot's lifetime: start, recover, take updates, and stop gracefully.

Start: the workers load their models, jobs a crash or a stop left open run
again, unhandled updates are replayed, and only then do new updates come in
(by polling, or by webhook).

Stop (SIGTERM or SIGINT): no new updates are taken; photos already on a
worker get up to ``stop_wait_s`` to be drawn and sent; everything else stays
open in the journal for the next start. Then the process exits 0.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import time
from pathlib import Path
from urllib.parse import urlsplit

from telegram import Update
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import Application

from bot.service import metrics
from bot.service.config import Config
from bot.updates.intake import Intake
from bot.updates.polling import MAX_BACKOFF_S, poll
from bot.root.state import BotState, close_state, open_state
from bot.styles import Styles
from bot.updates.webhook import WebhookServer
from bot.webapp.api import WebApp
from bot.webapp.jobs import AppJobs
from bot.webapp.needs import PageNeeds
from bot.webapp.links import Links
from bot.webapp.photos import Originals
from inference.processes import running
from storage.database import Unwritable
from storage.retention import sweep

log = logging.getLogger("animebot")

ALLOWED_UPDATES = [Update.MESSAGE, Update.CALLBACK_QUERY, Update.INLINE_QUERY]
HEALTH_BEAT_S = 15.0
HEALTH_STALE_S = 90.0
PRUNE_EVERY_S = 3600.0


def heartbeat_path(home: Path) -> Path:
    return home / "heartbeat"


async def run_service(app: Application, cfg: Config, styles: Styles, stop: asyncio.Event | None = None) -> None:
    """Run the bot until SIGINT or SIGTERM: the whole lifetime, in order. A caller that runs it off
    the main thread, where no signal reaches it (the tests' in-process bot), passes ``stop``
    and sets it instead."""
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    if not await _initialize(app, stop):
        log.info("stopped before the Bot API answered")
        return
    try:
        st = await open_state(app, cfg, styles)  # cache, journal, workers (they load their models)
        try:
            await app.start()
            try:
                await _serve_updates(app, cfg, st, stop)
            finally:
                await app.stop()
        finally:
            await close_state(st)
            heartbeat_path(cfg.home).unlink(missing_ok=True)
    finally:
        await app.shutdown()
    log.info("stopped")


async def _initialize(app: Application, stop: asyncio.Event) -> bool:
    """Ask the Bot API who we are (getMe), backing off while it is unreachable; False if stopped first.
    A refused token is not something waiting fixes: InvalidToken goes up."""
    backoff = 1.0
    while not stop.is_set():
        try:
            await app.initialize()
            return True
        except InvalidToken:
            raise
        except NetworkError as exc:
            log.warning("the Bot API is unreachable (%s: %s); trying again in %.0f s",
                        exc.__class__.__name__, exc.message, backoff)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
    return False


async def _serve_updates(app: Application, cfg: Config, st: BotState, stop: asyncio.Event) -> None:
    """Recover, take updates until told to stop, then stop gracefully."""
    intake = Intake(app, st.journal)
    await st.forgetting.finish_pending()  # before any job resumes: a forgotten user's must not
    resumed = await st.runner.recover()
    replayed = await intake.replay()
    if resumed or replayed:
        log.info("recovered %d unanswered job(s) and %d unhandled update(s)", resumed, replayed)
    chores = asyncio.create_task(_chores(st, cfg.home, cfg.keep_days * 86400.0))
    server, poller = None, None
    desk = st.runner.onlooker
    assert isinstance(desk, AppJobs)  # bot/root/state.py makes the page's desk the runner's onlooker
    needs = PageNeeds(st.runner, st.journal, st.pool, st.stores, st.buttons, st.styles, st.access, st.hd, st.blocking)
    token = cfg.token.get_secret_value()
    webapp = WebApp(needs, desk, Originals(st.downloads, st.stores), token, Links(await st.journal.secret())) \
        if cfg.webapp_url else None
    try:
        metrics.watch(st.pool, st.db)
        if cfg.webhook_url:
            server = await _start_webhook(app, cfg, intake, st, webapp)
        else:
            if cfg.metrics_port:
                server = WebhookServer(intake, None, "", lambda: _health_report(st), cfg.webhook_listen,
                                       cfg.metrics_port, webapp.mount if webapp else None)
                await server.start()
            try:
                await app.bot.delete_webhook()
            except TelegramError as exc:
                log.info("deleteWebhook not done (%s); polling anyway", exc.__class__.__name__)
            offset = await st.journal.next_offset()
            poller = asyncio.create_task(poll(app, intake, offset, cfg.poll_timeout_s, ALLOWED_UPDATES))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([t for t in (poller, stopping) if t], return_when=asyncio.FIRST_COMPLETED)
        log.info("stopping: no new updates; up to %.0f s for the photos being drawn", cfg.stop_wait_s)
        if server is not None:
            server.stopping = True
        stopping.cancel()
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller  # re-raises InvalidToken, if that is why polling ended
        await st.runner.drain(cfg.stop_wait_s)
        await intake.cancel()
        if webapp is not None:
            await webapp.close()
    finally:
        chores.cancel()
        if server is not None:
            await server.stop()


async def _start_webhook(app: Application, cfg: Config, intake: Intake, st: BotState, webapp: WebApp | None
                         ) -> WebhookServer:
    """Listen, then tell Telegram where. A secret is made up when none is configured."""
    assert cfg.webhook_url  # only called in webhook mode
    secret = cfg.webhook_secret or secrets.token_urlsafe(32)
    path = urlsplit(cfg.webhook_url).path or "/"

    server = WebhookServer(intake, path, secret, lambda: _health_report(st), cfg.webhook_listen, cfg.webhook_port,
                           webapp.mount if webapp else None)
    await server.start()
    await app.bot.set_webhook(cfg.webhook_url, secret_token=secret, allowed_updates=ALLOWED_UPDATES)
    return server


def _health_report(st: BotState) -> dict[str, object]:
    """/healthz: ok while photos are drawn and recorded; ``database`` is "ok", or why it cannot be written."""
    pool = st.pool
    ok, workers = pool.healthy()
    refused = st.db.unwritable
    return {"ok": ok and refused is None, "workers": workers, "database": "ok" if refused is None else refused,
            "running": pool.running, "waiting": pool.waiting}


async def _chores(st: BotState, home: Path, keep_s: float) -> None:
    """Every few seconds, a heartbeat file for ``animebot health`` (while every worker is up and the
    database can be written), with our pid so that a killed bot is seen at once, a look at whether
    a database that refused a write takes one again, and /stats' counts written (storage/counters.py);
    every hour, forget old journal rows and delete what is older than ``ANIMEBOT_KEEP_DAYS``
    (storage/retention.py)."""
    beat = heartbeat_path(home)
    last_prune = 0.0
    while True:
        with contextlib.suppress(Unwritable):  # the database said why, once
            if st.db.unwritable is not None:
                await st.db.probe()
            if time.monotonic() - last_prune > PRUNE_EVERY_S:
                await _prune(st, keep_s)
                last_prune = time.monotonic()
            await st.stores.counters.flush()
        if st.pool.healthy()[0] and st.db.unwritable is None:
            try:
                beat.write_text(f"{time.time():.0f} {os.getpid()}\n")
            except OSError as exc:  # a full disk: `animebot health` sees the beat go stale
                log.warning("cannot write the heartbeat file %s (%s)", beat, exc.strerror)
        await asyncio.sleep(HEALTH_BEAT_S)


async def _prune(st: BotState, keep_s: float) -> None:
    await st.journal.prune()
    swept = await sweep(st.db, st.stores.results.results_dir, keep_s)
    if swept:
        log.info("retention: deleted %d result(s), %d photo record(s), %d request(s), %d update content(s)"
                 " and %d stray file(s) older than %.0f day(s)", swept.results, swept.photos, swept.requests,
                 swept.updates, swept.stray_files, keep_s / 86400)


def health(home: Path) -> tuple[bool, str]:
    """For Docker's HEALTHCHECK: is a bot in ``home`` running with all its workers, its database writable?"""
    beat = heartbeat_path(home)
    try:
        stamp, _, pid = beat.read_text().strip().partition(" ")
        age = time.time() - float(stamp)
    except (OSError, ValueError):
        return False, f"no heartbeat at {beat}: the bot is not running (or still loading its models)"
    if pid.isdigit() and not running(int(pid)):
        return False, f"the bot (pid {pid}) is not running: it was killed or crashed"
    if age > HEALTH_STALE_S:
        return False, (f"the last heartbeat is {age:.0f} s old: the bot is stuck, a worker is down, or its database "
                       "cannot be written (its log says which)")
    return True, f"ok (heartbeat {age:.0f} s ago)"
