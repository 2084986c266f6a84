"""Inline button presses, one handler per kind (bot/root/app.py routes them by pattern).

Every press is answered, so the client's spinner stops: with nothing, with
a short note, or with an alert saying why it did nothing.
"""
from __future__ import annotations

import contextlib
from telegram.error import TelegramError

from bot.chat import keyboards
from bot.chat.context import Pressed, answer_quietly
from bot.chat.needs import Choices, Drawings, Redrawings, Rights
from bot.words.catalogue import LANGS, t
from bot.flow.kinds.base import Kind
from bot.flow.kinds.registry import ALL_STYLES, AVATAR, CUTOUT, DOUBLED, FILE, PREVIEW, STICKER, redrawn
from bot.flow.previews import PREVIEW_SETTINGS
from bot.flow.requests import Request, Source


async def redraw_button(pressed: Pressed, redrawings: Redrawings) -> None:
    """``r:STYLE:ID``: draw the result's photo again in another style, with the result's settings."""
    style_arg, result_id = pressed.groups(2)
    await result_button(pressed, redrawings, result_id, style_arg, None)


async def cancel_button(pressed: Pressed, drawings: Drawings) -> None:
    """``x:JOB``: stop a clip being drawn (or still waiting); only its sender may."""
    (job_id,) = pressed.groups(1)
    said = drawings.runner.cancel(job_id, pressed.user.id) if job_id else "job_gone"
    await answer_quietly(pressed.query, t(pressed.lang, said), alert=said not in ("cancelling", "cancelling_already"))


async def full_size_button(pressed: Pressed, redrawings: Redrawings) -> None:
    """``f:ID``: the result itself, as a file."""
    (result_id,) = pressed.groups(1)
    await result_button(pressed, redrawings, result_id, None, FILE)


async def avatar_button(pressed: Pressed, redrawings: Redrawings) -> None:
    """``v:ID``: the result's photo drawn again as an avatar: a square around the largest face, at full
    detail, as a photo and as the file (inference/avatar.py)."""
    (result_id,) = pressed.groups(1)
    await result_button(pressed, redrawings, result_id, None, AVATAR)


async def sticker_button(pressed: Pressed, redrawings: Redrawings) -> None:
    """``t:ID``: the result's person drawn again as a sticker, into the user's own set (bot/chat/stickers.py,
    inference/sticker.py). Only by whoever asked for the photo: in a group, a sticker of someone else's
    picture would go into the presser's public set, out of reach of the owner's /forget."""
    (result_id,) = pressed.groups(1)
    message = pressed.query.message
    shown = await redrawings.buttons.find(result_id, message.chat.id) if message is not None else None
    if shown is not None and not await redrawings.holdings.holds(pressed.user.id, shown.content_sha256):
        await answer_quietly(pressed.query, t(pressed.lang, "sticker_not_yours"), alert=True)
        return
    await result_button(pressed, redrawings, result_id, None, STICKER)


async def cutout_button(pressed: Pressed, redrawings: Redrawings) -> None:
    """``n:ID``: the result's person with no background, as a transparent PNG file."""
    (result_id,) = pressed.groups(1)
    await result_button(pressed, redrawings, result_id, None, CUTOUT)


async def hd_button(pressed: Pressed, redrawings: Redrawings) -> None:
    """``h:ID``: the result doubled by Real-CUGAN, as a file (and a photo where it fits); see bot/flow/kinds/hd.py."""
    (result_id,) = pressed.groups(1)
    if not redrawings.hd:  # switched off, or its model gone, since the button was sent
        await answer_quietly(pressed.query, t(pressed.lang, "hd_off"), alert=True)
        return
    await result_button(pressed, redrawings, result_id, None, DOUBLED)


async def all_styles_button(pressed: Pressed, redrawings: Redrawings) -> None:
    """``a:ID``: the result's photo in every other style, as an album (each style a photo of the quota)."""
    (result_id,) = pressed.groups(1)
    await result_button(pressed, redrawings, result_id, None, ALL_STYLES)


async def result_button(pressed: Pressed, redrawings: Redrawings, result_id: str, style_arg: str | None,
                        kind: Kind | None) -> None:
    """Act on the result a button sits under: draw it again as the ``kind`` of job (bot/flow/kinds/: a file,
    an avatar, a sticker, a cut-out, all styles, at that kind's settings), or as it was drawn (None: a
    redraw, in ``style_arg``), and only in the chat it was shown in.

    A second press while the first is being answered, or just after, is told so, and costs nothing
    (bot/chat/repeats.py).
    """
    query, lang, styles = pressed.query, pressed.lang, redrawings.choices.styles
    message = query.message
    press = (message.chat.id if message is not None else 0, str(query.data))
    if said := redrawings.presses.claim(press):
        await answer_quietly(query, t(lang, said))
        return
    answered = False
    try:
        shown = await redrawings.buttons.find(result_id, message.chat.id) if message is not None else None
        style = styles.resolve(style_arg or shown.style) if shown is not None else None
        kind = kind or (redrawn(shown.settings) if shown is not None else None)
        others: tuple[str, ...] = ()
        if shown is not None and kind is not None and style is not None:
            style, others = kind.aim(style, keyboards.album_styles(styles, shown.style))
        file_id = await redrawings.uploads.file_id_of(shown.content_sha256) if shown is not None else None
        if message is None or shown is None or kind is None or style is None or file_id is None:
            await answer_quietly(query, t(lang, "button_expired"), alert=True)
            return
        original = getattr(message, "reply_to_message", None)
        answered = await redrawings.runner.run(Request(
            job_id=str(pressed.update_id), chat_id=message.chat.id, user_id=pressed.user.id,
            reply_to=original.message_id if original else message.message_id, lang=lang, style=style,
            sources=(Source(file_id, sha256=shown.content_sha256, spoiler=shown.spoiler),),
            settings=shown.settings, kind=kind.name, query_id=query.id, styles=others,
        ))
    finally:
        redrawings.presses.release(press, answered)


async def style_button(pressed: Pressed, choices: Choices) -> None:
    """``s:STYLE:UID``: set the default style of the user the menu was sent to."""
    query, lang, styles = pressed.query, pressed.lang, choices.styles
    name, owner = pressed.groups(2)
    style = styles.resolve(name)
    if await own_menu_choice(pressed, style is not None, owner, "/style"):
        assert style is not None
        await choices.users.set_style(pressed.user.id, style)
        text = t(lang, "style_set", style=styles.display(style, lang))
        # The menu stays, its tick moved: someone comparing styles may change their mind.
        old = getattr(query.message, "reply_markup", None)
        own = old is not None and any(str(b.callback_data).startswith("p:") for row in old.inline_keyboard for b in row)
        markup = keyboards.style_keyboard(styles, style, pressed.user.id, lang, own_photo=own)
        if query.message is not None and getattr(query.message, "photo", None):  # under a preview picture
            await query.edit_message_caption(caption=text, reply_markup=markup)
        else:
            await query.edit_message_text(text, reply_markup=markup)


async def preview_button(pressed: Pressed, redrawings: Redrawings) -> None:
    """``p:UID``: every style drawn on the last photo of the user the menu was sent to, as one picture
    (a photo of their daily quota, unless it was drawn before)."""
    query, lang, choices = pressed.query, pressed.lang, redrawings.choices
    message = query.message
    (owner,) = pressed.groups(1)
    if message is None or not owner:
        await answer_quietly(query, t(lang, "button_expired"), alert=True)
        return
    if int(owner) != pressed.user.id:
        await answer_quietly(query, t(lang, "not_your_menu", command="/style"), alert=True)
        return
    last = await choices.users.last_photo(pressed.user.id)
    if last is None:
        await answer_quietly(query, t(lang, "no_last_photo"), alert=True)
        return
    press = (message.chat.id, str(query.data))
    if said := redrawings.presses.claim(press):
        await answer_quietly(query, t(lang, said))
        return
    answered = False
    try:
        original = getattr(message, "reply_to_message", None)
        answered = await redrawings.runner.run(Request(
            job_id=str(pressed.update_id), chat_id=message.chat.id, user_id=pressed.user.id,
            reply_to=original.message_id if original else message.message_id, lang=lang,
            style=await choices.style(pressed.user), styles=tuple(choices.styles.ordered), kind=PREVIEW.name,
            sources=(Source(last.file_id, sha256=last.content_sha256, spoiler=last.spoiler),),
            settings=PREVIEW_SETTINGS, query_id=query.id,
        ))
    finally:
        redrawings.presses.release(press, answered)


async def lang_button(pressed: Pressed, choices: Choices) -> None:
    """``l:LANG:UID``: set the language of the user the menu was sent to."""
    code, owner = pressed.groups(2)
    if await own_menu_choice(pressed, code in LANGS, owner, "/lang"):
        await choices.users.set_lang(pressed.user.id, code)
        await pressed.query.edit_message_text(t(code, "lang_set"))


async def own_menu_choice(pressed: Pressed, valid: bool, owner: str, command: str) -> bool:
    """Answer a menu press; True if it is a valid choice by the person the menu was sent to.
    Anyone else in a group gets an alert, and the owner's menu stays as it is."""
    if not valid:
        await answer_quietly(pressed.query, t(pressed.lang, "button_expired"), alert=True)
        return False
    if int(owner) != pressed.user.id:
        await answer_quietly(pressed.query, t(pressed.lang, "not_your_menu", command=command), alert=True)
        return False
    await answer_quietly(pressed.query)
    return True


async def option_button(pressed: Pressed, rights: Rights) -> None:
    """``o:OPTION:VALUE``: change one of this chat's drawing settings (a group's admins only)."""
    query, lang = pressed.query, pressed.lang
    name, value = pressed.groups(2)
    if query.message is None or (name, value) not in keyboards.OPTION_VALUES:
        await answer_quietly(query, t(lang, "button_expired"), alert=True)
        return
    chat_id = query.message.chat.id
    if not await rights.may_configure(pressed.bot, chat_id, pressed.user):
        await answer_quietly(query, t(lang, "settings_admins_only"), alert=True)
        return
    await answer_quietly(query)
    await rights.choices.users.set_render_pref(chat_id, name, int(value))
    current = await rights.choices.settings(chat_id)
    with contextlib.suppress(TelegramError):  # pressed twice: "message is not modified"
        await query.edit_message_text(keyboards.settings_text(current, lang),
                                      reply_markup=keyboards.settings_keyboard(
                                          current, lang, chat_id if query.message.chat.type == "private" else None))


async def unknown_button(pressed: Pressed) -> None:
    """Any other callback data: a button of an older version, or forged."""
    await answer_quietly(pressed.query, t(pressed.lang, "button_expired"), alert=True)
