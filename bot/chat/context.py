"""What every handler shares: the bot's state, who the user is and how their chat draws, and
the routing that hands each handler its update with those already looked up.

Kept apart from the handlers so that commands (bot/chat/commands.py), photos
(bot/chat/photos.py) and button presses (bot/chat/presses.py) each depend on it and
not on each other.
"""
from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from telegram import CallbackQuery, Chat, Message, Update, User
from telegram.constants import ChatMemberStatus
from telegram.error import TelegramError
from telegram.ext import CallbackContext, ContextTypes, ExtBot

from bot.flow.access import Access
from bot.updates.albums import AlbumCollector
from bot.words.catalogue import pick_lang
from bot.chat.repeats import Presses
from bot.flow.forgetting import Forgetting
from bot.drawing.pool import Pool
from bot.flow.runner import JobRunner
from bot.styles import Styles
from inference.pipeline import ConvertSettings
from storage.buttons import ResultButtons
from storage.database import Database
from storage.journal import Journal
from storage.stores import Stores

log = logging.getLogger("animebot.handlers")


@dataclass
class BotState:
    """What every handler needs, kept in ``application.bot_data`` (bot/root/state.py builds it)."""

    runner: JobRunner  # requests in: a handler's only way to have anything drawn or answered
    journal: Journal  # updates and jobs (storage/journal.py): /status, /privacy, the page's job list
    pool: Pool  # the workers, for /status and health (bot/drawing/pool.py)
    db: Database  # the bot's SQLite file, which every store below works on (storage/database.py)
    stores: Stores  # results, holdings, uploads, users' settings, counters (storage/stores.py)
    buttons: ResultButtons[ConvertSettings]
    styles: Styles
    albums: AlbumCollector
    access: Access = field(default_factory=Access)
    presses: Presses = field(default_factory=Presses)  # button presses being answered, or just answered
    forgetting: Forgetting | None = None  # /forget (bot/flow/forgetting.py)
    keep_days: int = 30  # how long results and requests are kept (ANIMEBOT_KEEP_DAYS), for /privacy
    scaled_out: bool = False  # photos cross a broker (Redis), which /privacy says
    hd: bool = False  # HD is on (ANIMEBOT_HD) and its model installed: the HD button works


class SharedData:
    """``application.bot_data``: set once at start by bot/root/state.py, read by every handler."""

    state: BotState | None = None


# The context every handler gets; bot/root/app.py registers SharedData as bot_data's type.
Context = CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], SharedData]
CONTEXT_TYPES = ContextTypes(bot_data=SharedData)


def state(context: Context) -> BotState:
    st = context.bot_data.state
    if st is None:  # handlers only run once bot/root/state.py has set it
        raise RuntimeError("an update was handled before the bot's state was opened")
    return st


async def user_lang(st: BotState, user: User | None) -> str:
    if user is None:
        return "en"
    return pick_lang((await st.stores.users.prefs(user.id)).lang, user.language_code)


async def user_style(st: BotState, user: User | None) -> str:
    chosen = (await st.stores.users.prefs(user.id)).style if user else None
    return st.styles.resolve(chosen) or st.styles.default


async def chat_settings(st: BotState, chat_id: int) -> ConvertSettings:
    """How photos are drawn in this chat (a private chat's id is its user's)."""
    return st.styles.settings_for(await st.stores.users.render_prefs(chat_id))


async def answer_quietly(query: CallbackQuery, text: str | None = None, alert: bool = False) -> None:
    """Stop the button's spinner. A query answered late (after a restart) is refused by
    Telegram; that must not stop the button from working."""
    with contextlib.suppress(TelegramError):
        await query.answer(text, show_alert=alert)


async def may_configure(st: BotState, bot: ExtBot[None], chat_id: int, user: User) -> bool:
    """Whether ``user`` may change this chat's settings: anyone in a private chat, a group's
    admins (Telegram's convention for group configuration) and the bot's admins."""
    if chat_id > 0:
        return True
    if st.access.is_admin(user.id):
        return True
    try:
        member = await bot.get_chat_member(chat_id, user.id)
    except TelegramError as exc:
        log.info("getChatMember in chat %s failed (%s); settings left as they are", chat_id, exc.message)
        return False
    return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)


# --- routing ------------------------------------------------------------------------
#
# python-telegram-bot types every field of an Update as optional (effective_message,
# callback_query, effective_user...), since one Update carries one kind of payload.
# bot/root/app.py registers each handler for the updates that have what it reads, and wraps it
# in on_message or on_press, which check those fields once and hand the handler them as
# plain values, with the bot's state and the user's language already looked up (one read
# of the users table, made even for a group photo that proves not to be for us: cheap, and
# it gives every handler the same shape).

# What python-telegram-bot calls: bot/root/app.py registers these with its handlers.
Routed = Callable[[Update, Context], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class Incoming:
    """A message from someone, as a message handler reads it (bot/chat/commands.py, bot/chat/photos.py)."""

    update_id: int  # names the request (its job id) and the log lines
    message: Message
    chat: Chat
    user: User  # who sent it
    st: BotState
    lang: str  # the sender's language, for every reply
    bot: ExtBot[None]  # to ask Telegram: our @username, a chat's members


@dataclass(frozen=True)
class Pressed:
    """An inline button press, as a button handler reads it (bot/chat/presses.py)."""

    update_id: int
    query: CallbackQuery
    user: User  # who pressed (the query's sender), not who the menu was sent to
    st: BotState
    lang: str  # the presser's language, for every answer
    bot: ExtBot[None]
    match: re.Match[str] | None  # what the button's pattern in bot/root/app.py matched

    def groups(self, count: int) -> tuple[str, ...]:
        """What the button's pattern matched. A press with no data at all reaches every handler
        (python-telegram-bot lets it through any pattern): it matched nothing, and its groups are
        empty strings, which every handler refuses as expired."""
        return self.match.groups() if self.match is not None else ("",) * count


def on_message(handler: Callable[[Incoming], Awaitable[None]]) -> Routed:
    """``handler`` for a MessageHandler or CommandHandler. An update without a message, its chat
    and its sender is ignored; none comes: the bot asks Telegram for messages and presses only
    (bot/root/life.py), every message is in a chat, and only a channel's have no sender."""
    async def routed(update: Update, context: Context) -> None:
        message, chat, user = update.effective_message, update.effective_chat, update.effective_user
        if message is None or chat is None or user is None:
            return
        st = state(context)
        await handler(Incoming(update.update_id, message, chat, user, st, await user_lang(st, user), context.bot))
    return routed


def on_press(handler: Callable[[Pressed], Awaitable[None]]) -> Routed:
    """``handler`` for a CallbackQueryHandler, which passes only updates with a callback query."""
    async def routed(update: Update, context: Context) -> None:
        query = update.callback_query
        if query is None:
            return
        st = state(context)
        # A press without data matched no pattern: python-telegram-bot puts True where the match would be.
        found = context.matches[0] if context.matches else None
        match = found if isinstance(found, re.Match) else None
        await handler(Pressed(update.update_id, query, query.from_user, st, await user_lang(st, query.from_user),
                              context.bot, match))
    return routed
