"""What every handler shares: how its update reaches it, with who sent it, in which language, and its
needs (bot/chat/needs.py) already looked up.

Kept apart from the handlers so that commands (bot/chat/commands.py), photos
(bot/chat/photos.py) and button presses (bot/chat/presses.py) each depend on it and
not on each other.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from telegram import CallbackQuery, Chat, Message, Update, User
from telegram.error import TelegramError
from telegram.ext import CallbackContext, ContextTypes, ExtBot

from bot.chat.needs import Choices

N = TypeVar("N")


class SharedData:
    """``application.bot_data``: the chat's groups (bot/chat/needs.py), each under its own type, put there
    once at start by bot/root/state.py; a handler is handed only its own."""

    def __init__(self) -> None:
        self._groups: dict[type, object] = {}

    def put(self, *groups: object) -> None:
        for group in groups:
            self._groups[type(group)] = group

    def get(self, kind: type[N]) -> N:
        group = self._groups.get(kind)
        if not isinstance(group, kind):  # handlers only run once bot/root/state.py has put them
            raise RuntimeError(f"an update was handled before the chat's {kind.__name__} was opened")
        return group


# The context every handler gets; bot/root/app.py registers SharedData as bot_data's type.
Context = CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], SharedData]
CONTEXT_TYPES = ContextTypes(bot_data=SharedData)


async def answer_quietly(query: CallbackQuery, text: str | None = None, alert: bool = False) -> None:
    """Stop the button's spinner. A query answered late (after a restart) is refused by
    Telegram; that must not stop the button from working."""
    with contextlib.suppress(TelegramError):
        await query.answer(text, show_alert=alert)


# --- routing ------------------------------------------------------------------------
#
# python-telegram-bot types every field of an Update as optional (effective_message,
# callback_query, effective_user...), since one Update carries one kind of payload.
# bot/root/app.py registers each handler for the updates that have what it reads, and wraps it
# in on_message or on_press, which check those fields once and hand the handler them as
# plain values, with the user's language already looked up (one read of the users table, made
# even for a group photo that proves not to be for us: cheap, and it gives every handler the
# same shape), and, after them, the group of bot/chat/needs.py the handler names, if any.

# What python-telegram-bot calls: bot/root/app.py registers these with its handlers.
Routed = Callable[[Update, Context], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class Incoming:
    """A message from someone, as a message handler reads it (bot/chat/commands.py, bot/chat/photos.py)."""

    update_id: int  # names the request (its job id) and the log lines
    message: Message
    chat: Chat
    user: User  # who sent it
    lang: str  # the sender's language, for every reply
    bot: ExtBot[None]  # to ask Telegram: our @username, a chat's members


@dataclass(frozen=True)
class Pressed:
    """An inline button press, as a button handler reads it (bot/chat/presses.py)."""

    update_id: int
    query: CallbackQuery
    user: User  # who pressed (the query's sender), not who the menu was sent to
    lang: str  # the presser's language, for every answer
    bot: ExtBot[None]
    match: re.Match[str] | None  # what the button's pattern in bot/root/app.py matched

    def groups(self, count: int) -> tuple[str, ...]:
        """What the button's pattern matched. A press with no data at all reaches every handler
        (python-telegram-bot lets it through any pattern): it matched nothing, and its groups are
        empty strings, which every handler refuses as expired."""
        return self.match.groups() if self.match is not None else ("",) * count


def _needs(context: Context, needs: type[object] | None) -> tuple[object, ...]:
    """What a handler is handed after its update: its group, or nothing for one that needs none."""
    return () if needs is None else (context.bot_data.get(needs),)


@overload
def on_message(handler: Callable[[Incoming], Awaitable[None]]) -> Routed: ...
@overload
def on_message(handler: Callable[[Incoming, N], Awaitable[None]], needs: type[N]) -> Routed: ...
def on_message(handler: Callable[..., Awaitable[None]], needs: type[object] | None = None) -> Routed:
    """``handler`` for a MessageHandler or CommandHandler, handed ``needs`` too where it names a group. An
    update without a message, its chat and its sender is ignored; none comes: the bot asks Telegram for
    messages and presses only (bot/root/life.py), every message is in a chat, and only a channel's have no
    sender."""
    async def routed(update: Update, context: Context) -> None:
        message, chat, user = update.effective_message, update.effective_chat, update.effective_user
        if message is None or chat is None or user is None:
            return
        lang = await context.bot_data.get(Choices).lang(user)
        await handler(Incoming(update.update_id, message, chat, user, lang, context.bot), *_needs(context, needs))
    return routed


@overload
def on_press(handler: Callable[[Pressed], Awaitable[None]]) -> Routed: ...
@overload
def on_press(handler: Callable[[Pressed, N], Awaitable[None]], needs: type[N]) -> Routed: ...
def on_press(handler: Callable[..., Awaitable[None]], needs: type[object] | None = None) -> Routed:
    """``handler`` for a CallbackQueryHandler, which passes only updates with a callback query; handed
    ``needs`` too where it names a group."""
    async def routed(update: Update, context: Context) -> None:
        query = update.callback_query
        if query is None:
            return
        lang = await context.bot_data.get(Choices).lang(query.from_user)
        # A press without data matched no pattern: python-telegram-bot puts True where the match would be.
        found = context.matches[0] if context.matches else None
        match = found if isinstance(found, re.Match) else None
        await handler(Pressed(update.update_id, query, query.from_user, lang, context.bot, match),
                      *_needs(context, needs))
    return routed
