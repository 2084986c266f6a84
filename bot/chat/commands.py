"""Commands and the other updates that get a direct reply: the gate (blocked users, the allowlist), /start, /help,
/style, /lang, /settings, /stats, hints, and the error handler.

Handlers stay small on purpose. Photos are bot/chat/photos.py's, button presses
bot/chat/presses.py's; deciding *whether* to draw happens there, *how* is bot.flow.runner'.
"""
from __future__ import annotations

import contextlib
import logging
import time

from telegram import InlineQueryResultsButton, Update
from telegram.error import Forbidden, TelegramError
from telegram.ext import ApplicationHandlerStop

from bot.chat import keyboards
from bot.chat.context import Context, Incoming, answer_quietly
from bot.chat.needs import Choices, Drawings, Rights, Stats
from bot.words.catalogue import t
from bot.chat.photos import anime_command
from bot.flow.kinds.registry import PREVIEW
from bot.flow.previews import PREVIEW_SETTINGS
from bot.flow.requests import Request, Source
from storage.database import Unwritable

log = logging.getLogger("animebot.handlers")


# --- access ---------------------------------------------------------------------

async def gate(update: Update, context: Context) -> None:
    """Runs before every other handler: refuse a blocked user, and in allowlist mode everyone else, politely
    (bot/flow/access.py decides).

    Only updates addressed to the bot get the refusal (a private message,
    ``/anime`` in a group, a button, an inline query); a group's other photos are ignored.
    """
    rights = context.bot_data.get(Rights)
    user, chat = update.effective_user, update.effective_chat
    why = rights.access.refusal(user.id if user else None, chat.id if chat else None)
    if why is None or (why == "blocked" and _about_their_data(update)):
        return
    log.info("update %s: user %s in chat %s refused (%s)", update.update_id,
             user.id if user else "-", chat.id if chat else "-", why)
    lang = await rights.choices.lang(user)
    if update.callback_query:
        await answer_quietly(update.callback_query, t(lang, why), alert=True)
    elif update.inline_query:  # an empty list, with the sentence on its button
        with contextlib.suppress(TelegramError):
            await update.inline_query.answer([], cache_time=10, is_personal=True,
                                             button=InlineQueryResultsButton(t(lang, why), start_parameter="inline"))
    elif (message := update.effective_message) is not None:
        asked = anime_command(message.text or message.caption, context.bot.username)[0]
        if message.chat.type == "private" or asked:
            await message.reply_text(t(lang, why), do_quote=True)
    raise ApplicationHandlerStop


def _about_their_data(update: Update) -> bool:
    """What a blocked user may still do in their private chat: read what is kept (/privacy) and have it deleted
    (/forget, and its buttons). A block stops the bot drawing for them, not their say over their own data."""
    if (query := update.callback_query) is not None:
        return bool(keyboards.FORGET_YES.match(query.data or "") or keyboards.FORGET_NO.match(query.data or ""))
    message = update.effective_message
    if message is None or message.chat.type != "private" or not message.text:
        return False
    return message.text.split()[0].split("@")[0] in ("/forget", "/privacy")


async def stats_command(incoming: Incoming, stats: Stats) -> None:
    """``/stats``, for admins: the queue, throughput, cache hit rate and the commonest problems."""
    lang = incoming.lang
    if not stats.access.is_admin(incoming.user.id):
        await incoming.message.reply_text(t(lang, "admins_only"))
        return
    now = time.time()
    journal, pool = stats.journal, stats.pool
    hour, ten_min, day = [await journal.counts_since(now - span) for span in (3600, 600, 86400)]
    counters = await stats.counters.all()
    hits, converted = counters.get("cache_hits", 0), counters.get("converted", 0)
    problems = ", ".join(f"{code} {n}" for code, n in day.top_outcomes) or t(lang, "none")
    by_user = ", ".join(f"{uid} {n}" for uid, n in pool.queue.by_user().most_common(10)) or t(lang, "none")
    workers = "; ".join(f"{w.name} [{','.join(w.styles)}; {w.engine}{'; drawing' if w.busy else ''}]"
                        for w in pool.workers()) or t(lang, "none")
    await incoming.message.reply_text(t(
        lang, "stats", waiting=pool.waiting, running=pool.running, health=pool.healthy()[1], by_user=by_user,
        workers=workers, done_hour=hour.photos_done,
        per_min=ten_min.photos_done / 10, jobs_day=sum(day.by_state.values()), done_day=day.photos_done,
        failed_day=day.by_state.get("failed", 0), cancelled_day=day.by_state.get("cancelled", 0),
        refused_day=day.by_state.get("refused", 0), hits=hits,
        lookups=hits + converted, hit_rate=100 * hits / max(1, hits + converted), problems=problems,
    ))


# --- commands ------------------------------------------------------------------

async def start(incoming: Incoming) -> None:
    """The welcome; opened from a group's sticker link (``/start sticker``), where to go next as well."""
    text = t(incoming.lang, "start")
    if (incoming.message.text or "").split()[1:] == ["sticker"]:
        text = t(incoming.lang, "start_sticker") + "\n\n" + text
    await incoming.message.reply_text(text)


async def help_command(incoming: Incoming, choices: Choices) -> None:
    lang = incoming.lang
    await incoming.message.reply_text(t(lang, "help", styles=choices.styles.listed(lang)))


async def about(incoming: Incoming, choices: Choices) -> None:
    """Credits: each installed style by its name, with who made it and on what terms."""
    styles, lang = choices.styles, incoming.lang
    models = "\n".join(t(lang, "about_style", name=styles.display(n, lang), command=n,
                         credits=e.credits or e.label, license=e.license)
                       for n in styles.ordered for e in [styles.entry(n)])
    others = "\n".join(f"• {styles.display(e.name, lang)}: {e.credits or e.label}; {e.license}" for e in styles.others)
    await incoming.message.reply_text(t(lang, "about", models=models, others=others or "-"))


async def style_command(incoming: Incoming, drawings: Drawings) -> None:
    """The style menu: a picture of every style drawn on the sample photo, with a button per style
    (drawn by the workers the first time, sent by file_id after); without a sample, a text list."""
    message, user, lang = incoming.message, incoming.user, incoming.lang
    choices, styles = drawings.choices, drawings.choices.styles
    current = await choices.style(user)
    if styles.sample is not None and styles.sample_sha256:
        await drawings.runner.run(Request(
            job_id=str(incoming.update_id), chat_id=message.chat_id, user_id=user.id, reply_to=message.message_id,
            lang=lang, style=current, styles=tuple(styles.ordered), kind=PREVIEW.name, settings=PREVIEW_SETTINGS,
            sources=(Source("", sha256=styles.sample_sha256, sample=True),),
        ))
        return
    own = await choices.users.last_photo(user.id) is not None
    await message.reply_text(keyboards.style_menu_text(styles, current, lang, own),
                             reply_markup=keyboards.style_keyboard(styles, current, user.id, lang, own))


async def lang_command(incoming: Incoming) -> None:
    await incoming.message.reply_text(t(incoming.lang, "lang_prompt"),
                                      reply_markup=keyboards.lang_keyboard(incoming.user.id))


async def settings_command(incoming: Incoming, rights: Rights) -> None:
    """This chat's drawing settings; in a group only its admins get the buttons to change them."""
    lang, chat = incoming.lang, incoming.chat
    current = await rights.choices.settings(chat.id)
    text = keyboards.settings_text(current, lang)
    if await rights.may_configure(incoming.bot, chat.id, incoming.user):
        own = chat.id if chat.type == "private" else None  # deleting one's data is not a group's setting
        await incoming.message.reply_text(text, reply_markup=keyboards.settings_keyboard(current, lang, own))
    else:
        await incoming.message.reply_text(f"{text}\n\n{t(lang, 'settings_admins_only')}")


async def unknown_command(incoming: Incoming) -> None:
    await incoming.message.reply_text(t(incoming.lang, "unknown_command"))


async def text_hint(incoming: Incoming) -> None:
    """Text, a sticker, a video... in a private chat: say what the bot takes."""
    await incoming.message.reply_text(t(incoming.lang, "text_hint"))


# --- errors --------------------------------------------------------------------------

async def on_error(update: object, context: Context) -> None:
    """What a handler raised. Telegram's answers (a user who blocked the bot, a deleted chat,
    flood control on a command's reply) and a database that cannot be written are one line; anything
    else is a bug and keeps its traceback."""
    uid = update.update_id if isinstance(update, Update) else "-"
    err = context.error
    if isinstance(err, Forbidden):
        log.warning("update %s: cannot answer, Telegram says %s", uid, err.message)
    elif isinstance(err, Unwritable):  # the database said why, once
        log.warning("update %s: not handled: the database cannot be written", uid)
    elif isinstance(err, TelegramError):
        log.warning("update %s: Telegram refused: %s: %s", uid, err.__class__.__name__, err.message)
    else:
        log.error("update %s: unexpected error", uid, exc_info=err)
