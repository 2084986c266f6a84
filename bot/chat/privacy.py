"""What the bot keeps and how to have it deleted: /privacy, /forget, and the buttons that confirm it.

/forget asks once, with a button, because it cannot be undone; the press carries it out
(bot/flow/forgetting.py). An admin may forget someone else with ``/forget USER_ID``. Both are for
private chats: in a group, the answer would tell everyone there.
"""
from __future__ import annotations

import logging

from telegram.error import TelegramError

from bot.chat import keyboards
from bot.chat.context import Incoming, Pressed, answer_quietly
from bot.chat.needs import Privacy
from bot.words.catalogue import t
from storage.erasure import Erasure

log = logging.getLogger("animebot.privacy")


async def privacy_command(incoming: Incoming, privacy: Privacy) -> None:
    """``/privacy``: what is kept, why, for how long, who sees it, and how to erase it."""
    lang = incoming.lang
    text = t(lang, "privacy", days=t(lang, "days", count=privacy.keep_days))
    if privacy.scaled_out:
        text += "\n\n" + t(lang, "privacy_scaled_out")
    await incoming.message.reply_text(text)


async def forget_command(incoming: Incoming, privacy: Privacy) -> None:
    """``/forget`` (yourself) or, for an admin, ``/forget USER_ID``: ask to confirm, with a button."""
    lang, message = incoming.lang, incoming.message
    if incoming.chat.type != "private":
        await message.reply_text(t(lang, "forget_in_private"))
        return
    args = (message.text or "").split()[1:]
    target = incoming.user.id
    if args:
        if not privacy.access.is_admin(incoming.user.id):
            await message.reply_text(t(lang, "forget_others_admins_only"))
            return
        if len(args) != 1 or not args[0].isdigit():
            await message.reply_text(t(lang, "forget_usage"))
            return
        target = int(args[0])
    await ask(incoming, target)


async def ask(incoming: Incoming, target: int) -> None:
    own = target == incoming.user.id
    await incoming.message.reply_text(t(incoming.lang, "forget_ask" if own else "forget_ask_admin", user_id=target),
                                      reply_markup=keyboards.forget_keyboard(target, incoming.lang))


async def settings_forget_button(pressed: Pressed) -> None:
    """``e:UID``, under /settings in a private chat: the same question as /forget."""
    (owner,) = pressed.groups(1)
    message = pressed.query.message
    if message is None or not owner:
        await answer_quietly(pressed.query, t(pressed.lang, "button_expired"), alert=True)
        return
    if int(owner) != pressed.user.id:
        await answer_quietly(pressed.query, t(pressed.lang, "not_your_menu", command="/forget"), alert=True)
        return
    await answer_quietly(pressed.query)
    await pressed.bot.send_message(message.chat.id, t(pressed.lang, "forget_ask"),
                                   reply_markup=keyboards.forget_keyboard(pressed.user.id, pressed.lang))


async def keep_button(pressed: Pressed) -> None:
    """``k:UID``: the user changed their mind; nothing is deleted."""
    await answer_quietly(pressed.query)
    try:
        await pressed.query.edit_message_text(t(pressed.lang, "forget_kept_all"))
    except TelegramError as exc:  # pressed twice
        log.info("forget not asked (update %s): %s", pressed.update_id, exc.message)


async def confirm_button(pressed: Pressed, privacy: Privacy) -> None:
    """``E:UID``: delete everything kept about ``UID``; only they, or an admin, may press it."""
    query, lang = pressed.query, pressed.lang
    (owner,) = pressed.groups(1)
    message = query.message
    if message is None or not owner:
        await answer_quietly(query, t(lang, "button_expired"), alert=True)
        return
    target = int(owner)
    if target != pressed.user.id and not privacy.access.is_admin(pressed.user.id):
        await answer_quietly(query, t(lang, "not_your_menu", command="/forget"), alert=True)
        return
    forgetting = privacy.forgetting
    if target in forgetting.asked:  # a double tap: the first press's answer is on its way
        await answer_quietly(query, t(lang, "forgetting_now"))
        return
    forgetting.asked.add(target)  # checked and added with no await between
    try:
        await answer_quietly(query)
        erasure = Erasure(pressed.update_id, target, message.chat.id, lang, message.message_id)
        await forgetting.erasures.begin(erasure)  # from here on, a restart finishes it
        try:  # the buttons go at once: a later press would have nothing left to confirm
            await query.edit_message_text(t(lang, "forgetting_now"))
        except TelegramError as exc:
            log.info("forget %s: the confirmation could not be edited (%s)", pressed.update_id, exc.message)
        forgotten = await forgetting.forget(erasure)
        await forgetting.told(erasure, forgotten, asker_id=pressed.user.id)
    finally:
        forgetting.asked.discard(target)
