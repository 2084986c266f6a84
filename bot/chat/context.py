"""What every handler shares: the bot's state, and who the user is and how their chat draws.

Kept apart from the handlers so that commands (bot/chat/commands.py), photos
(bot/chat/photos.py) and button presses (bot/chat/presses.py) each depend on it and
not on each other.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from telegram import CallbackQuery, User
from telegram.constants import ChatMemberStatus
from telegram.error import TelegramError
from telegram.ext import CallbackContext, ContextTypes, ExtBot

from bot.flow.access import Access
from bot.updates.albums import AlbumCollector
from bot.chat.i18n import pick_lang
from bot.flow.runner import JobRunner
from bot.styles import Styles
from inference.pipeline import ConvertSettings
from storage.buttons import ResultButtons
from storage.cache import Cache

log = logging.getLogger("animebot.handlers")


@dataclass
class BotState:
    """What every handler needs, kept in ``application.bot_data`` (bot/service/state.py builds it)."""

    runner: JobRunner
    cache: Cache
    buttons: ResultButtons
    styles: Styles
    albums: AlbumCollector
    access: Access = field(default_factory=Access)
    pressing: set[tuple[int, str]] = field(default_factory=set)  # (chat, button) presses being answered


class SharedData:
    """``application.bot_data``: set once at start by bot/service/state.py, read by every handler."""

    state: BotState | None = None


# The context every handler gets; bot/app.py registers SharedData as bot_data's type.
Context = CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], SharedData]
CONTEXT_TYPES = ContextTypes(bot_data=SharedData)


def state(context: Context) -> BotState:
    st = context.bot_data.state
    if st is None:  # handlers only run once bot/service/state.py has set it
        raise RuntimeError("an update was handled before the bot's state was opened")
    return st


async def user_lang(st: BotState, user: User | None) -> str:
    if user is None:
        return "en"
    _, chosen = await st.cache.user_prefs(user.id)
    return pick_lang(chosen, user.language_code)


async def user_style(st: BotState, user: User | None) -> str:
    chosen = (await st.cache.user_prefs(user.id))[0] if user else None
    return st.styles.resolve(chosen) or st.styles.default


async def chat_settings(st: BotState, chat_id: int) -> ConvertSettings:
    """How photos are drawn in this chat (a private chat's id is its user's)."""
    return st.styles.settings_for(await st.cache.render_prefs(chat_id))


async def answer_quietly(query: CallbackQuery, text: str | None = None, alert: bool = False) -> None:
    """Stop the button's spinner. A query answered late (after a restart) is refused by
    Telegram; that must not stop the button from working."""
    with contextlib.suppress(TelegramError):
        await query.answer(text, show_alert=alert)


async def may_configure(st: BotState, context: Context, chat_id: int, user: User | None) -> bool:
    """Whether ``user`` may change this chat's settings: anyone in a private chat, a group's
    admins (Telegram's convention for group configuration) and the bot's admins."""
    if chat_id > 0 or user is None:
        return user is not None
    if st.access.is_admin(user.id):
        return True
    try:
        member = await context.bot.get_chat_member(chat_id, user.id)
    except TelegramError as exc:
        log.info("getChatMember in chat %s failed (%s); settings left as they are", chat_id, exc.message)
        return False
    return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)
