"""What the chat's handlers need, in small groups by what they are for, so that each handler's signature
says what it may touch and none reaches for the rest of the bot.

The composition root (bot/root/state.py) builds these from what it opened and puts them in
``application.bot_data`` (bot/chat/context.py's :class:`~bot.chat.context.SharedData`); bot/root/app.py
names each handler's group where it routes the handler.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from telegram import User
from telegram.constants import ChatMemberStatus
from telegram.error import TelegramError
from telegram.ext import ExtBot

from bot.chat.repeats import Presses
from bot.drawing.pool import Pool
from bot.flow.access import Access
from bot.flow.blocking import Blocking
from bot.flow.forgetting import Forgetting
from bot.flow.runner import JobRunner
from bot.styles import Styles
from bot.updates.albums import AlbumCollector
from bot.words.catalogue import pick_lang
from inference.pipeline import ConvertSettings
from storage.buttons import ResultButtons
from storage.counters import Counters
from storage.holdings import Holdings
from storage.journal import Journal
from storage.uploads import Uploads
from storage.users import UserSettings

log = logging.getLogger("animebot.handlers")


@dataclass(frozen=True)
class Choices:
    """What users and chats chose, read against the installed styles: every reply's language (the routing
    looks it up for each update), and the style and settings a drawing is made in."""

    users: UserSettings
    styles: Styles

    async def lang(self, user: User | None) -> str:
        if user is None:
            return "en"
        return pick_lang((await self.users.prefs(user.id)).lang, user.language_code)

    async def style(self, user: User | None) -> str:
        chosen = (await self.users.prefs(user.id)).style if user else None
        return self.styles.resolve(chosen) or self.styles.default

    async def settings(self, chat_id: int) -> ConvertSettings:
        """How photos are drawn in this chat (a private chat's id is its user's)."""
        return self.styles.settings_for(await self.users.render_prefs(chat_id))


@dataclass(frozen=True)
class Drawings:
    """Asking for a drawing (bot/chat/photos.py, /style's preview sheet) or stopping one (Cancel)."""

    runner: JobRunner  # requests in: the only way to have anything drawn
    choices: Choices
    albums: AlbumCollector  # an album's messages, gathered before they are asked for as one


@dataclass(frozen=True)
class Redrawings:
    """A press of a button under a result (bot/chat/presses.py), or of /style's "my photo", which draws a
    photo the bot already has again."""

    runner: JobRunner
    choices: Choices
    buttons: ResultButtons[ConvertSettings]  # the result a button sits under, and its settings
    uploads: Uploads  # the photo the result was drawn from
    holdings: Holdings  # whose photo it is (only its owner makes a sticker of it)
    presses: Presses  # button presses being answered, or just answered
    hd: bool  # HD is on (ANIMEBOT_HD) and its model installed: the HD button works


@dataclass(frozen=True)
class Rights:
    """Who may do what: use the bot at all (the allowlist gate), and change a chat's settings (/settings and
    its buttons)."""

    choices: Choices
    access: Access

    async def may_configure(self, bot: ExtBot[None], chat_id: int, user: User) -> bool:
        """Whether ``user`` may change this chat's settings: anyone in a private chat, a group's
        admins (Telegram's convention for group configuration) and the bot's admins."""
        if chat_id > 0:
            return True
        if self.access.is_admin(user.id):
            return True
        try:
            member = await bot.get_chat_member(chat_id, user.id)
        except TelegramError as exc:
            log.info("getChatMember in chat %s failed (%s); settings left as they are", chat_id, exc.message)
            return False
        return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)


@dataclass(frozen=True)
class Privacy:
    """/privacy, /forget and its confirming button (bot/chat/privacy.py)."""

    access: Access  # an admin may forget someone else
    forgetting: Forgetting  # bot/flow/forgetting.py
    keep_days: int  # how long results and requests are kept (ANIMEBOT_KEEP_DAYS)
    scaled_out: bool  # photos cross a broker (Redis), which /privacy says


@dataclass(frozen=True)
class Stats:
    """/stats, for admins: the queue, the workers and the day's counts."""

    access: Access
    journal: Journal  # the jobs of the last hour and day
    pool: Pool  # the queue and the workers now
    counters: Counters  # cache hits and drawings


@dataclass(frozen=True)
class Admin:
    """/block, /unblock and /blocked, for admins (bot/chat/admin.py)."""

    access: Access
    blocking: Blocking  # bot/flow/blocking.py


@dataclass(frozen=True)
class Gallery:
    """Inline mode (bot/chat/inline.py): the user's own results, in any chat."""

    choices: Choices
    holdings: Holdings
