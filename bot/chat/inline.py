"""Inline mode: ``@bot`` in any chat lists the user's own results and stickers, newest first, to send there.

Every result is offered by the file id Telegram gave it when the bot sent it, so nothing is
uploaded again. The list is the user's alone: it comes from what they asked for (``holdings``,
storage/holdings.py), a group's result counting as the member's who asked, and Telegram is told it is
personal, so no one else is ever shown it. A query's text picks a style, by its name in either
language. The operator switches inline mode on with @BotFather's ``/setinline``.
"""
from __future__ import annotations

from telegram import (InlineQueryResultCachedMpeg4Gif, InlineQueryResultCachedPhoto, InlineQueryResultCachedSticker,
                      InlineQueryResultCachedVideo, InlineQueryResultsButton, Update)

from bot.chat.context import Context
from bot.chat.needs import Gallery
from bot.words.catalogue import t
from bot.styles import Styles
from storage.holdings import OwnResult

PAGE = 20  # results a page; Telegram takes up to 50
CACHE_S = 10  # how long Telegram may show a user the same answer: a new result appears soon after

InlineResult = (InlineQueryResultCachedPhoto | InlineQueryResultCachedMpeg4Gif | InlineQueryResultCachedVideo
                | InlineQueryResultCachedSticker)


async def inline_query(update: Update, context: Context) -> None:
    """Answer ``@bot [style]``: a page of the user's own results, and where the next page starts."""
    query = update.inline_query
    if query is None:
        return
    gallery = context.bot_data.get(Gallery)
    styles = gallery.choices.styles
    lang = await gallery.choices.lang(query.from_user)
    # The offset is ours (next_offset below), but a client may send anything: plain digits, in range.
    offset = int(query.offset) if query.offset.isascii() and query.offset.isdigit() and len(query.offset) <= 6 else 0
    text = query.query.strip()
    style = style_asked(styles, text)
    found = await gallery.holdings.own_results(query.from_user.id, PAGE, offset, style) if style or not text else []
    results = [r for r in (_shown(styles, own, str(offset + i), lang) for i, own in enumerate(found)) if r is not None]
    button = None
    if not found and not offset:  # say why the list is empty, with the way to the bot
        if not text:
            why = t(lang, "inline_empty")
        elif style is not None:
            why = t(lang, "inline_none_in_style", style=styles.display(style, lang))
        else:
            why = t(lang, "inline_no_style")
        button = InlineQueryResultsButton(why, start_parameter="inline")
    await query.answer(results, cache_time=CACHE_S, is_personal=True,
                       next_offset=str(offset + PAGE) if len(found) == PAGE else "", button=button)


def style_asked(styles: Styles, text: str) -> str | None:
    """The installed style a query names (its name, or its display name in any language, or the start
    of one); None for an empty query (every result is listed) or one that names no style (none is)."""
    wanted = text.strip().lower()
    if not wanted:
        return None
    for name in styles.ordered:
        if any(n.lower().startswith(wanted) for n in styles.called(name)):
            return name
    return None


def _shown(styles: Styles, own: OwnResult, rid: str, lang: str) -> InlineResult | None:
    """One result as Telegram sends it on, ``rid`` its place in the list (an id that names no photo);
    a round video note has no inline kind, and is left out."""
    if own.kind == "photo":
        return InlineQueryResultCachedPhoto(rid, own.media_file_id)
    if own.kind == "animation":
        return InlineQueryResultCachedMpeg4Gif(rid, own.media_file_id)
    if own.kind == "video":
        return InlineQueryResultCachedVideo(rid, own.media_file_id, title=styles.display(own.style, lang))
    if own.kind == "sticker":
        return InlineQueryResultCachedSticker(rid, own.media_file_id)
    return None
