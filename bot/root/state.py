"""What the bot opens at start, opened and closed in one place, and the handlers' parts made from it.

:func:`open_state` opens the cache and the journal, starts the workers (they
load their models), wires the runner and hands the chat's handlers their groups
(bot/chat/needs.py); :func:`close_state` stops them. bot/root/life.py calls
these in order, so the workers are ready before the first update is fetched and
stop only after the last one was handled or put aside.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from telegram import MenuButtonDefault, MenuButtonWebApp, WebAppInfo
from telegram.error import TelegramError
from telegram.ext import Application

from bot.flow.access import Access, Limits
from bot.updates.albums import AlbumCollector
from bot.chat.needs import Admin, Choices, Drawings, Gallery, Privacy, Redrawings, Rights, Stats
from bot.chat.repeats import Presses
from bot.words.catalogue import t
from bot.root.profile import publish_profile
from bot.service.config import Config
from inference.clip_settings import ClipLimits
from bot.flow.admission import FlowSettings
from bot.flow.answering import Way
from bot.flow.equipment import Equipment
from bot.flow.fetching import Downloads
from bot.flow.blocking import Blocking
from bot.flow.forgetting import Forgetting
from bot.flow.runner import JobRunner
from bot.chat.photos import on_album
from bot.drawing.local.pool import LocalPool
from bot.drawing.pool import Pool
from bot.chat.answers import ChatWay
from bot.chat.replies import Offers, Replies
from bot.chat.stickers import Stickers
from bot.styles import Styles
from bot.webapp.answers import PageWay
from bot.webapp.jobs import AppJobs
from inference.drawer import DrawerSpec
from inference.pipeline import ConvertSettings
from storage.buttons import ResultButtons
from storage.database import Database, Unwritable
from storage.erasure import Erasures
from storage.journal import Journal
from storage.stickers import StickerBook
from storage.stores import Stores

log = logging.getLogger("animebot")


@dataclass(frozen=True)
class BotState:
    """Everything opened at start: what bot/root/life.py recovers, serves, watches and closes with, and what
    the rooms' own parts are made from (the chat's groups below, the Mini App's PageNeeds); no room sees it."""

    runner: JobRunner  # requests in: the only way to have anything drawn or answered
    journal: Journal  # updates and jobs (storage/journal.py)
    pool: Pool  # the workers (bot/drawing/pool.py)
    db: Database  # the bot's SQLite file, which every store below works on (storage/database.py)
    stores: Stores  # results, holdings, uploads, users' settings, counters (storage/stores.py)
    buttons: ResultButtons[ConvertSettings]
    styles: Styles
    access: Access
    forgetting: Forgetting  # /forget (bot/flow/forgetting.py), finished at start when a stop cut one short
    blocking: Blocking  # /block and /unblock, the chat's and the Mini App's admin view's (bot/flow/blocking.py)
    hd: bool  # HD is on (ANIMEBOT_HD) and its model installed
    downloads: Downloads  # users' files from Telegram, within ANIMEBOT_MAX_FILE_MB (the Mini App's too)


async def open_state(app: Application, cfg: Config, styles: Styles) -> BotState:
    """Open the database, start the workers (they load their models), wire the runner, and put the chat's
    groups in bot_data."""
    db = await Database.open(cfg.home / "bot.db")
    try:
        stores = Stores.on(db, cfg.home / "results", cfg.cache_bytes)
        journal = Journal(db)
        await stores.blocked.load()  # before any update: who is refused (bot/flow/access.py)
        pool = _pool(cfg, styles, await journal.secret())
        await pool.start()
    except BaseException:
        await db.close()
        raise
    access = Access(cfg.admins, cfg.allowlist, stores.blocked)
    limits = Limits(journal, access, cfg.rate_per_minute, cfg.daily_quota)
    buttons = ResultButtons(db, ConvertSettings)
    settings = FlowSettings(cfg.per_user_limit, limits, dict(cfg.fast_styles), cfg.fast_queue,
                            ClipLimits(float(cfg.video_max_s), max_side=cfg.video_max_side))
    stickers = Stickers(app.bot, StickerBook(db), journal.secret)
    hd = cfg.hd and styles.upscaler is not None
    replies = Replies(app.bot, stores, buttons, styles, stickers, Offers(cfg.video_max_s, cfg.webapp_url, hd,
                                                                          cfg.upload_bytes))
    desk = AppJobs(buttons)  # what the Mini App's page is told about the jobs it started
    ways: dict[str, Way] = {"chat": ChatWay(app.bot, replies, journal), "app": PageWay(desk)}  # by Request.answer
    downloads = Downloads(app.bot, cfg.download_bytes)
    runner = JobRunner(Equipment(app.bot, pool, stores, journal, styles, downloads), ways, desk, settings)
    forgetting = Forgetting(app.bot, runner, Erasures(db, stores.results.results_dir), limits)
    st = BotState(runner, journal, pool, db, stores, buttons, styles, access, forgetting,
                  Blocking(runner, access, stores.blocked), hd, downloads)
    app.bot_data.put(*_chat_needs(st, cfg))
    await publish_profile(app.bot, cfg.admins)
    await _menu_button(app, cfg.webapp_url)
    log.info("bot @%s ready: styles %s (default %s), %s, queue %d (%d a person), max side %d",
             app.bot.username, ",".join(styles.names), styles.default, pool.healthy()[1], cfg.queue_size,
             cfg.per_user_limit, cfg.max_side)
    return st


def _pool(cfg: Config, styles: Styles, secret: bytes) -> Pool:
    """The bot's own worker processes, or `animebot worker` processes via Celery when a broker is set."""
    if cfg.broker_url:
        from bot.drawing.celery.pool import CeleryPool  # Celery is only imported by bots that use it

        return CeleryPool(cfg.broker_url, cfg.queue_size, cfg.job_timeout_s, secret)
    return LocalPool(DrawerSpec(cfg.home, cfg.backend, cfg.threads_per_worker, styles.default),
                     cfg.workers, cfg.queue_size, cfg.job_timeout_s)


def _chat_needs(st: BotState, cfg: Config) -> tuple[object, ...]:
    """The chat's groups (bot/chat/needs.py), each with only what its handlers use; bot/root/app.py names
    which handler gets which."""
    choices = Choices(st.stores.users, st.styles)
    drawings = Drawings(st.runner, choices, AlbumCollector(cfg.album_wait_s, lambda m: on_album(drawings, m)))
    return (choices, drawings, Rights(choices, st.access), Gallery(choices, st.stores.holdings),
            Redrawings(st.runner, choices, st.buttons, st.stores.uploads, st.stores.holdings, Presses(), st.hd),
            Privacy(st.access, st.forgetting, cfg.keep_days, bool(cfg.broker_url)),
            Stats(st.access, st.journal, st.pool, st.stores.counters),
            Admin(st.access, st.blocking))


async def close_state(st: BotState) -> None:
    """Stop the workers, then write /stats' counts held in memory (storage/counters.py) and close the database."""
    await st.pool.close()
    try:
        with contextlib.suppress(Unwritable):  # the database said why, once; a file that refuses them loses them
            await st.stores.counters.flush()
    finally:
        await st.db.close()




async def _menu_button(app: Application, webapp_url: str | None) -> None:
    """The button beside the message field in private chats: the Mini App when there is one, else Telegram's
    default (the command list), so that a Mini App switched off leaves no button to a page that is gone."""
    button = MenuButtonWebApp(t("en", "webapp_menu"), WebAppInfo(webapp_url)) if webapp_url else MenuButtonDefault()
    try:
        await app.bot.set_chat_menu_button(menu_button=button)
    except TelegramError as exc:
        log.warning("could not set the menu button: %s: %s", exc.__class__.__name__, exc.message)
