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
from telegram.constants import ChatMemberStatus
from telegram.error import Forbidden, TelegramError
from telegram.ext import ApplicationHandlerStop, ContextTypes

from bot import keyboards
from bot.access import Access
from bot.albums import AlbumCollector
from bot.i18n import LANGS, pick_lang, t
from bot.jobs import JobRunner
from bot.requests import Request, Source
from bot.styles import Styles
from inference.pipeline import ConvertSettings
from storage.buttons import ResultButtons
from storage.cache import Cache

log = logging.getLogger("animebot.handlers")

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".gif", ".heic", ".jfif")
ANIME_COMMAND = re.compile(r"^/anime(?:@(\w+))?(?=\s|$)(?:\s+(\S+))?", re.IGNORECASE)


@dataclass
class BotState:
    """What every handler needs, kept in ``application.bot_data``."""

    runner: JobRunner
    cache: Cache
    buttons: ResultButtons
    styles: Styles
    album_wait_s: float
    access: Access = field(default_factory=Access)
    albums: AlbumCollector = field(init=False)
    pressing: set[tuple[int, str]] = field(default_factory=set)  # (chat, button) presses being answered

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
    album_part = message.message_id if message.media_group_id else None
    if message.photo:
        p = message.photo[-1]
        return Source(p.file_id, p.file_unique_id, p.file_size, message_id=album_part,
                      spoiler=bool(message.has_media_spoiler))
    doc = message.document
    if doc is None or message.animation is not None:  # a GIF Telegram turned into an MP4 is not an image
        return None
    mime = doc.mime_type or "application/octet-stream"
    if mime.startswith("image/") or mime == "application/octet-stream" or \
            (doc.file_name or "").lower().endswith(IMAGE_SUFFIXES):
        return Source(doc.file_id, doc.file_unique_id, doc.file_size, message_id=album_part)
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
        t(lang, "style_prompt", style=st.styles.label(current)),
        reply_markup=keyboards.style_keyboard(st.styles, current, update.effective_user.id))


async def lang_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    st = state(context)
    lang = await user_lang(st, update.effective_user)
    await update.effective_message.reply_text(t(lang, "lang_prompt"),
                                              reply_markup=keyboards.lang_keyboard(update.effective_user.id))


async def settings_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """This chat's drawing settings; in a group only its admins get the buttons to change them."""
    st = state(context)
    lang = await user_lang(st, update.effective_user)
    chat = update.effective_chat
    current = await chat_settings(st, chat.id)
    text = keyboards.settings_text(current, lang)
    if await may_configure(st, context, chat.id, update.effective_user):
        await update.effective_message.reply_text(text, reply_markup=keyboards.settings_keyboard(current, lang))
    else:
        await update.effective_message.reply_text(f"{text}\n\n{t(lang, 'settings_admins_only')}")


async def may_configure(st: BotState, context: ContextTypes.DEFAULT_TYPE, chat_id: int, user: User | None) -> bool:
    """Whether ``user`` may change this chat's settings: anyone in a private chat, a group's
    admins (Telegram's convention for group configuration) and the bot's admins."""
    if chat_id > 0 or user is None:
        return user is not None
    if st.access.is_admin(user.id):
        return True
    try:
        member = await context.bot.get_chat_member(chat_id, user.id)
    except TelegramError as exc:
        log.info("getChatMember in chat %s failed (%s); settings left as they are", chat_id, exc.message)
        return False
    return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)


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
        what = "animation_later" if message.animation is not None else "not_an_image_file"
        await message.reply_text(t(lang, what), do_quote=True)
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
    """The album collector's callback: answer the album's parts that came together as one request.

    Telegram may deliver an album's parts seconds apart, so one album can
    come in several batches; each part is taken on once (the journal keeps
    which), and a group album asked for by the caption of one part has its
    later parts drawn too, in the same style.
    """
    group = messages[0].media_group_id
    assert group is not None
    taken, album_style = await st.runner.album_taken(messages[0].chat_id, group)
    fresh = [m for m in messages if m.message_id not in taken]
    if not fresh:
        log.info("album %s: every part already taken on; its updates came again", group)
        return
    first = fresh[0]
    asks = [anime_command(m.caption, first.get_bot().username) for m in fresh]
    if first.chat.type != "private" and not taken and not any(asked for asked, _ in asks):
        return  # a group album nobody asked about
    style_arg = next((s for asked, s in asks if asked and s), None) or album_style
    sources = [s for s in (source_of(m) for m in fresh) if s is not None]
    if not sources:
        await first.reply_text(t(await user_lang(st, first.from_user), "not_an_image_file"), do_quote=True)
        return
    await request(st, f"album-{group}-{first.message_id}", first, first.from_user, sources, first.message_id,
                  style_arg, album=group)


async def convert(update: Update, context: ContextTypes.DEFAULT_TYPE, sources: list[Source], reply_to: int,
                  style_arg: str | None) -> None:
    await request(state(context), str(update.update_id), update.effective_message, update.effective_user, sources,
                  reply_to, style_arg)


async def request(st: BotState, job_id: str, message: Message, user: User | None, sources: list[Source],
                  reply_to: int, style_arg: str | None, album: str | None = None) -> None:
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
        style=style, sources=tuple(sources), settings=await chat_settings(st, message.chat_id), album=album,
    ))


# --- buttons -------------------------------------------------------------------------

async def redraw_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """``r:STYLE:ID``: draw the result's photo again in another style, with the result's settings."""
    style_arg, result_id = context.matches[0].groups() if context.matches else (None, "")
    await result_button(update, context, result_id, style_arg, as_document=False)


async def full_size_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """``f:ID``: the result itself, as a file."""
    result_id = context.matches[0].group(1) if context.matches else ""
    await result_button(update, context, result_id, None, as_document=True)


async def result_button(update: Update, context: ContextTypes.DEFAULT_TYPE, result_id: str, style_arg: str | None,
                        as_document: bool) -> None:
    """Act on the result a button sits under, as it was drawn, and only in the chat it was shown in.

    A second press while the first is being answered is told so, and costs nothing.
    """
    st = state(context)
    query = update.callback_query
    message = query.message
    press = (message.chat.id if message is not None else 0, str(query.data))
    if press in st.pressing:  # checked before any await: ten presses at once are ten updates at once
        await answer_quietly(query, t(await user_lang(st, query.from_user), "already_coming"))
        return
    st.pressing.add(press)
    try:
        lang = await user_lang(st, query.from_user)
        shown = await st.buttons.find(result_id, message.chat.id) if message is not None else None
        style = st.styles.resolve(style_arg or shown.style) if shown is not None else None
        file_id = await st.cache.file_id_of(shown.content_sha256) if shown is not None else None
        if message is None or shown is None or style is None or file_id is None:
            await answer_quietly(query, t(lang, "button_expired"), alert=True)
            return
        original = getattr(message, "reply_to_message", None)
        await st.runner.run(Request(
            job_id=str(update.update_id), chat_id=message.chat.id, user_id=query.from_user.id,
            reply_to=original.message_id if original else message.message_id, lang=lang, style=style,
            sources=(Source(file_id, sha256=shown.content_sha256),), settings=shown.settings,
            as_document=as_document, query_id=query.id,
        ))
    finally:
        st.pressing.discard(press)


async def style_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """``s:STYLE:UID``: set the default style of the user the menu was sent to."""
    st = state(context)
    query = update.callback_query
    lang = await user_lang(st, query.from_user)
    name, owner = context.matches[0].groups() if context.matches else ("", "0")
    style = st.styles.resolve(name)
    if await own_menu_choice(query, lang, style is not None, owner, "/style"):
        assert style is not None
        await st.cache.set_user_style(query.from_user.id, style)
        await query.edit_message_text(t(lang, "style_set", style=st.styles.label(style)))


async def lang_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """``l:LANG:UID``: set the language of the user the menu was sent to."""
    st = state(context)
    query = update.callback_query
    lang = await user_lang(st, query.from_user)
    code, owner = context.matches[0].groups() if context.matches else ("", "0")
    if await own_menu_choice(query, lang, code in LANGS, owner, "/lang"):
        await st.cache.set_user_lang(query.from_user.id, code)
        await query.edit_message_text(t(code, "lang_set"))


async def own_menu_choice(query: CallbackQuery, lang: str, valid: bool, owner: str, command: str) -> bool:
    """Answer a menu press; True if it is a valid choice by the person the menu was sent to.
    Anyone else in a group gets an alert, and the owner's menu stays as it is."""
    if not valid:
        await answer_quietly(query, t(lang, "button_expired"), alert=True)
        return False
    if int(owner) != query.from_user.id:
        await answer_quietly(query, t(lang, "not_your_menu", command=command), alert=True)
        return False
    await answer_quietly(query)
    return True


async def option_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """``o:OPTION:VALUE``: change one of this chat's drawing settings (a group's admins only)."""
    st = state(context)
    query = update.callback_query
    lang = await user_lang(st, query.from_user)
    name, value = context.matches[0].groups() if context.matches else ("", "")
    if query.message is None or (name, value) not in keyboards.OPTION_VALUES:
        await answer_quietly(query, t(lang, "button_expired"), alert=True)
        return
    chat_id = query.message.chat.id
    if not await may_configure(st, context, chat_id, query.from_user):
        await answer_quietly(query, t(lang, "settings_admins_only"), alert=True)
        return
    await answer_quietly(query)
    await st.cache.set_render_pref(chat_id, name, int(value))
    current = await chat_settings(st, chat_id)
    with contextlib.suppress(TelegramError):  # pressed twice: "message is not modified"
        await query.edit_message_text(keyboards.settings_text(current, lang),
                                      reply_markup=keyboards.settings_keyboard(current, lang))


async def unknown_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Any other callback data: a button of an older version, or forged."""
    query = update.callback_query
    await answer_quietly(query, t(await user_lang(state(context), query.from_user), "button_expired"), alert=True)


async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    """What a handler raised. Telegram's answers (a user who blocked the bot, a deleted chat,
    flood control on a command's reply) are one line; anything else is a bug and keeps its traceback."""
    uid = update.update_id if isinstance(update, Update) else "-"
    err = context.error
    if isinstance(err, Forbidden):
        log.warning("update %s: cannot answer, Telegram says %s", uid, err.message)
    elif isinstance(err, TelegramError):
        log.warning("update %s: Telegram refused: %s: %s", uid, err.__class__.__name__, err.message)
    else:
        log.error("update %s: unexpected error", uid, exc_info=err)
