"""The bot's replies to a user's message, picked out of the fake Bot API's recorded calls.

A reply is a send call threaded to the message (``reply_parameters``). Some replies are status
messages, which the bot edits and removes as the work goes on ("In queue…", "Drawing…", an
album's progress), or the row of buttons under an album; the others are answers: the result
(a photo, an album, a clip, a file) or a sentence (a refusal, an error).
"""
from __future__ import annotations

from typing import Any

from testkit.fake_telegram import Call, FakeTelegram

# The starts of the status messages (bot/words/locales/animebot.pot, English): shown while the work goes on, then removed.
STATUS = ("In queue", "Drawing", "Album of", "Making the HD")
# ...and what else is said in reply without being an answer: the rows of buttons under an album.
NOT_ANSWERS = STATUS + ("Full-size files",)
# The send methods that can carry an answer, and the word each answer is known by.
ANSWERS = {"sendPhoto": "photo", "sendMediaGroup": "album", "sendVideo": "video", "sendAnimation": "animation",
           "sendVideoNote": "video_note", "sendDocument": "document", "sendMessage": None}


def is_status(call: Call) -> bool:
    return call.method == "sendMessage" and str(call.params.get("text", "")).startswith(STATUS)


def is_answer(call: Call) -> bool:
    return call.method in ANSWERS and not (call.method == "sendMessage"
                                           and str(call.params.get("text", "")).startswith(NOT_ANSWERS))


def answers(fake: FakeTelegram, message: dict[str, Any], *methods: str) -> list[Call]:
    """The bot's answers to ``message`` so far, in order, status messages aside; only calls of
    ``methods`` when given (default: every method in :data:`ANSWERS`)."""
    wanted = methods or tuple(ANSWERS)
    return [c for c in fake.replies_to(message) if c.method in wanted and is_answer(c)]


def label(call: Call) -> str:
    """The kind of a result ('photo', 'album', 'video', 'animation', 'video_note', 'document'), or a sentence's text."""
    return ANSWERS.get(call.method) or str(call.params.get("text", ""))


def labels(fake: FakeTelegram, message: dict[str, Any], *methods: str) -> list[str]:
    """:func:`answers`, each as its :func:`label`: ``["photo"]`` is one picture and nothing else."""
    return [label(c) for c in answers(fake, message, *methods)]


def first_answer(fake: FakeTelegram, message: dict[str, Any], *methods: str, timeout: float = 300) -> Call:
    """Wait for the bot's first answer to ``message`` (of ``methods``, when given) and return it."""
    return fake.wait_for(lambda: answers(fake, message, *methods), timeout, f"answer to message {message['message_id']}")[0]


def final_answer(fake: FakeTelegram, message: dict[str, Any], timeout: float = 300) -> str:
    """'photo', or the text of the bot's first answer to ``message`` (a picture or a sentence)."""
    return label(first_answer(fake, message, "sendPhoto", "sendMessage", timeout=timeout))


def buttons(call: Call) -> list[str]:
    """The callback data of every inline button under a sent message, row by row."""
    return [b["callback_data"] for row in call.params["reply_markup"]["inline_keyboard"] for b in row]


def album_files(fake: FakeTelegram, album: Call) -> list[tuple[str, bytes]]:
    """Each item of a sendMediaGroup call: its caption and the bytes a user receives."""
    return [(item.get("caption", ""), fake.sent_file(Call("x", {"m": item["media"]}, album.files), "m"))
            for item in album.params["media"]]


def photos_sent(fake: FakeTelegram, chat_id: int) -> list[bytes]:
    """Every anime picture the chat received, single or in albums, in order."""
    out = []
    for call in fake.calls:
        if str(call.params.get("chat_id")) != str(chat_id):
            continue
        if call.method == "sendPhoto":
            out.append(fake.sent_file(call, "photo"))
        elif call.method == "sendMediaGroup":
            out.extend(data for _, data in album_files(fake, call))
    return out


def drawn(fake: FakeTelegram, chat: dict[str, Any], user: dict[str, Any], data: bytes, **kw: Any
          ) -> tuple[dict[str, Any], Call]:
    """A user sends a photo and gets it back drawn."""
    photo = fake.photo_message(chat, user, data, **kw)
    return photo, first_answer(fake, photo, "sendPhoto", timeout=120)


def text_after(fake: FakeTelegram, chat_id: int, before: int, starts: str, method: str = "sendMessage") -> Call:
    """The first message (or edit, with ``method``) to ``chat_id`` after its first ``before`` that starts with ``starts``."""
    return fake.wait_for(lambda: [c for c in fake.calls_to(method, chat_id)[before:]
                                  if str(c.params.get("text", "")).startswith(starts)], 60, starts)[0]
