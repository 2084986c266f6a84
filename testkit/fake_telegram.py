"""A fake Telegram Bot API server for end-to-end tests: real HTTP on 127.0.0.1.

It speaks the methods the bot uses with Telegram's JSON shapes, parses
url-encoded and multipart bodies the way Telegram does, and records every
call so tests can assert on what a user would have seen. Tests play the
users: they register files, push updates (photos, documents, commands,
button presses) and wait for the bot's calls.

Point a bot at it with ``base_url=fake.base_url`` and
``base_file_url=fake.file_url`` (python-telegram-bot appends the token).

Given a folder, it answers as Telegram's ``telegram-bot-api`` server run with ``--local`` does:
getFile puts the file on that disk, under the bot's token, and gives its absolute path (no file
is served over HTTP), and files of up to 2000 MB go both ways instead of 20 MB down and 50 MB up.
"""
from __future__ import annotations

import io
import itertools
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import av
from PIL import Image

from testkit.wait import wait_for

TOKEN = "123456789:AAE-fake-Secret_token-for-tests"
BOT_USER = {"id": 123456789, "is_bot": True, "first_name": "Anime", "username": "AnimeTestBot",
            "can_join_groups": True, "can_read_all_group_messages": False, "supports_inline_queries": False}
DOWNLOAD_LIMIT = 20 * 1024 * 1024
UPLOAD_LIMIT = 50 * 1024 * 1024
LOCAL_LIMIT = 2000 * 1024 * 1024  # both ways, for a server run with --local
JSON_FIELDS = {"reply_markup", "reply_parameters", "media", "commands", "scope", "allowed_updates", "entities",
               "results", "button", "menu_button"}
STICKER_SIDE = 512  # a static sticker: one side exactly this, the other at most
STICKER_MAX_BYTES = 512 * 1024
VIDEO_STICKER_MAX_BYTES = 256 * 1024
STICKERS_IN_SET = 120
SET_NAME = re.compile(r"^[A-Za-z](?!.*__)[A-Za-z0-9_]{0,63}\Z")
# An inline result's cached file fields, and the kind of file each must be.
CACHED_FILE_FIELDS = {"photo_file_id": "photo", "mpeg4_file_id": "animation", "video_file_id": "video",
                      "sticker_file_id": "sticker", "document_file_id": "document"}


class ApiError(Exception):
    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


@dataclass
class Call:
    """One Bot API request: its method, its text parameters and its uploaded files."""

    method: str
    params: dict[str, Any]
    files: dict[str, bytes]
    at: float = field(default_factory=time.monotonic)
    result: Any = None


@dataclass(frozen=True)
class Fault:
    """What one call suffers: an API error (with ``retry_after`` for flood control), or, with
    ``code=0``, a connection dropped without an answer, as a network failure looks."""

    code: int = 0
    description: str = ""
    retry_after: int | None = None


DROP = Fault()


def flood(seconds: int = 1) -> Fault:
    return Fault(429, f"Too Many Requests: retry after {seconds}", seconds)


@dataclass
class StoredFile:
    data: bytes
    file_id: str
    unique_id: str
    path: str
    kind: str = ""  # what the bot first sent it as (photo, animation, ...): Telegram never lets that change


class FakeTelegram:
    """The server. Use as a context manager, or ``start()`` and ``stop()``."""

    def __init__(self, missing: tuple[str, ...] = (), host: str = "127.0.0.1", local_dir: Path | None = None,
                 served_at: Path | None = None, after: FakeTelegram | None = None) -> None:
        """``host``: the address to listen on; another than loopback only for containers on an internal
        Docker network, which reach this machine at the network's gateway (tests/deploy/test_docker.py).
        ``local_dir``: be a server in local mode, keeping the files it hands out in this folder;
        ``served_at``: the folder's path as the server's own container sees it (a Docker volume's
        mount point written from this machine), which its getFile gives. ``after``: another fake this one
        takes over a bot from; its update ids and file ids carry on from that one's, as Telegram's are never
        given twice (a bot skips an update id it has seen, and knows a file by its unique id)."""
        self.local_dir = local_dir
        self.served_at = served_at
        # A server in local mode whose data folder the bot does not have (not mounted in the bot's container,
        # or mounted at another path): getFile gives a path the bot cannot read.
        self.unshared = False
        self.download_limit, self.upload_limit = (LOCAL_LIMIT, LOCAL_LIMIT) if local_dir else (DOWNLOAD_LIMIT,
                                                                                                UPLOAD_LIMIT)
        self.missing = set(missing)  # methods to answer 404, as a minimal Bot API would
        self.faults: dict[str, list[Fault]] = {}  # method (or "download") -> what its next calls suffer
        self.blocked: set[int] = set()  # users who blocked the bot: sending to them is Forbidden
        self.chat_admins: dict[int, set[int]] = {}  # group chat id -> its admins' user ids (getChatMember)
        self.webhook: dict[str, Any] = {}
        self.menu_button: dict[str, Any] | None = None  # what setChatMenuButton last set (None: never called)
        # The bot's profile as Telegram keeps it: ("commands", scope type, language code) -> the commands (a chat's
        # scope is "chat:ID"), ("description" or "short_description", "", language code) -> the text; "" is the
        # default's code.
        self.profile: dict[tuple[str, str, str], Any] = {}
        # Called with (method, params) as each request arrives; True drops it unanswered and
        # unrecorded, as if the connection died before Telegram took it (a test's crash point).
        self.intercept: Callable[[str, dict[str, Any]], bool] | None = None
        self.calls: list[Call] = []
        self.downloads: list[str] = []
        self.files: dict[str, StoredFile] = {}
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}
        # Users who opened a private chat with the bot (wrote to it there): only they can own sticker sets.
        self.started: set[int] = set()
        self.sticker_sets: dict[str, dict[str, Any]] = {}  # name -> {"owner", "title", "stickers": [Sticker]}
        self.sticker_uploads: dict[str, int] = {}  # file_id of an uploadStickerFile -> the user it was uploaded for
        self._updates: list[dict[str, Any]] = []
        self.pushed: list[int] = []  # every update id handed out, for tests that wait until all are handled
        self._update_ids = itertools.count(max(after.pushed, default=999) + 1 if after else 1000)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._file_ids = itertools.count(next(after._file_ids) if after else 1)
        self._cond = threading.Condition()
        self._server = _Server((host, 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        port = self._server.server_address[1]
        self.base_url = f"http://{host}:{port}/bot"
        self.file_url = f"http://{host}:{port}/file/bot"

    # --- lifecycle --------------------------------------------------------------

    def start(self) -> "FakeTelegram":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeTelegram":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- playing the users ------------------------------------------------------------

    def store_file(self, data: bytes, suffix: str = ".jpg") -> StoredFile:
        """Keep bytes as Telegram would, under a new file_id, file_unique_id and path."""
        n = next(self._file_ids)
        f = StoredFile(data, f"FILE{n:06d}-{len(data)}", f"U{n:06d}", f"files/file_{n}{suffix}")
        with self._cond:
            self.files[f.file_id] = f
        return f

    def photo_message(self, chat: dict[str, Any], user: dict[str, Any], data: bytes, caption: str | None = None,
                      reply_to: dict[str, Any] | None = None, media_group_id: str | None = None,
                      same_file: StoredFile | None = None, push: bool = True, spoiler: bool = False) -> dict[str, Any]:
        """A user's photo message; ``same_file`` resends an already known photo, as forwarding does.
        With ``push=False`` the message exists but no update carries it (the test delivers it)."""
        f = same_file or self.store_file(data)
        w, h = Image.open(io.BytesIO(f.data)).size
        msg = self._message(chat, user, photo=[_photo_size(f, w, h)])
        if caption is not None:
            msg["caption"] = caption
            if caption.startswith("/"):
                msg["caption_entities"] = [{"type": "bot_command", "offset": 0, "length": len(caption.split()[0])}]
        if reply_to is not None:
            msg["reply_to_message"] = reply_to
        if media_group_id is not None:
            msg["media_group_id"] = media_group_id
        if spoiler:
            msg["has_media_spoiler"] = True
        return self.push({"message": msg}) if push else msg

    def animation_message(self, chat: dict[str, Any], user: dict[str, Any], data: bytes) -> dict[str, Any]:
        """A GIF as Telegram delivers it: a silent MP4 'animation', with the same file as a document."""
        f = self.store_file(data, ".mp4")
        file = {"file_id": f.file_id, "file_unique_id": f.unique_id, "file_name": "clip.gif.mp4",
                "mime_type": "video/mp4", "file_size": len(data)}
        animation = {**file, "width": 320, "height": 240, "duration": 2}
        return self.push({"message": self._message(chat, user, animation=animation, document=file)})

    def clip_message(self, chat: dict[str, Any], user: dict[str, Any], data: bytes, kind: str = "video",
                     caption: str | None = None, reply_to: dict[str, Any] | None = None,
                     push: bool = True) -> dict[str, Any]:
        """A clip as Telegram delivers it: a ``video``, a round ``video_note`` or an ``animation`` (a GIF,
        which Telegram turns into a silent MP4 and also gives as a document), with its size and length."""
        f = self.store_file(data, ".mp4")
        file = {"file_id": f.file_id, "file_unique_id": f.unique_id, "file_size": len(data)}
        w, h, seconds = _clip_shape(data)
        if kind == "video_note":
            content: dict[str, Any] = {"video_note": {**file, "length": w, "duration": seconds}}
        elif kind == "animation":
            doc = {**file, "file_name": "clip.gif.mp4", "mime_type": "video/mp4"}
            content = {"animation": {**doc, "width": w, "height": h, "duration": seconds}, "document": doc}
        else:
            content = {"video": {**file, "width": w, "height": h, "duration": seconds, "mime_type": "video/mp4"}}
        msg = self._message(chat, user, **content)
        if caption is not None:
            msg["caption"] = caption
        if reply_to is not None:
            msg["reply_to_message"] = reply_to
        return self.push({"message": msg}) if push else msg

    def document_message(self, chat: dict[str, Any], user: dict[str, Any], data: bytes, file_name: str,
                         mime_type: str) -> dict[str, Any]:
        f = self.store_file(data, "." + file_name.rsplit(".", 1)[-1])
        doc = {"file_id": f.file_id, "file_unique_id": f.unique_id, "file_name": file_name,
               "mime_type": mime_type, "file_size": len(data)}
        return self.push({"message": self._message(chat, user, document=doc)})

    def text_message(self, chat: dict[str, Any], user: dict[str, Any], text: str,
                     reply_to: dict[str, Any] | None = None) -> dict[str, Any]:
        msg = self._message(chat, user, text=text)
        if text.startswith("/"):
            msg["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
        if reply_to is not None:
            msg["reply_to_message"] = reply_to
        return self.push({"message": msg})

    def press(self, user: dict[str, Any], message: dict[str, Any], data: str) -> dict[str, Any]:
        """A user presses an inline button under ``message`` (one the bot sent)."""
        query = {"id": str(next(self._update_ids)), "from": user, "message": message,
                 "chat_instance": "ci-1", "data": data}
        return self.push({"callback_query": query})

    def inline_query(self, user: dict[str, Any], query: str = "", offset: str = "") -> dict[str, Any]:
        """A user types ``@bot query`` in some chat; ``offset`` asks for a later page."""
        return self.push({"inline_query": {"id": str(next(self._update_ids)), "from": user, "query": query,
                                           "offset": offset, "chat_type": "private"}})

    def push(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Queue an update for getUpdates; returns the message or query it carries."""
        message = payload.get("message") or {}
        if message.get("chat", {}).get("type") == "private" and "from" in message:
            self.started.add(message["from"]["id"])
        with self._cond:
            update = {"update_id": next(self._update_ids), **payload}
            self._updates.append(update)
            self.pushed.append(update["update_id"])
            self._cond.notify_all()
        return next(iter(payload.values()))

    def inject(self, method: str, *faults: Fault) -> None:
        """The next calls of ``method`` ("download" for file downloads) suffer ``faults``, in order."""
        with self._cond:
            self.faults.setdefault(method, []).extend(faults)

    def take_fault(self, method: str) -> Fault | None:
        with self._cond:
            queue = self.faults.get(method)
            return queue.pop(0) if queue else None

    def delete_user_message(self, message: dict[str, Any]) -> None:
        """The user deletes their message (the one the bot would reply to)."""
        with self._cond:
            self.messages.pop((message["chat"]["id"], message["message_id"]), None)

    # --- what the bot did ---------------------------------------------------------------

    def calls_to(self, method: str, chat_id: int | None = None) -> list[Call]:
        with self._cond:
            return [c for c in self.calls if c.method == method
                    and (chat_id is None or str(c.params.get("chat_id")) == str(chat_id))]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 120.0, what: str = "sign of the condition") -> Any:
        """:func:`testkit.wait.wait_for` ``predicate()``, re-checked as each call arrives; returns its value."""
        with self._cond:  # released while waiting; every recorded call wakes it
            return wait_for(predicate, timeout, what, context=lambda: f"calls: {[c.method for c in self.calls]}",
                            interval=0.5, pause=self._cond.wait)

    def sent_file(self, call: Call, field: str) -> bytes:
        """The bytes a user receives from a send call, whether uploaded or sent by file_id."""
        value = call.params.get(field)
        if field in call.files:
            return call.files[field]
        if isinstance(value, str) and value.startswith("attach://"):
            return call.files[value.removeprefix("attach://")]
        return self.files[str(value)].data

    def messages_to(self, chat_id: int) -> list[Call]:
        """Every text message the bot sent to a chat."""
        return self.calls_to("sendMessage", chat_id)

    def replies_to(self, message: dict[str, Any]) -> list[Call]:
        """Every message the bot sent in reply to ``message``."""
        chat_id, mid = message["chat"]["id"], message["message_id"]
        with self._cond:
            return [c for c in self.calls if c.method.startswith("send") and c.method != "sendChatAction"
                    and str(c.params.get("chat_id")) == str(chat_id)
                    and (c.params.get("reply_parameters") or {}).get("message_id") == mid]

    # --- internals: messages ----------------------------------------------------------------

    def _message(self, chat: dict[str, Any], user: dict[str, Any] | None, **content: Any) -> dict[str, Any]:
        with self._cond:
            counter = self._message_ids.setdefault(chat["id"], itertools.count(1))
            msg = {"message_id": next(counter), "date": int(time.time()), "chat": chat, **content}
            if user is not None:
                msg["from"] = user
            self.messages[(chat["id"], msg["message_id"])] = msg
        return msg

    def _bot_message(self, params: dict[str, Any], **content: Any) -> dict[str, Any]:
        chat_id = int(params["chat_id"])
        if chat_id in self.blocked:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        chat = next((m["chat"] for (c, _), m in self.messages.items() if c == chat_id),
                    {"id": chat_id, "type": "private" if chat_id > 0 else "group"})
        msg = self._message(chat, BOT_USER, **content)
        target = (params.get("reply_parameters") or {}).get("message_id")
        if target is not None:
            original = self.messages.get((chat_id, int(target)))
            if original is not None:
                msg["reply_to_message"] = original
            elif not (params.get("reply_parameters") or {}).get("allow_sending_without_reply"):
                raise ApiError(400, "Bad Request: message to be replied not found")
        if "reply_markup" in params:
            _check_web_app_buttons(params["reply_markup"], chat)
            msg["reply_markup"] = params["reply_markup"]
        return msg

    def _media(self, value: Any, files: dict[str, bytes], suffix: str, kind: str = "") -> tuple[StoredFile, bool]:
        """The file a send method refers to, and whether it was uploaded (not a file_id); an upload is
        of the ``kind`` the method sends."""
        if isinstance(value, bytes) or isinstance(value, str) and value.startswith("attach://"):
            uploaded = self.store_file(value if isinstance(value, bytes) else files[value[len("attach://"):]], suffix)
            uploaded.kind = kind
            return uploaded, True
        known = self.files.get(str(value))
        if known is None:
            raise ApiError(400, "Bad Request: wrong file identifier/HTTP URL specified")
        return known, False

    # --- internals: methods ------------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        handler = getattr(self, f"_m_{method}", None)
        if handler is None or method in self.missing:
            raise ApiError(404, "Not Found: method not found")
        with self._cond:
            call = Call(method, params, files)
            if method != "getUpdates":
                self.calls.append(call)
            call.result = handler(params, files)
            self._cond.notify_all()
            return call.result

    def _m_getMe(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return BOT_USER

    def _m_deleteWebhook(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return True

    def _m_setWebhook(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        self.webhook = dict(params)
        return True

    def _m_setChatMenuButton(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        button = params.get("menu_button") or {"type": "default"}
        if button.get("type") == "web_app":
            url = (button.get("web_app") or {}).get("url", "")
            if not button.get("text") or not url.startswith("https://"):
                raise ApiError(400, "Bad Request: BUTTON_URL_INVALID" if button.get("text") else "Bad Request: text empty")
        elif button.get("type") not in ("default", "commands"):
            raise ApiError(400, "Bad Request: unsupported menu button type")
        self.menu_button = button
        return True

    # --- the bot's profile, per language: Telegram's limits, and what was set is what a get returns --------

    @staticmethod
    def _profile_key(what: str, params: dict[str, Any]) -> tuple[str, str, str]:
        code = params.get("language_code") or ""
        if code and not re.fullmatch(r"[a-z]{2}", code):
            raise ApiError(400, "Bad Request: invalid language code specified")
        scope = params.get("scope") or {"type": "default"}
        named = scope["type"] + (f":{scope['chat_id']}" if "chat_id" in scope else "") if what == "commands" else ""
        return what, named, code

    def _m_setMyCommands(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        commands = params.get("commands") or []
        for c in commands:
            if not re.fullmatch(r"[a-z0-9_]{1,32}", c.get("command", "")) or not 1 <= len(c.get("description", "")) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        self.profile[self._profile_key("commands", params)] = [dict(c) for c in commands]
        return True

    def _m_getMyCommands(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return self.profile.get(self._profile_key("commands", params), [])

    def _m_setMyDescription(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        if len(params.get("description") or "") > 512:
            raise ApiError(400, "Bad Request: description is too long")
        self.profile[self._profile_key("description", params)] = params.get("description") or ""
        return True

    def _m_getMyDescription(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return {"description": self.profile.get(self._profile_key("description", params), "")}

    def _m_setMyShortDescription(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        if len(params.get("short_description") or "") > 120:
            raise ApiError(400, "Bad Request: short description is too long")
        self.profile[self._profile_key("short_description", params)] = params.get("short_description") or ""
        return True

    def _m_getMyShortDescription(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return {"short_description": self.profile.get(self._profile_key("short_description", params), "")}

    _m_sendChatAction = _m_deleteWebhook
    _m_answerCallbackQuery = _m_deleteWebhook

    def _m_getUpdates(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        offset = int(params.get("offset") or 0)
        deadline = time.monotonic() + min(float(params.get("timeout") or 0), 5.0)
        with self._cond:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            while not self._updates and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            return list(self._updates[: int(params.get("limit") or 100)])

    def _m_answerInlineQuery(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        """As Telegram checks an answer: at most 50 results, ids unique, cached files known to it."""
        results = params.get("results") or []
        ids = [r.get("id") for r in results]
        if len(results) > 50 or len(set(ids)) != len(ids):
            raise ApiError(400, "Bad Request: RESULTS_TOO_MUCH or RESULT_ID_DUPLICATE")
        for r in results:
            if not any(str(r.get(f)) in self.files for f in CACHED_FILE_FIELDS if f in r):
                raise ApiError(400, "Bad Request: wrong file identifier/HTTP URL specified")
            for name, kind in CACHED_FILE_FIELDS.items():  # a file id is offered only as what it was sent as
                known = self.files.get(str(r.get(name)))
                if known is not None and known.kind not in ("", kind):
                    raise ApiError(400, f"Bad Request: can't use file of type {known.kind} as {kind}")
        return True

    # --- sticker sets, as Telegram checks them -------------------------------------------------

    def _sticker_file(self, data: bytes, fmt: str) -> tuple[int, int]:
        """A sticker's file, its size: a static one WebP or PNG under 512 KB; a video one WebM of VP9,
        at most 3 s and 30 fps, silent, under 256 KB; both 512 px on one side, at most that on the other."""
        if fmt == "video":
            return self._video_sticker(data)
        if fmt != "static":
            raise ApiError(400, "Bad Request: STICKER_FORMAT_UNSUPPORTED")
        try:
            img = Image.open(io.BytesIO(data))
            kind, (w, h) = img.format, img.size
        except Exception:
            raise ApiError(400, "Bad Request: STICKER_FILE_INVALID") from None
        if kind not in ("WEBP", "PNG") or len(data) > STICKER_MAX_BYTES:
            raise ApiError(400, "Bad Request: STICKER_FILE_INVALID")
        if max(w, h) != STICKER_SIDE:
            raise ApiError(400, "Bad Request: STICKER_PNG_DIMENSIONS")
        return w, h

    @staticmethod
    def _video_sticker(data: bytes) -> tuple[int, int]:
        try:
            with av.open(io.BytesIO(data)) as c:
                if "webm" not in c.format.name or not c.streams.video:
                    raise ApiError(400, "Bad Request: STICKER_VIDEO_NOWEBM")
                v = c.streams.video[0]
                w, h = v.codec_context.width, v.codec_context.height
                ok = (v.codec_context.name == "vp9" and not c.streams.audio and len(data) <= VIDEO_STICKER_MAX_BYTES
                      and (c.duration or 0) / av.time_base <= 3.0 + 1e-3 and float(v.average_rate or 0) <= 30.0)
        except av.FFmpegError:
            raise ApiError(400, "Bad Request: STICKER_VIDEO_NOWEBM") from None
        if not ok:
            raise ApiError(400, "Bad Request: STICKER_VIDEO_LONG")
        if max(w, h) != STICKER_SIDE or min(w, h) > STICKER_SIDE:
            raise ApiError(400, "Bad Request: STICKER_VIDEO_DIMENSIONS")
        return w, h

    def _owner(self, params: dict[str, Any]) -> int:
        user_id = int(params["user_id"])
        if user_id not in self.started:
            raise ApiError(400, "Bad Request: PEER_ID_INVALID")
        return user_id

    def _new_sticker(self, value: Any, files: dict[str, bytes], owner: int, set_name: str) -> dict[str, Any]:
        """A set's sticker made of an InputSticker: a file uploaded for its owner, or a new upload."""
        item = json.loads(value) if isinstance(value, str) else value
        if not 1 <= len(item.get("emoji_list") or []) <= 20:
            raise ApiError(400, "Bad Request: STICKER_EMOJI_INVALID")
        ref = item.get("sticker")
        if isinstance(ref, str) and ref.startswith("attach://"):
            data = files[ref[len("attach://"):]]
        elif self.sticker_uploads.get(str(ref)) == owner:
            data = self.files[str(ref)].data
        else:
            raise ApiError(400, "Bad Request: STICKER_FILE_INVALID")
        fmt = item.get("format", "static")
        w, h = self._sticker_file(data, fmt)
        f = self.store_file(data, ".webm" if fmt == "video" else ".webp")  # a set's sticker is a file of its own
        return {"file_id": f.file_id, "file_unique_id": f.unique_id, "type": "regular", "width": w, "height": h,
                "is_animated": False, "is_video": fmt == "video", "emoji": item["emoji_list"][0],
                "set_name": set_name, "file_size": len(data)}

    def _m_uploadStickerFile(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        owner = self._owner(params)
        data = files.get("sticker")
        if data is None:
            raise ApiError(400, "Bad Request: there is no sticker file in the request")
        fmt = str(params.get("sticker_format"))
        self._sticker_file(data, fmt)
        f = self.store_file(data, ".webm" if fmt == "video" else ".webp")
        self.sticker_uploads[f.file_id] = owner
        return {"file_id": f.file_id, "file_unique_id": f.unique_id, "file_size": len(data)}

    def _m_createNewStickerSet(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        owner = self._owner(params)
        name = str(params["name"])
        suffix = f"_by_{BOT_USER['username']}"
        if not SET_NAME.match(name) or not name.lower().endswith(suffix.lower()) or name.endswith("_" + suffix):
            raise ApiError(400, "Bad Request: invalid sticker set name is specified")
        if name.lower() in (n.lower() for n in self.sticker_sets):
            raise ApiError(400, "Bad Request: sticker set name is already occupied")
        if not 1 <= len(str(params.get("title", ""))) <= 64:
            raise ApiError(400, "Bad Request: invalid sticker set title")
        stickers = json.loads(params["stickers"]) if isinstance(params["stickers"], str) else params["stickers"]
        if not 1 <= len(stickers) <= 50:
            raise ApiError(400, "Bad Request: STICKERS_INVALID")
        made = [self._new_sticker(s, files, owner, name) for s in stickers]
        self.sticker_sets[name] = {"owner": owner, "title": params["title"], "stickers": made}
        return True

    def _m_addStickerToSet(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        owner = self._owner(params)
        found = self.sticker_sets.get(str(params["name"]))
        if found is None or found["owner"] != owner:
            raise ApiError(400, "Bad Request: STICKERSET_INVALID")
        if len(found["stickers"]) >= STICKERS_IN_SET:
            raise ApiError(400, "Bad Request: STICKERS_TOO_MUCH")
        found["stickers"].append(self._new_sticker(params["sticker"], files, owner, str(params["name"])))
        return True

    def _m_getStickerSet(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        found = self.sticker_sets.get(str(params["name"]))
        if found is None:
            raise ApiError(400, "Bad Request: STICKERSET_INVALID")
        return {"name": params["name"], "title": found["title"], "sticker_type": "regular",
                "stickers": list(found["stickers"])}

    def _m_deleteStickerSet(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        if self.sticker_sets.pop(str(params["name"]), None) is None:
            raise ApiError(400, "Bad Request: STICKERSET_INVALID")
        return True

    def _m_sendSticker(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        f, _ = self._media(files.get("sticker", params.get("sticker")), files, ".webp", "sticker")
        video = f.data[:4] == b"\x1a\x45\xdf\xa3"  # Matroska/WebM
        w, h = self._sticker_file(f.data, "video" if video else "static")
        set_name = next((n for n, s in self.sticker_sets.items()
                         if any(x["file_id"] == f.file_id for x in s["stickers"])), None)
        sticker = {"file_id": f.file_id, "file_unique_id": f.unique_id, "type": "regular", "width": w, "height": h,
                   "is_animated": False, "is_video": video, "file_size": len(f.data)}
        if set_name:
            sticker["set_name"] = set_name
        return self._bot_message(params, sticker=sticker)

    def _m_getChatMember(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        chat_id, user_id = int(params["chat_id"]), int(params["user_id"])
        status = "administrator" if user_id in self.chat_admins.get(chat_id, set()) else "member"
        user = {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}
        if status == "administrator":
            return {"status": status, "user": user, "can_be_edited": False, "is_anonymous": False,
                    "can_manage_chat": True, "can_delete_messages": True, "can_manage_video_chats": True,
                    "can_restrict_members": True, "can_promote_members": False, "can_change_info": True,
                    "can_invite_users": True, "can_post_stories": False, "can_edit_stories": False,
                    "can_delete_stories": False}
        return {"status": status, "user": user}

    def _m_getFile(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        f = self.files.get(str(params.get("file_id")))
        if f is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        if len(f.data) > self.download_limit:
            raise ApiError(400, "Bad Request: file is too big")
        path = self._on_disk(f) if self.local_dir is not None else f.path
        return {"file_id": f.file_id, "file_unique_id": f.unique_id, "file_size": len(f.data), "file_path": path}

    def _on_disk(self, f: StoredFile) -> str:
        """Where a server in local mode keeps a file it was asked for, under the bot's token, as an absolute
        path; an unshared one's is on a disk of its own."""
        if self.unshared:
            return f"/var/lib/telegram-bot-api/{TOKEN}/{f.path}"
        assert self.local_dir is not None
        local = self.local_dir / TOKEN / f.path
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(f.data)
        return str(self.served_at / TOKEN / f.path) if self.served_at else str(local.resolve())

    def _m_sendMessage(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return self._bot_message(params, text=params["text"])

    def _m_editMessageText(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        msg = self.messages.get((int(params["chat_id"]), int(params["message_id"])))
        if msg is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if "text" not in msg:  # a photo: its caption is edited with editMessageCaption
            raise ApiError(400, "Bad Request: there is no text in the message to edit")
        if msg.get("text") == params["text"]:
            raise ApiError(400, "Bad Request: message is not modified")
        msg["text"] = params["text"]
        return msg

    def _m_editMessageCaption(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        msg = self.messages.get((int(params["chat_id"]), int(params["message_id"])))
        if msg is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if "text" in msg:
            raise ApiError(400, "Bad Request: there is no caption in the message to edit")
        msg["caption"] = params.get("caption", "")
        if "reply_markup" in params:
            msg["reply_markup"] = params["reply_markup"]
        else:  # an edit without a keyboard removes the one there was, as Telegram does
            msg.pop("reply_markup", None)
        return msg

    def _m_deleteMessage(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        if self.messages.pop((int(params["chat_id"]), int(params["message_id"])), None) is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        return True

    def _m_sendPhoto(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        f, _ = self._media(files.get("photo", params.get("photo")), files, ".jpg", "photo")
        w, h = Image.open(io.BytesIO(f.data)).size
        extra = {"caption": params["caption"]} if params.get("caption") else {}
        return self._bot_message(params, photo=[_photo_size(f, w, h)], **extra)

    def _m_sendDocument(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        f, _ = self._media(files.get("document", params.get("document")), files, ".jpg", "document")
        return self._bot_message(params, document={"file_id": f.file_id, "file_unique_id": f.unique_id,
                                                   "file_size": len(f.data), "file_name": "anime.jpg"})

    def _sent_clip(self, params: dict[str, Any], files: dict[str, bytes], field: str) -> Any:
        f, _ = self._media(files.get(field, params.get(field)), files, ".mp4", field)
        w, h, seconds = _clip_shape(f.data)
        body = {"file_id": f.file_id, "file_unique_id": f.unique_id, "file_size": len(f.data), "duration": seconds}
        body.update({"length": w} if field == "video_note" else {"width": w, "height": h})
        extra = {"caption": params["caption"]} if params.get("caption") else {}
        return self._bot_message(params, **{field: body}, **extra)

    def _m_sendVideo(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return self._sent_clip(params, files, "video")

    def _m_sendAnimation(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return self._sent_clip(params, files, "animation")

    def _m_sendVideoNote(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return self._sent_clip(params, files, "video_note")

    def _m_sendMediaGroup(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        group = f"MG{next(self._file_ids)}"
        out = []
        for item in params["media"]:
            f, _ = self._media(item["media"], files, ".jpg", "photo")
            w, h = Image.open(io.BytesIO(f.data)).size
            out.append(self._bot_message(params, photo=[_photo_size(f, w, h)], media_group_id=group))
        return out

    # --- internals: HTTP ------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _drop(self) -> None:
                """Hang up without an answer."""
                self.close_connection = True

            def do_GET(self) -> None:  # file downloads
                prefix = f"/file/bot{TOKEN}/"
                path = urllib.parse.unquote(self.path)
                if not path.startswith(prefix) or fake.local_dir is not None:
                    return self._reply(404, b"not found", "text/plain")
                wanted = path[len(prefix):]
                f = next((f for f in list(fake.files.values()) if f.path == wanted), None)
                if f is None:
                    return self._reply(404, b"not found", "text/plain")
                if fake.take_fault("download") is not None:
                    return self._drop()
                with fake._cond:
                    fake.downloads.append(wanted)
                self._reply(200, f.data, "application/octet-stream")

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size)
                if size > fake.upload_limit:  # what the server takes in one request, files and all
                    return self._reply(413, b'{"ok":false,"error_code":413,"description":"Request Entity Too Large"}')
                prefix = "/bot"
                if not self.path.startswith(prefix) or "/" not in self.path[len(prefix):]:
                    return self._reply(404, b'{"ok":false,"error_code":404,"description":"Not Found"}')
                token, method = self.path[len(prefix):].split("/", 1)
                if token != TOKEN:
                    return self._reply(401, b'{"ok":false,"error_code":401,"description":"Unauthorized"}')
                params, files = _parse_body(self.headers.get("Content-Type", ""), body)
                if fake.intercept is not None and fake.intercept(method, params):
                    return self._drop()
                if (fault := fake.take_fault(method)) is not None:
                    if not fault.code:
                        return self._drop()
                    out: dict[str, Any] = {"ok": False, "error_code": fault.code, "description": fault.description}
                    if fault.retry_after is not None:
                        out["parameters"] = {"retry_after": fault.retry_after}
                    return self._reply(fault.code, json.dumps(out).encode())
                try:
                    result = fake.call(method, params, files)
                    out = {"ok": True, "result": result}
                    status = 200
                except ApiError as exc:
                    out = {"ok": False, "error_code": exc.code, "description": exc.description}
                    status = exc.code
                self._reply(status, json.dumps(out).encode())

        return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-reply (a bot shutting down during a long poll) is not an error."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _check_web_app_buttons(markup: Any, chat: dict[str, Any]) -> None:
    """Telegram takes a Mini App button under a message in private chats only, and opens https:// pages only."""
    for row in (markup or {}).get("inline_keyboard", []) if isinstance(markup, dict) else []:
        for button in row:
            if "web_app" not in button:
                continue
            if chat.get("type") != "private":
                raise ApiError(400, "Bad Request: BUTTON_TYPE_INVALID")
            if not str(button["web_app"].get("url", "")).startswith("https://"):
                raise ApiError(400, "Bad Request: BUTTON_URL_INVALID")


def _clip_shape(data: bytes) -> tuple[int, int, int]:
    """A clip's width, height and whole seconds, as Telegram reports them (0s for what is no clip)."""
    try:
        with av.open(io.BytesIO(data)) as c:
            v = c.streams.video[0]
            seconds = float(v.duration * v.time_base) if v.duration else (c.duration or 0) / av.time_base
            return v.codec_context.width, v.codec_context.height, max(1, round(seconds))
    except (av.FFmpegError, IndexError, ValueError):
        return 0, 0, 0


def _photo_size(f: StoredFile, w: int, h: int) -> dict[str, Any]:
    return {"file_id": f.file_id, "file_unique_id": f.unique_id, "width": w, "height": h, "file_size": len(f.data)}


def _parse_body(ctype: str, body: bytes) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Parameters and files of a Bot API request, as Telegram reads them."""
    params: dict[str, Any] = {}
    files: dict[str, bytes] = {}
    if ctype.startswith("multipart/form-data"):
        message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if part.get_filename() is not None:
                files[name] = payload
            else:
                params[name] = payload.decode()
    elif ctype.startswith("application/json"):
        params = json.loads(body or b"{}")
    else:
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode(), keep_blank_values=True).items()}
    for key in JSON_FIELDS & params.keys():
        if isinstance(params[key], str):
            params[key] = json.loads(params[key])
    for key, value in list(params.items()):
        if isinstance(value, str) and value in ("true", "false"):
            params[key] = value == "true"
    return params, files
