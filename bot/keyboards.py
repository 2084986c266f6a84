"""Inline keyboards, and the patterns of the callback data their buttons carry.

Callback data is at most 64 bytes and comes back from the client, so it
names as little as possible and is matched strictly (bot/app.py routes each
pattern to its own handler; anything else is answered as expired):

- ``r:STYLE:ID`` redraws the result ``ID`` in another style, and ``f:ID``
  sends it as a full-size file. ``ID`` is a result's server-side id
  (storage/buttons.py), which holds the photo, style and settings it was
  drawn with and the chat it was shown in.
- ``s:STYLE:UID`` and ``l:LANG:UID`` set the style or language of the user
  ``UID`` the menu was sent to; nobody else may use it.
- ``o:OPTION:VALUE`` sets a drawing option of this chat (faces, strength,
  keep colours).
"""
from __future__ import annotations

import re

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.i18n import LANG_NAMES, t
from bot.styles import Styles
from inference.pipeline import ConvertSettings

_STYLE = r"[\w.-]{1,32}"
_ID = r"[\w-]{12}"
REDRAW = re.compile(rf"^r:({_STYLE}):({_ID})$")
FULL_SIZE = re.compile(rf"^f:({_ID})$")
SET_STYLE = re.compile(rf"^s:({_STYLE}):(\d+)$")
SET_LANG = re.compile(r"^l:(\w{2,8}):(\d+)$")
SET_OPTION = re.compile(r"^o:(faces|keep_colours|strength):(\d{1,3})$")

STRENGTHS = (25, 50, 75, 100)
OPTION_VALUES = {("faces", "0"), ("faces", "1"), ("keep_colours", "0"), ("keep_colours", "1")} | {
    ("strength", str(v)) for v in STRENGTHS}


def settings_keyboard(settings: ConvertSettings, lang: str) -> InlineKeyboardMarkup:
    """Toggles for the face pass and keep colours, and a row of strengths."""
    def state(on: bool) -> str:
        return t(lang, "on" if on else "off")

    return InlineKeyboardMarkup([
        [InlineKeyboardButton(t(lang, "button_faces", state=state(settings.faces)),
                              callback_data=f"o:faces:{int(not settings.faces)}")],
        [InlineKeyboardButton(("✅ " if v == settings.strength else "") + f"{v}%", callback_data=f"o:strength:{v}")
         for v in STRENGTHS],
        [InlineKeyboardButton(t(lang, "button_keep", state=state(settings.keep_colours)),
                              callback_data=f"o:keep_colours:{int(not settings.keep_colours)}")],
    ])


def settings_text(settings: ConvertSettings, lang: str) -> str:
    return t(lang, "settings", faces=t(lang, "on" if settings.faces else "off"), strength=settings.strength,
             keep=t(lang, "on" if settings.keep_colours else "off"))


def result_keyboard(styles: Styles, style: str, result_id: str, lang: str) -> InlineKeyboardMarkup:
    """Under a result: redraw in each other installed style, and the full-size file."""
    others = [InlineKeyboardButton(f"🎨 {styles.label(n)}", callback_data=f"r:{n}:{result_id}") for n in styles.names
              if n != style]
    rows = [others[i:i + 2] for i in range(0, len(others), 2)]
    rows.append([InlineKeyboardButton(t(lang, "full_size"), callback_data=f"f:{result_id}")])
    return InlineKeyboardMarkup(rows)


def album_keyboard(result_ids: list[str], lang: str) -> InlineKeyboardMarkup:
    """After an album (whose photos cannot carry buttons): the full-size file of each, by number."""
    buttons = [InlineKeyboardButton(f"📄 {i}", callback_data=f"f:{rid}") for i, rid in enumerate(result_ids, 1)]
    return InlineKeyboardMarkup([buttons[i:i + 5] for i in range(0, len(buttons), 5)])


def style_keyboard(styles: Styles, current: str, user_id: int) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(("✅ " if n == current else "") + styles.label(n), callback_data=f"s:{n}:{user_id}")]
         for n in styles.names]
    )


def lang_keyboard(user_id: int) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[InlineKeyboardButton(name, callback_data=f"l:{code}:{user_id}")
                                  for code, name in LANG_NAMES.items()]])
