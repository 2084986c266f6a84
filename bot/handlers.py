"""Telegram update handlers: each turns one kind of update into a reply or a Request.

They stay small on purpose. Deciding *whether* to convert (private chat,
``/anime`` in a group, a button) happens here; *how* is bot.jobs' business.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import re
import time
from dataclasses import dataclass, field

from telegram import CallbackQuery, Message, Update, User
from telegram.error import TelegramError
from telegram.ext import ApplicationHandlerStop, ContextTypes

from bot import keyboards
from bot.access import Access
from bot.albums import AlbumCollector
from bot.i18n import LANGS, pick_lang, t
from bot.jobs import JobRunner, Request, Source
from bot.styles import Styles
from inference.pipeline import ConvertSettings
from storage.cache import Cache

log = logging.getLogger("animebot.handlers")

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".gif", ".heic", ".jfif")
ANIME_COMMAND = re.compile(r"^/anime(?:@(\w+))?(?=\s|$)(?:\s+(\S+))?", re.IGNORECASE)


@dataclass
class BotState:
    """What every handler needs, kept in ``application.bot_data``."""

    runner: JobRunner
    cache: Cache
    styles: Styles
    album_wait_s: float
    access: Access = field(default_factory=Access)
    albums: AlbumCollector = field(init=False)

    def __post_init__(self) -> None:
        self.albums = AlbumCollector(self.album_wait_s, functools.partial(on_album, self))


def state(context: ContextTypes.DEFAULT_TYPE) -> BotState:
    return context.bot_data["animebot"]  # type: ignore[no-any-return]


async def user_lang(st: BotState, user: User | None) -> str:
    if user is None:
        return "en"
    _, chosen = await st.cache.user_prefs(user.id)
    return pick_lang(chosen, user.language_code)


async def user_style(st: BotState, user: User | None) -> str:
    chosen = (await st.cache.user_prefs(user.id))[0] if user else None
    return st.styles.resolve(chosen) or st.styles.default


async def chat_settings(st: BotState, chat_id: int) -> ConvertSettings:
    """How photos are drawn in this chat (a private chat's id is its user's)."""
    return st.styles.settings_for(await st.cache.render_prefs(chat_id))


def source_of(message: Message) -> Source | None:
    """The image a message carries: its largest photo size, or a document that may be an image.

    A document is refused here only when it says it is something else (a
    PDF, a video); one that names no type is fetched and decoding decides.
    """
    if message.photo:
        p = message.photo[-1]
        return Source(p.file_id, p.file_unique_id, p.file_size)
    doc = message.document
    if doc is None:
        return None
    mime = doc.mime_type or "application/octet-stream"
    if mime.startswith("image/") or mime == "application/octet-stream" or \
            (doc.file_name or "").lower().endswith(IMAGE_SUFFIXES):
        return Source(doc.file_id, doc.file_unique_id, doc.file_size)
    return None


def anime_command(text: str | None, bot_username: str | None) -> tuple[bool, str | None]:
    """Whether ``text`` is ``/anime`` addressed to us, and the style it names, if any."""
    m = ANIME_COMMAND.match(text or "")
    if not m or (m.group(1) and (bot_username or "").lower() != m.group(1).lower()):
        return False, None
    return True, m.group(2)


# --- access ---------------------------------------------------------------------

async def gate(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Runs before every other handler: in allowlist mode, refuse everyone else politely.

    Only updates addressed to the bot get the refusal (a private message,
    ``/anime`` in a group, a button); a group's other photos are ignored.
    """
    st = state(context)
    user, chat = update.effective_user, update.effective_chat
    if st.access.allows(user.id if user else None, chat.id if chat else None):
        return
    log.info("update %s: user %s in chat %s is not on the allowlist", update.update_id,
             user.id if user else "-", chat.id if chat else "-")
    lang = await user_lang(st, user)
    if update.callback_query:
        await answer_quietly(update.callback_query, t(lang, "not_allowed"), alert=True)
    elif (message := update.effective_message) is not None:
        asked = anime_command(message.text or message.caption, context.bot.username)[0]
        if message.chat.type == "private" or asked:
            await message.reply_text(t(lang, "not_allowed"), do_quote=True)
    raise ApplicationHandlerStop


async def stats_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """``/stats``, for admins: the queue, throughput, cache hit rate and the commonest problems."""
    st = state(context)
    user = update.effective_user
    lang = await user_lang(st, user)
    if not st.access.is_admin(user.id if user else None):
        await update.effective_message.reply_text(t(lang, "admins_only"))
        return
    now = time.time()
    journal, pool = st.runner.journal, st.runner.pool
    hour, ten_min, day = [await journal.counts_since(now - span) for span in (3600, 600, 86400)]
    counters = await st.cache.stats()
    hits, converted = counters.get("cache_hits", 0), counters.get("converted", 0)
    problems = ", ".join(f"{code} {n}" for code, n in day.top_outcomes) or t(lang, "none")
    await update.effective_message.reply_text(t(
        lang, "stats", waiting=pool.waiting, running=pool.running, workers=pool.size, done_hour=hour.photos_done,
        per_min=ten_min.photos_done / 10, jobs_day=sum(day.by_state.values()), done_day=day.photos_done,
        failed_day=day.by_state.get("failed", 0), refused_day=day.by_state.get("refused", 0), hits=hits,
        lookups=hits + converted, hit_rate=100 * hits / max(1, hits + converted), problems=problems,
    ))


async def answer_quietly(query: CallbackQuery, text: str | None = None, alert: bool = False) -> None:
    """Stop the button's spinner. A query answered late (after a restart) is refused by
    Telegram; that must not stop the button from working."""
    with contextlib.suppress(TelegramError):
        await query.answer(text, show_alert=alert)


# --- commands ------------------------------------------------------------------

async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    st = state(context)
    await update.effective_message.reply_text(t(await user_lang(st, update.effective_user), "start"))


async def help_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    st = state(context)
    lang = await user_lang(st, update.effective_user)
    await update.effective_message.reply_text(t(lang, "help", styles=", ".join(st.styles.names)))


async def about(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    st = state(context)
    lang = await user_lang(st, update.effective_user)
    models = "\n".join(f"• {e.label}: {e.license}" for e in st.styles.entries)
    await update.effective_message.reply_text(t(lang, "about", models=models))


async def style_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    st = state(context)
    lang = await user_lang(st, update.effective_user)
    current = await user_style(st, update.effective_user)
    await update.effective_message.reply_text(
        t(lang, "style_prompt", style=st.styles.label(current)), reply_markup=keyboards.style_keyboard(st.styles, current)
    )


async def lang_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    st = state(context)
    lang = await user_lang(st, update.effective_user)
    await update.effective_message.reply_text(t(lang, "lang_prompt"), reply_markup=keyboards.lang_keyboard())


async def settings_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    st = state(context)
    lang = await user_lang(st, update.effective_user)
    current = await chat_settings(st, update.effective_chat.id)
    await update.effective_message.reply_text(keyboards.settings_text(current, lang),
                                              reply_markup=keyboards.settings_keyboard(current, lang))


async def anime(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """``/anime [style]`` as a reply to a photo, in a group or a private chat."""
    st = state(context)
    message = update.effective_message
    asked, style_arg = anime_command(message.text, context.bot.username)
    if not asked:
        return  # /anime@SomeOtherBot
    target = message.reply_to_message
    src = source_of(target) if target else None
    lang = await user_lang(st, update.effective_user)
    if src is None:
        await message.reply_text(t(lang, "anime_needs_photo"), do_quote=True)
        return
    await convert(update, context, [src], target.message_id, style_arg)


async def unknown_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    lang = await user_lang(state(context), update.effective_user)
    await update.effective_message.reply_text(t(lang, "unknown_command"))


async def text_hint(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Text, a sticker, a video... in a private chat: say what the bot takes."""
    lang = await user_lang(state(context), update.effective_user)
    await update.effective_message.reply_text(t(lang, "text_hint"))


# --- photos ----------------------------------------------------------------------

async def private_media(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Any photo or file in a private chat: convert it, or say why not."""
    message = update.effective_message
    if message.media_group_id:
        await state(context).albums.add(message)
        return
    src = source_of(message)
    if src is None:
        lang = await user_lang(state(context), update.effective_user)
        await message.reply_text(t(lang, "not_an_image_file"), do_quote=True)
        return
    _, style = anime_command(message.caption, context.bot.username)
    await convert(update, context, [src], message.message_id, style)


async def group_media(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A photo in a group: converted only when its caption is ``/anime`` for us."""
    message = update.effective_message
    if message.media_group_id:
        await state(context).albums.add(message)  # the album decides once it is complete
        return
    asked, style = anime_command(message.caption, context.bot.username)
    src = source_of(message)
    if asked and src is not None:
        await convert(update, context, [src], message.message_id, style)


async def on_album(st: BotState, messages: list[Message]) -> None:
    """The album collector's callback: answer a whole album as one request."""
    first = messages[0]
    username = first.get_bot().username
    asks = [anime_command(m.caption, username) for m in messages]
    if first.chat.type != "private" and not any(asked for asked, _ in asks):
        return  # a group album nobody asked about
    style_arg = next((s for asked, s in asks if asked and s), None)
    sources = [s for s in (source_of(m) for m in messages) if s is not None]
    if not sources:
        await first.reply_text(t(await user_lang(st, first.from_user), "not_an_image_file"), do_quote=True)
        return
    await request(st, f"album-{first.media_group_id}", first, first.from_user, sources, first.message_id, style_arg)


async def convert(update: Update, context: ContextTypes.DEFAULT_TYPE, sources: list[Source], reply_to: int,
                  style_arg: str | None) -> None:
    await request(state(context), str(update.update_id), update.effective_message, update.effective_user, sources,
                  reply_to, style_arg)


async def request(st: BotState, job_id: str, message: Message, user: User | None, sources: list[Source],
                  reply_to: int, style_arg: str | None) -> None:
    """Hand ``sources`` to the runner in the asked (or the user's) style; the results go under ``reply_to``.

    ``/anime WORD`` with an unknown WORD is answered (under ``message``) with
    the styles there are. A longer text after ``/anime`` is a caption's
    prose, not a style ("/anime my cat"), and gets the user's style.
    """
    lang = await user_lang(st, user)
    style = st.styles.resolve(style_arg) if style_arg else None
    if style_arg and style is None and len((message.text or message.caption or "").split()) == 2:
        await message.reply_text(t(lang, "unknown_style", style=style_arg[:32], styles=", ".join(st.styles.names)),
                                 do_quote=True)
        return
    style = style or await user_style(st, user)
    await st.runner.run(Request(
        job_id=job_id, chat_id=message.chat_id, user_id=user.id if user else 0, reply_to=reply_to, lang=lang,
        style=style, sources=tuple(sources), settings=await chat_settings(st, message.chat_id),
    ))


# --- buttons -------------------------------------------------------------------------

async def button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Inline buttons. The query is answered first, so the client stops its spinner at once."""
    st = state(context)
    query = update.callback_query
    user = query.from_user
    b = keyboards.parse(query.data)
    lang = await user_lang(st, user)
    if b is not None and b.action == "l" and b.value in LANGS:
        await answer_quietly(query)
        await st.cache.set_user_lang(user.id, b.value)
        await query.edit_message_text(t(b.value, "lang_set"))
        return
    if b is not None and b.action == "o" and query.message is not None:
        await answer_quietly(query)
        chat_id = query.message.chat.id
        await st.cache.set_render_pref(chat_id, b.value, int(b.sha_prefix))
        current = await chat_settings(st, chat_id)
        await query.edit_message_text(keyboards.settings_text(current, lang),
                                      reply_markup=keyboards.settings_keyboard(current, lang))
        return
    style = st.styles.resolve(b.value) if b is not None and b.action in "srf" else None
    if style is not None and b.action == "s":
        await answer_quietly(query)
        await st.cache.set_user_style(user.id, style)
        await query.edit_message_text(t(lang, "style_set", style=st.styles.label(style)))
        return
    found = await st.cache.source_of(b.sha_prefix) if style is not None else None
    if found is None or query.message is None:
        await answer_quietly(query, t(lang, "button_expired"), alert=True)
        return
    await answer_quietly(query)
    sha, file_id = found
    message = query.message
    original = getattr(message, "reply_to_message", None)
    await st.runner.run(Request(
        job_id=str(update.update_id), chat_id=message.chat.id, user_id=user.id,
        reply_to=original.message_id if original else message.message_id, lang=lang, style=style,
        sources=(Source(file_id, sha256=sha),), settings=await chat_settings(st, message.chat.id),
        as_document=b.action == "f",
    ))


async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Log what went wrong in one line; the user already got an answer or a polite message."""
    uid = update.update_id if isinstance(update, Update) else "-"
    err = context.error
    log.error("update %s: %s: %s", uid, err.__class__.__name__, err)
