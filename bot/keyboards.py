"""Inline keyboards and the callback data their buttons carry.

Callback data is at most 64 bytes and comes back from the client, so it is
short, versionless text that we parse defensively: ``r:STYLE:SHA16``
(redraw a photo in a style), ``f:STYLE:SHA16`` (send the full-size file),
``s:STYLE`` (set my style) and ``l:LANG`` (set my language).
"""
from __future__ import annotations

from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.i18n import LANG_NAMES, t
from bot.styles import Styles

SHA_PREFIX = 16


@dataclass(frozen=True)
class Button:
    action: str  # "r", "f", "s" or "l"
    value: str  # style or language
    sha_prefix: str = ""


def parse(data: str | None) -> Button | None:
    """The button a callback names, or None for anything we did not make."""
    if not data or len(data) > 64:
        return None
    parts = data.split(":")
    if parts[0] in ("r", "f") and len(parts) == 3 and len(parts[2]) == SHA_PREFIX:
        return Button(parts[0], parts[1], parts[2])
    if parts[0] in ("s", "l") and len(parts) == 2 and parts[1]:
        return Button(parts[0], parts[1])
    return None


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
