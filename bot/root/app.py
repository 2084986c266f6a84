"""Application wiring, in one place: which handler answers which update.

Updates come through bot/updates/intake.py (from our polling loop or the webhook),
not PTB's Updater; bot/root/state.py opens what the handlers share, and
bot/root/life.py runs the whole lifetime.
"""
from __future__ import annotations

import asyncio
import logging
import os

from telegram import Update
from telegram.ext import (
    AIORateLimiter,
    Application,
    CallbackQueryHandler,
    CommandHandler,
    InlineQueryHandler,
    MessageHandler,
    TypeHandler,
    filters,
)

from telegram.error import InvalidToken, NetworkError, TelegramError

from storage.errors import AnimebotError
from bot.chat import admin, commands, inline, keyboards, photos, presses, privacy
from bot.service.config import Config, ConfigError
from bot.chat.context import CONTEXT_TYPES, on_message, on_press
from bot.chat.needs import Admin, Choices, Drawings, Privacy, Redrawings, Rights, Stats
from bot.root.life import run_service
from bot.styles import Styles
from inference.pipeline import ConvertSettings
from weights.store import ModelStore

log = logging.getLogger("animebot")

# The commands, by name; each handler reads its update through on_message (bot/chat/context.py), and is
# handed the group of what it needs (bot/chat/needs.py) named beside it.
COMMANDS = {"start": on_message(commands.start), "stats": on_message(commands.stats_command, Stats),
            "help": on_message(commands.help_command, Choices), "about": on_message(commands.about, Choices),
            "style": on_message(commands.style_command, Drawings), "lang": on_message(commands.lang_command),
            "settings": on_message(commands.settings_command, Rights),
            "privacy": on_message(privacy.privacy_command, Privacy),
            "forget": on_message(privacy.forget_command, Privacy),
            "block": on_message(admin.block_command, Admin), "unblock": on_message(admin.unblock_command, Admin),
            "blocked": on_message(admin.blocked_command, Admin)}
# The buttons, by the pattern of their callback data (bot/chat/keyboards.py); a press no pattern matches is
# told the button is not ours (presses.unknown_button, registered last).
PRESSES = [(keyboards.REDRAW, on_press(presses.redraw_button, Redrawings)),
           (keyboards.FULL_SIZE, on_press(presses.full_size_button, Redrawings)),
           (keyboards.CANCEL, on_press(presses.cancel_button, Drawings)),
           (keyboards.ALL_STYLES, on_press(presses.all_styles_button, Redrawings)),
           (keyboards.AVATAR, on_press(presses.avatar_button, Redrawings)),
           (keyboards.STICKER, on_press(presses.sticker_button, Redrawings)),
           (keyboards.CUTOUT, on_press(presses.cutout_button, Redrawings)),
           (keyboards.HD, on_press(presses.hd_button, Redrawings)),
           (keyboards.PREVIEW_MINE, on_press(presses.preview_button, Redrawings)),
           (keyboards.SET_STYLE, on_press(presses.style_button, Choices)),
           (keyboards.SET_LANG, on_press(presses.lang_button, Choices)),
           (keyboards.SET_OPTION, on_press(presses.option_button, Rights)),
           (keyboards.FORGET_ASK, on_press(privacy.settings_forget_button)),
           (keyboards.FORGET_YES, on_press(privacy.confirm_button, Privacy)),
           (keyboards.FORGET_NO, on_press(privacy.keep_button))]


def build_application(cfg: Config) -> tuple[Application, Styles]:
    """The bot and the styles it offers. Fails early, before any network, if no style is installed."""
    styles = offered_styles(cfg)
    _clip_durations_as_timedeltas()
    app = (
        Application.builder()
        .token(cfg.token.get_secret_value())
        .base_url(cfg.base_url)
        .base_file_url(cfg.base_file_url)
        .local_mode(cfg.api_local)  # a Bot API server of the operator's own (docs/operations.md)
        .context_types(CONTEXT_TYPES)
        .updater(None)  # updates come from bot/updates/polling.py or bot/updates/webhook.py
        .rate_limiter(AIORateLimiter(max_retries=3))  # short floods; bot/flow/retry.py waits out longer ones
        .build()
    )
    route(app)
    return app, styles


def offered_styles(cfg: Config) -> Styles:
    """The installed styles; fast mode's pairs must both be among them."""
    styles = Styles.from_store(ModelStore(cfg.home), cfg.default_style, ConvertSettings(max_side=cfg.max_side))
    for style, lite in cfg.fast_styles:
        if styles.resolve(style) != style or styles.resolve(lite) != lite:
            raise ConfigError(f"ANIMEBOT_FAST_MODE: {style} and {lite} must both be installed styles "
                              f"(installed: {', '.join(styles.names)}); make a lite one with animebot prune")
    return styles


def _clip_durations_as_timedeltas() -> None:
    """Clip durations as timedeltas, the type python-telegram-bot 23 makes the only one. It is a process-wide
    opt-in, read from the environment by the library; without it, 22.x warns at every clip (bot/chat/photos.py
    reads either type)."""
    os.environ.setdefault("PTB_TIMEDELTA", "true")


def route(app: Application) -> None:
    """Which handler answers which update. Every handler but the gate and the error handler reads its update
    through on_message or on_press (bot/chat/context.py), which narrow python-telegram-bot's optional fields
    once, here; the gate and the inline query take their groups from bot_data themselves."""
    private, groups = filters.ChatType.PRIVATE, filters.ChatType.GROUPS
    images = filters.PHOTO | filters.Document.ALL | filters.ANIMATION | filters.VIDEO | filters.VIDEO_NOTE
    app.add_handler(TypeHandler(Update, commands.gate), group=-1)  # blocks and the allowlist, before everything
    for name, command in COMMANDS.items():
        app.add_handler(CommandHandler(name, command))
    # /anime by its text, not only as a bot_command entity, with our own @name check
    app.add_handler(MessageHandler(filters.TEXT & filters.Regex(photos.ANIME_COMMAND),
                                   on_message(photos.anime, Drawings)))
    app.add_handler(MessageHandler(filters.TEXT & filters.Regex(photos.STICKER_COMMAND),
                                   on_message(photos.sticker, Drawings)))
    app.add_handler(MessageHandler(private & images, on_message(photos.private_media, Drawings)))
    app.add_handler(MessageHandler(groups & images, on_message(photos.group_media, Drawings)))
    for pattern, press in PRESSES:
        app.add_handler(CallbackQueryHandler(press, pattern=pattern))
    app.add_handler(CallbackQueryHandler(on_press(presses.unknown_button)))
    app.add_handler(InlineQueryHandler(inline.inline_query))  # @bot in any chat: the user's own results
    others = filters.Sticker.ALL | filters.VOICE | filters.AUDIO | filters.LOCATION | filters.CONTACT
    app.add_handler(MessageHandler(private & others, on_message(commands.text_hint)))
    app.add_handler(MessageHandler(private & filters.COMMAND, on_message(commands.unknown_command)))
    app.add_handler(MessageHandler(private & filters.TEXT, on_message(commands.text_hint)))
    app.add_error_handler(commands.on_error)


def run(cfg: Config) -> None:
    """Serve until SIGINT or SIGTERM; Telegram refusing the token or being unreachable is one line."""
    app, styles = build_application(cfg)
    try:
        asyncio.run(run_service(app, cfg, styles))
    except InvalidToken as exc:
        status = _status_without_json(exc)
        if status is not None:  # a 401 or 404, but not Telegram's: some other web server
            raise _not_a_bot_api(cfg, f" {status}") from None
        raise ConfigError("Telegram refused the token; check TELEGRAM_BOT_TOKEN") from None
    except NetworkError as exc:
        raise AnimebotError(f"cannot reach the Bot API at {cfg.base_url}: {exc.message}", code="network") from None
    except TelegramError:  # a success whose body python-telegram-bot could not read
        raise _not_a_bot_api(cfg, "") from None


def _status_without_json(exc: TelegramError) -> str | None:
    """The HTTP status (as "Not Found (404)") of an error answered without JSON; None for the Bot API's own.
    python-telegram-bot raises a failed read of the body as a bare TelegramError, the cause of the status's error."""
    error: BaseException = exc
    while error.__cause__ is not None:
        if type(error.__cause__) is TelegramError and isinstance(error, TelegramError):
            return error.message.split(". Parsing", 1)[0]
        error = error.__cause__
    return None


def _not_a_bot_api(cfg: Config, status: str) -> ConfigError:
    """A wrong TELEGRAM_API_BASE_URL reaches a web server that is not a Bot API: say so, not that the token was refused."""
    return ConfigError(f"{cfg.base_url} is not a Bot API: it answered{status} without the Bot API's JSON; "
                       "check TELEGRAM_API_BASE_URL")
