"""Inline keyboards and the callback data their buttons carry.

Callback data is at most 64 bytes and comes back from the client, so it is
short, versionless text that we parse defensively: ``r:STYLE:SHA16``
(redraw a photo in a style), ``f:STYLE:SHA16`` (send the full-size file),
``s:STYLE`` (set my style), ``l:LANG`` (set my language) and
``o:OPTION:VALUE`` (a drawing option of this chat: faces, strength, keep).
"""
from __future__ import annotations

from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.i18n import LANG_NAMES, t
from bot.styles import Styles
from inference.pipeline import ConvertSettings

SHA_PREFIX = 16


@dataclass(frozen=True)
class Button:
    action: str  # "r", "f", "s", "l" or "o"
    value: str  # style, language or option name
    sha_prefix: str = ""  # for "o": the option's value


def parse(data: str | None) -> Button | None:
    """The button a callback names, or None for anything we did not make."""
    if not data or len(data) > 64:
        return None
    parts = data.split(":")
    if parts[0] in ("r", "f") and len(parts) == 3 and len(parts[2]) == SHA_PREFIX:
        return Button(parts[0], parts[1], parts[2])
    if parts[0] in ("s", "l") and len(parts) == 2 and parts[1]:
        return Button(parts[0], parts[1])
    if parts[0] == "o" and len(parts) == 3 and (parts[1], parts[2]) in OPTION_VALUES:
        return Button("o", parts[1], parts[2])
    return None


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


def result_keyboard(styles: Styles, style: str, content_sha256: str, lang: str) -> InlineKeyboardMarkup:
    """Under a result: redraw in each other installed style, and the full-size file."""
    sha = content_sha256[:SHA_PREFIX]
    others = [InlineKeyboardButton(f"🎨 {styles.label(n)}", callback_data=f"r:{n}:{sha}") for n in styles.names
              if n != style]
    rows = [others[i:i + 2] for i in range(0, len(others), 2)]
    rows.append([InlineKeyboardButton(t(lang, "full_size"), callback_data=f"f:{style}:{sha}")])
    return InlineKeyboardMarkup(rows)


def style_keyboard(styles: Styles, current: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(("✅ " if n == current else "") + styles.label(n), callback_data=f"s:{n}")]
         for n in styles.names]
    )


def lang_keyboard() -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[InlineKeyboardButton(name, callback_data=f"l:{code}")
                                  for code, name in LANG_NAMES.items()]])
