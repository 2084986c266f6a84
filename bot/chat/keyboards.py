"""Inline keyboards, and the patterns of the callback data their buttons carry.

Callback data is at most 64 bytes and comes back from the client, so it
names as little as possible and is matched strictly (bot/root/app.py routes each
pattern to its own handler; anything else is answered as expired):

- ``r:STYLE:ID`` redraws the result ``ID`` in another style, ``a:ID`` draws
  it in every other style (an album), ``f:ID`` sends it as a full-size
  file, ``v:ID`` draws its photo again as an avatar, ``t:ID`` as a sticker
  in the user's own set, and ``n:ID`` as a cut-out with no background (a
  PNG file). ``ID`` is a result's server-side id (storage/buttons.py),
  which holds the photo, style and settings it was drawn with and the chat
  it was shown in.
- ``s:STYLE:UID`` and ``l:LANG:UID`` set the style or language of the user
  ``UID`` the menu was sent to, and ``p:UID`` previews every style on that
  user's last photo; nobody else may use them.
- ``o:OPTION:VALUE`` sets a drawing option of this chat (faces, strength,
  keep colours).
- ``e:UID`` (under /settings) asks whether to delete everything kept about
  the user ``UID``; ``E:UID`` confirms it, ``k:UID`` keeps it all
  (bot/chat/privacy.py).
"""
from __future__ import annotations

import math
import re

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, WebAppInfo

from bot.words.catalogue import LANG_NAMES, t
from bot.styles import Styles
from inference.pipeline import ConvertSettings

_STYLE = r"[\w.-]{1,32}"
_ID = r"[\w-]{12}"
# \Z, not $: a $ also matches before a trailing newline, so "p:1\n" would reach a route.
REDRAW = re.compile(rf"^r:({_STYLE}):({_ID})\Z")
FULL_SIZE = re.compile(rf"^f:({_ID})\Z")
ALL_STYLES = re.compile(rf"^a:({_ID})\Z")
AVATAR = re.compile(rf"^v:({_ID})\Z")
STICKER = re.compile(rf"^t:({_ID})\Z")
CUTOUT = re.compile(rf"^n:({_ID})\Z")
HD = re.compile(rf"^h:({_ID})\Z")
PREVIEW_MINE = re.compile(r"^p:(\d+)\Z")
SET_STYLE = re.compile(rf"^s:({_STYLE}):(\d+)\Z")
SET_LANG = re.compile(r"^l:([a-z]{2,3}(?:-[a-z]{2,4})?):(\d+)\Z")  # a code of the catalogue: "ru", "pt-br"
SET_OPTION = re.compile(r"^o:(faces|keep_colours|strength):(\d{1,3})\Z")
CANCEL = re.compile(r"^x:(\d{1,20})\Z")  # a clip's job, by its update id
FORGET_ASK = re.compile(r"^e:(\d{1,20})\Z")
FORGET_YES = re.compile(r"^E:(\d{1,20})\Z")
FORGET_NO = re.compile(r"^k:(\d{1,20})\Z")

STRENGTHS = (25, 50, 75, 100)
REDRAW_ROWS = 2  # rows of redraw buttons under a result, whatever the number of styles
REDRAW_PER_ROW = 4  # short names, four across, still fit a phone's width
ALBUM_MAX = 10  # the most photos Telegram takes in one album
OPTION_VALUES = {("faces", "0"), ("faces", "1"), ("keep_colours", "0"), ("keep_colours", "1")} | {
    ("strength", str(v)) for v in STRENGTHS}


def settings_keyboard(settings: ConvertSettings, lang: str, user_id: int | None = None) -> InlineKeyboardMarkup:
    """Toggles for the face pass and keep colours, and a row of strengths; in a private chat
    (``user_id`` given), a last row to delete everything kept about the user."""
    def state(on: bool) -> str:
        return t(lang, "on" if on else "off")

    rows = [
        [InlineKeyboardButton(t(lang, "button_faces", state=state(settings.faces)),
                              callback_data=f"o:faces:{int(not settings.faces)}")],
        [InlineKeyboardButton(("✅ " if v == settings.strength else "") + f"{v}%", callback_data=f"o:strength:{v}")
         for v in STRENGTHS],
        [InlineKeyboardButton(t(lang, "button_keep", state=state(settings.keep_colours)),
                              callback_data=f"o:keep_colours:{int(not settings.keep_colours)}")],
    ]
    if user_id is not None:
        rows.append([InlineKeyboardButton(t(lang, "button_forget"), callback_data=f"e:{user_id}")])
    return InlineKeyboardMarkup(rows)


def forget_keyboard(user_id: int, lang: str) -> InlineKeyboardMarkup:
    """Under /forget's question: delete everything, or keep it."""
    return InlineKeyboardMarkup([[InlineKeyboardButton(t(lang, "button_forget_yes"), callback_data=f"E:{user_id}"),
                                  InlineKeyboardButton(t(lang, "button_forget_no"), callback_data=f"k:{user_id}")]])


def settings_text(settings: ConvertSettings, lang: str) -> str:
    return t(lang, "settings", faces=t(lang, "on" if settings.faces else "off"), strength=settings.strength,
             keep=t(lang, "on" if settings.keep_colours else "off"))


def redraw_styles(styles: Styles, style: str) -> list[str]:
    """The styles a result drawn in ``style`` offers to redraw in, directly: the first of the others in
    menu order (scene styles before line art and face styles), as many as two rows hold."""
    return [n for n in styles.ordered if n != style][:REDRAW_ROWS * REDRAW_PER_ROW]


def album_styles(styles: Styles, style: str) -> list[str]:
    """The styles "All styles" draws a result in: every other one, in menu order. Past an album's
    ten, those without a button of their own come first, so every style is reachable one way or the other."""
    others = [n for n in styles.ordered if n != style]
    if len(others) <= ALBUM_MAX:
        return others
    direct = redraw_styles(styles, style)
    hidden = [n for n in others if n not in direct]
    keep = set(hidden[:ALBUM_MAX]) | set(direct[:max(0, ALBUM_MAX - len(hidden))])
    return [n for n in others if n in keep]


def rows_of(buttons: list[InlineKeyboardButton], per_row: int) -> list[list[InlineKeyboardButton]]:
    return [buttons[i:i + per_row] for i in range(0, len(buttons), per_row)]


def result_keyboard(styles: Styles, style: str, result_id: str, lang: str, webapp_url: str | None = None,
                    hd: bool = False) -> InlineKeyboardMarkup:
    """Under a result: at most two rows of redraw buttons (short names), then what else it can become (a
    sticker, an avatar, with ``hd`` its HD), then All styles, No background and Full size; with ``webapp_url``,
    last, the Mini App opened on this result (bot/webapp/)."""
    shown = redraw_styles(styles, style)
    per_row = len(shown) if len(shown) <= 3 else min(REDRAW_PER_ROW, math.ceil(len(shown) / REDRAW_ROWS))
    rows = rows_of([InlineKeyboardButton(styles.display(n, lang), callback_data=f"r:{n}:{result_id}")
                    for n in shown], max(1, per_row))
    uses = [InlineKeyboardButton(t(lang, "sticker"), callback_data=f"t:{result_id}"),
            InlineKeyboardButton(t(lang, "avatar"), callback_data=f"v:{result_id}")]
    if hd:
        uses.append(InlineKeyboardButton(t(lang, "hd_button"), callback_data=f"h:{result_id}"))
    last = [InlineKeyboardButton(t(lang, "no_background"), callback_data=f"n:{result_id}"),
            InlineKeyboardButton(t(lang, "full_size"), callback_data=f"f:{result_id}")]
    if len(album_styles(styles, style)) >= 2:  # with one other style, its redraw button is the same thing
        last.insert(0, InlineKeyboardButton(t(lang, "all_styles"), callback_data=f"a:{result_id}"))
    opened = [[InlineKeyboardButton(t(lang, "webapp_button"), web_app=WebAppInfo(f"{webapp_url}?r={result_id}"))]] \
        if webapp_url else []
    return InlineKeyboardMarkup([*rows, uses, last, *opened])


def clip_keyboard(result_id: str, lang: str) -> InlineKeyboardMarkup:
    """Under a drawn clip: a video sticker of it, an animated avatar, and the file itself."""
    return InlineKeyboardMarkup([[InlineKeyboardButton(t(lang, "sticker"), callback_data=f"t:{result_id}"),
                                  InlineKeyboardButton(t(lang, "avatar"), callback_data=f"v:{result_id}"),
                                  InlineKeyboardButton(t(lang, "full_size"), callback_data=f"f:{result_id}")]])


def album_keyboard(result_ids: list[str], lang: str, labels: list[str] | None = None) -> InlineKeyboardMarkup:
    """After an album (whose photos cannot carry buttons): the full-size file of each, by number
    (or by ``labels``: an album of styles names them)."""
    names = labels or [str(i) for i in range(1, len(result_ids) + 1)]
    buttons = [InlineKeyboardButton(f"📄 {name}", callback_data=f"f:{rid}") for name, rid in zip(names, result_ids)]
    return InlineKeyboardMarkup(rows_of(buttons, 5 if labels is None else 3))


def style_keyboard(styles: Styles, current: str, user_id: int, lang: str, own_photo: bool = False
                   ) -> InlineKeyboardMarkup:
    """The /style menu: each style by its number on the preview sheet and its name, two or three a
    row; with ``own_photo``, a last row to preview every style on the user's last photo."""
    buttons = [InlineKeyboardButton(("✅ " if n == current else "") + f"{i} {styles.display(n, lang)}",
                                    callback_data=f"s:{n}:{user_id}") for i, n in enumerate(styles.ordered, 1)]
    rows = rows_of(buttons, 2 if len(buttons) <= 4 else 3)
    if own_photo:
        rows.append([InlineKeyboardButton(t(lang, "preview_mine"), callback_data=f"p:{user_id}")])
    return InlineKeyboardMarkup(rows)


def style_menu_text(styles: Styles, current: str, lang: str, own_photo: bool) -> str:
    """The /style menu as text, for when there is no preview picture: each style and what it looks like."""
    lines = [t(lang, "style_line", number=i, name=styles.display(n, lang), about=styles.describe(n, lang))
             for i, n in enumerate(styles.ordered, 1)]
    hint = t(lang, "style_own_hint" if own_photo else "style_invite")
    return f"{t(lang, 'style_prompt', style=styles.display(current, lang))}\n\n" + "\n".join(lines) + f"\n\n{hint}"


def cancel_keyboard(job_id: str, lang: str) -> InlineKeyboardMarkup:
    """Under a clip's status message: stop the drawing."""
    return InlineKeyboardMarkup([[InlineKeyboardButton(t(lang, "button_cancel"), callback_data=f"x:{job_id}")]])


def lang_keyboard(user_id: int) -> InlineKeyboardMarkup:
    """Every language, each in its own name, three to a row: a phone shows them all without scrolling."""
    return InlineKeyboardMarkup(rows_of([InlineKeyboardButton(name, callback_data=f"l:{code}:{user_id}")
                                         for code, name in LANG_NAMES.items()], 3))
