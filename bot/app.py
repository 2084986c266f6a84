"""Application wiring, in one place: handlers, start-up and shutdown.

Start-up order matters: the cache and the journal open and the workers load
their models before the first update is fetched, and shutdown stops the
workers only after the last update has been handled or put aside. Updates
come through bot/intake.py (from our polling loop or the webhook), not PTB's
Updater; bot/service.py runs the whole lifetime.
"""
from __future__ import annotations

import asyncio
import logging

from telegram import BotCommand, BotCommandScopeAllGroupChats, BotCommandScopeAllPrivateChats, Update
from telegram.ext import (
    AIORateLimiter,
    Application,
    CallbackQueryHandler,
    CommandHandler,
    MessageHandler,
    TypeHandler,
    filters,
)

from telegram.error import InvalidToken, NetworkError, TelegramError

from bot import handlers
from bot.access import Access, Limits
from bot.config import Config, ConfigError
from bot.jobs import JobRunner
from bot.pool import WorkerPool
from bot.service import serve
from bot.styles import Styles
from bot.worker_process import WorkerSpec
from inference.errors import AnimebotError
from inference.pipeline import ConvertSettings
from storage.cache import Cache
from storage.journal import Journal
from weights.store import ModelStore

log = logging.getLogger("animebot")

PRIVATE_COMMANDS = {
    "en": [("start", "what this bot does"), ("style", "choose your anime style"),
           ("settings", "faces, strength, keep colours"), ("lang", "language"),
           ("help", "how to use it"), ("about", "credits and model licences")],
    "zh": [("start", "这个机器人能做什么"), ("style", "选择动漫画风"), ("settings", "人脸、强度、保留颜色"),
           ("lang", "语言"), ("help", "使用方法"), ("about", "致谢与模型许可")],
}
GROUP_COMMANDS = {
    "en": [("anime", "reply to a photo to draw it as anime"), ("settings", "how this group's photos are drawn"),
           ("help", "how to use it")],
    "zh": [("anime", "回复一张照片，把它画成动漫"), ("settings", "本群照片的绘制设置"), ("help", "使用方法")],
}


def build_application(cfg: Config) -> Application:
    """The bot, ready for ``run_polling``. Fails early, before any network, if no style is installed."""
    settings = ConvertSettings(max_side=cfg.max_side)
    styles = Styles.from_store(ModelStore(cfg.home), cfg.default_style, settings)
    for style, lite in cfg.fast_styles:
        if styles.resolve(style) != style or styles.resolve(lite) != lite:
            raise ConfigError(f"ANIMEBOT_FAST_MODE: {style} and {lite} must both be installed styles "
                              f"(installed: {', '.join(styles.names)}); make a lite one with animebot prune")

    async def startup(app: Application) -> None:
        cache = await Cache.open(cfg.home / "bot.db", cfg.home / "results", cfg.cache_bytes)
        app.bot_data["cache"] = cache
        journal = await Journal.using(cache.db)
        pool = WorkerPool(WorkerSpec(cfg.home, cfg.backend, cfg.threads_per_worker, styles.default),
                          cfg.workers, cfg.queue_size, cfg.job_timeout_s)
        app.bot_data["pool"] = pool
        await pool.start()
        access = Access(cfg.admins, cfg.allowlist)
        limits = Limits(journal, access, cfg.rate_per_minute, cfg.daily_quota)
        runner = JobRunner(app.bot, pool, cache, journal, styles, cfg.per_user_jobs, limits, dict(cfg.fast_styles),
                           cfg.fast_queue)
        app.bot_data["animebot"] = handlers.BotState(runner, cache, styles, cfg.album_wait_s, access)
        await _register_commands(app)
        log.info("bot @%s ready: styles %s (default %s), %d worker(s) x %d thread(s), queue %d, max side %d",
                 app.bot.username, ",".join(styles.names), styles.default, cfg.workers, cfg.threads_per_worker,
                 cfg.queue_size, cfg.max_side)

    async def shutdown(app: Application) -> None:
        if pool := app.bot_data.get("pool"):
            await pool.close()
        if cache := app.bot_data.get("cache"):
            await cache.close()  # the journal's connection too

    app = (
        Application.builder()
        .token(cfg.token)
        .base_url(cfg.base_url)
        .base_file_url(cfg.base_file_url)
        .updater(None)  # updates come from bot/polling.py or bot/webhook.py
        .concurrent_updates(True)
        .rate_limiter(AIORateLimiter(max_retries=3))  # waits out RetryAfter (flood control) 3 times
        .post_init(startup)
        .post_shutdown(shutdown)
        .build()
    )
    private, groups = filters.ChatType.PRIVATE, filters.ChatType.GROUPS
    images = filters.PHOTO | filters.Document.ALL
    app.add_handler(TypeHandler(Update, handlers.gate), group=-1)  # the allowlist, before everything
    app.add_handler(CommandHandler("start", handlers.start))
    app.add_handler(CommandHandler("stats", handlers.stats_command))
    app.add_handler(CommandHandler("help", handlers.help_command))
    app.add_handler(CommandHandler("about", handlers.about))
    app.add_handler(CommandHandler("style", handlers.style_command))
    app.add_handler(CommandHandler("lang", handlers.lang_command))
    app.add_handler(CommandHandler("settings", handlers.settings_command))
    # /anime by its text, not only as a bot_command entity, with our own @name check
    app.add_handler(MessageHandler(filters.TEXT & filters.Regex(handlers.ANIME_COMMAND), handlers.anime))
    app.add_handler(MessageHandler(private & images, handlers.private_media))
    app.add_handler(MessageHandler(groups & images, handlers.group_media))
    app.add_handler(CallbackQueryHandler(handlers.button))
    others = filters.Sticker.ALL | filters.VIDEO | filters.ANIMATION | filters.VOICE | filters.AUDIO | \
        filters.VIDEO_NOTE | filters.LOCATION | filters.CONTACT
    app.add_handler(MessageHandler(private & others, handlers.text_hint))
    app.add_handler(MessageHandler(private & filters.COMMAND, handlers.unknown_command))
    app.add_handler(MessageHandler(private & filters.TEXT, handlers.text_hint))
    app.add_error_handler(handlers.on_error)
    return app


async def _register_commands(app: Application) -> None:
    """Menus for private chats and groups; English is the default, Chinese for zh clients.

    A menu is a convenience: if Telegram refuses it, the bot still serves.
    """
    try:
        for lang, code in (("en", None), ("zh", "zh")):
            await app.bot.set_my_commands([BotCommand(c, d) for c, d in PRIVATE_COMMANDS[lang]],
                                          scope=BotCommandScopeAllPrivateChats(), language_code=code)
            await app.bot.set_my_commands([BotCommand(c, d) for c, d in GROUP_COMMANDS[lang]],
                                          scope=BotCommandScopeAllGroupChats(), language_code=code)
    except TelegramError as exc:
        log.warning("could not register the command menus: %s: %s", exc.__class__.__name__, exc.message)


def run(cfg: Config) -> None:
    """Serve until SIGINT or SIGTERM; Telegram refusing the token or being unreachable is one line."""
    app = build_application(cfg)
    try:
        asyncio.run(serve(app, cfg))
    except InvalidToken:
        raise ConfigError("Telegram refused the token; check TELEGRAM_BOT_TOKEN") from None
    except NetworkError as exc:
        raise AnimebotError(f"cannot reach the Bot API at {cfg.base_url}: {exc.message}", code="network") from None
