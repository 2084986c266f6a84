"""The bot's profile in every language it speaks: its command menus, its description (what a new user
reads in the empty chat before /start) and its short description (the profile page).

Telegram keeps each per language, under a two-letter code; the default (no code) is what every other
client sees, and is the English. At start each is compared with Telegram's copy and set only where they
differ, so a restart with the same sentences asks and changes nothing (and the profile is not churned
by every rolling restart of several bots). A profile is a convenience: a call Telegram refuses is one
warning, and the bot serves all the same.
"""
from __future__ import annotations

import logging

from telegram import (Bot, BotCommand, BotCommandScope, BotCommandScopeAllGroupChats, BotCommandScopeAllPrivateChats,
                      BotCommandScopeChat)
from telegram.error import TelegramError

from bot.words.catalogue import LANGS, profile_code, t

log = logging.getLogger(__name__)

# The commands in Telegram's menus; each is described by the sentence command_<name> (group_command_<name>).
PRIVATE_COMMANDS = ("start", "style", "settings", "lang", "help", "about", "privacy", "forget")
GROUP_COMMANDS = ("anime", "sticker", "settings", "help")
# An admin's private chat has a menu of its own (a chat's scope wins over all private chats'): everyone's, and these.
ADMIN_COMMANDS = ("stats", "block", "unblock", "blocked")


async def publish_profile(bot: Bot, admins: frozenset[int] = frozenset()) -> int:
    """Bring the profile in every language in step with the catalogue, the ``admins``' own menus too; returns
    how many parts were set. An id dropped from the admins keeps its menu, whose commands then answer as
    unknown ones: Telegram cannot be asked which chats have a menu of their own."""
    changed = 0
    for lang in LANGS:
        try:
            changed += await _publish(bot, lang, profile_code(lang), admins)
        except TelegramError as exc:
            log.warning("could not set the bot's profile in %s: %s: %s", lang, exc.__class__.__name__, exc.message)
    if changed:
        log.info("the bot's profile: %d part(s) set anew in %d language(s)", changed, len(LANGS))
    return changed


async def _publish(bot: Bot, lang: str, code: str | None, admins: frozenset[int]) -> int:
    changed = 0
    menus: list[tuple[BotCommandScope, str, tuple[str, ...]]] = [
        (BotCommandScopeAllPrivateChats(), "command_", PRIVATE_COMMANDS),
        (BotCommandScopeAllGroupChats(), "group_command_", GROUP_COMMANDS),
        *((BotCommandScopeChat(admin), "command_", PRIVATE_COMMANDS + ADMIN_COMMANDS) for admin in sorted(admins))]
    for scope, prefix, names in menus:
        wanted = [BotCommand(name, t(lang, prefix + name)) for name in names]
        if list(await bot.get_my_commands(scope=scope, language_code=code)) != wanted:
            await bot.set_my_commands(wanted, scope=scope, language_code=code)
            changed += 1
    description = t(lang, "profile_description")
    if (await bot.get_my_description(language_code=code)).description != description:
        await bot.set_my_description(description, language_code=code)
        changed += 1
    short = t(lang, "profile_short_description")
    if (await bot.get_my_short_description(language_code=code)).short_description != short:
        await bot.set_my_short_description(short, language_code=code)
        changed += 1
    return changed
