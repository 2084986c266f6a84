"""The admins' commands that act on users: ``/block USER_ID``, ``/unblock USER_ID`` and ``/blocked``.

For anyone else, and anywhere but a private chat with the bot (a list of users is not a group's business),
they are what any command the bot does not know is: in a private chat the same sentence, in a group
nothing. Each answers one sentence; the blocking itself is bot/flow/blocking.py's.
"""
from __future__ import annotations

import time

from bot.chat.context import Incoming
from bot.chat.needs import Admin
from bot.words.catalogue import t


async def block_command(incoming: Incoming, admin: Admin) -> None:
    """``/block USER_ID``: refuse them everything, and stop what they have waiting or drawing."""
    target = await _target(incoming, admin, "/block")
    if target is None:
        return
    stopped = await admin.blocking.block(target, by=incoming.user.id)
    key = "block_admin" if stopped is None else "block_done"
    await incoming.message.reply_text(t(incoming.lang, key, user_id=target))


async def unblock_command(incoming: Incoming, admin: Admin) -> None:
    """``/unblock USER_ID``: lift a block."""
    target = await _target(incoming, admin, "/unblock")
    if target is None:
        return
    lifted = await admin.blocking.unblock(target, by=incoming.user.id)
    await incoming.message.reply_text(t(incoming.lang, "unblock_done" if lifted else "unblock_not_blocked",
                                        user_id=target))


async def blocked_command(incoming: Incoming, admin: Admin) -> None:
    """``/blocked``: who is blocked, by whom and when (UTC), the oldest first."""
    if not await _for_admins(incoming, admin):
        return
    lang, blocks = incoming.lang, await admin.blocking.listed()
    if not blocks:
        await incoming.message.reply_text(t(lang, "blocked_none"))
        return
    lines = [t(lang, "blocked_line", user_id=b.user_id, admin=b.by,
               when=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(b.at))) for b in blocks]
    await incoming.message.reply_text("\n".join([t(lang, "blocked_head"), *(f"• {line}" for line in lines)]))


async def _for_admins(incoming: Incoming, admin: Admin) -> bool:
    """Whether the command is an admin's, in a private chat; if not, answered as an unknown command."""
    if incoming.chat.type == "private" and admin.access.is_admin(incoming.user.id):
        return True
    if incoming.chat.type == "private":
        await incoming.message.reply_text(t(incoming.lang, "unknown_command"))
    return False


async def _target(incoming: Incoming, admin: Admin, command: str) -> int | None:
    """The user id the command names, once it is an admin's; a bad one is told how to write it."""
    if not await _for_admins(incoming, admin):
        return None
    args = (incoming.message.text or "").split()[1:]
    if len(args) != 1 or not args[0].isdigit() or len(args[0]) > 19:
        await incoming.message.reply_text(t(incoming.lang, "block_usage", command=command))
        return None
    return int(args[0])
