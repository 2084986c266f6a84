"""Reading a bot's home as someone checking a /forget would: every file, every row of every table.

After a user is forgotten, no file under the bot's home (its models and compiled exports aside)
may hold the bytes of their result, and no database row may name their photo, their result or
them. The rows are read with SQLite; the files, the database's among them, byte by byte, so a
deleted row still lying in a free page or in the write-ahead log counts too.
"""
from __future__ import annotations

import base64
import contextlib
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from testkit.fake_telegram import Call, FakeTelegram
from testkit.replies import buttons, text_after

NOT_USERS_DATA = ("models", "cache")  # installed models and their exports, shared between test bots
# The tiny bot the /forget tests serve, with an admin and a daily quota of its own (also the bot of
# tests that forget a user after other things: stickers, inline mode, the Mini App's neighbours).
ADMIN = 770009001
QUOTA = 3
BOT_ENV = {"ANIMEBOT_STYLE": "tiny", "ANIMEBOT_BACKEND": "onnxruntime", "ANIMEBOT_ADMINS": str(ADMIN),
           "ANIMEBOT_DAILY_QUOTA": str(QUOTA), "ANIMEBOT_RATE_PER_MINUTE": "0"}


@dataclass(frozen=True)
class Traces:
    """What names one user's photo and its result: strings to look for, and the result's bytes."""

    texts: tuple[str, ...]  # file ids, the photo's hash
    user_id: int
    result: bytes

    def named_in(self, value: str) -> list[str]:
        found = [text for text in self.texts if text in value]
        if re.search(rf"(?<![\w.]){self.user_id}(?![\w.])", value):
            found.append(f"user {self.user_id}")
        return found


def traces_of(fake: FakeTelegram, photo: dict[str, Any], answer: Call, sha256: str, user_id: int) -> Traces:
    """The traces of ``photo`` (a user's message), drawn as ``answer`` (the bot's sendPhoto)."""
    texts = [size["file_id"] for size in photo["photo"]] + [size["file_unique_id"] for size in photo["photo"]]
    sent = answer.result.get("photo") or []
    texts += [size["file_id"] for size in sent] + [size["file_unique_id"] for size in sent]
    return Traces(tuple(dict.fromkeys(texts + [sha256])), user_id, fake.sent_file(answer, "photo"))


def rows_naming(home: Path, traces: Traces, skip_updates: tuple[int, ...] = ()) -> list[str]:
    """Every row of every table of ``home``'s database that names ``traces``, as ``table: value``;
    ``skip_updates`` are update ids whose rows may (the /forget request's own, while it runs)."""
    found = []
    with contextlib.closing(sqlite3.connect(home / "bot.db", timeout=30)) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in db.execute(f"SELECT * FROM {table}"):  # table names from sqlite_master
                if table == "updates" and row[0] in skip_updates:
                    continue
                for value in row:
                    text = value.hex() if isinstance(value, bytes) else str(value)
                    found += [f"{table}: {name}" for name in traces.named_in(text)]
    return found


def files_holding(home: Path, data: bytes, texts: tuple[str, ...] = ()) -> list[str]:
    """Files under ``home`` (not its models) holding ``data``, or any of ``texts`` as bytes."""
    needles = [data, *(t.encode() for t in texts)]
    found = []
    for path in sorted(home.rglob("*")):
        if path.relative_to(home).parts[0] in NOT_USERS_DATA or not path.is_file():
            continue
        content = path.read_bytes()
        found += [f"{path.relative_to(home)} holds {'the result' if n is data else n.decode()}"
                  for n in needles if n in content]
    return found


@dataclass(frozen=True)
class Footprint:
    """One Redis key, as what it costs: its type, its size in memory, its largest item, its lifetime."""

    key: str
    kind: str  # string, list, hash, set, zset
    size: int  # bytes, as MEMORY USAGE counts them
    largest: int  # the largest item's bytes (the value itself for a string)
    ttl: int  # seconds left; -1: kept for ever


def footprints(client: redis.Redis) -> list[Footprint]:
    """Every key of the client's database, sorted by key."""
    found = []
    for key in sorted(client.scan_iter(count=1000)):
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        items = _items(client, key, kind)
        found.append(Footprint(key.decode(), kind, int(client.memory_usage(key, samples=0) or 0),
                               max((len(i) for i in items), default=0), int(client.ttl(key))))
    return found


def _items(client: redis.Redis, key: bytes, kind: str) -> list[bytes]:
    if kind == "string":
        return [client.get(key) or b""]
    if kind == "list":
        return list(client.lrange(key, 0, -1))
    if kind == "hash":
        return list(client.hgetall(key).values())
    if kind == "set":
        return list(client.smembers(key))
    if kind == "zset":
        return list(client.zrange(key, 0, -1))
    return []


def redis_holding(client: redis.Redis, *datas: bytes) -> list[str]:
    """Keys of a Redis holding any of ``datas``, whatever their type (strings, lists, hashes, sets)."""
    found = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        for value in _items(client, key, kind):
            found += [key.decode() for data in datas if _holds(value, data)]
    return found


def _holds(value: bytes, data: bytes) -> bool:
    """``data`` in ``value`` as it is, or in the base64 a message body carries (at each of base64's
    three alignments, one of which is the body's)."""
    return data[:4096] in value or any(base64.b64encode(data[o:o + 3000]) in value for o in range(3))


def forget(fake: FakeTelegram, chat: dict[str, Any], user: dict[str, Any], command: str = "/forget") -> str:
    """Say /forget, press the confirming button, and return what the bot says it deleted."""
    asked = len(fake.messages_to(chat["id"]))
    fake.text_message(chat, user, command)
    question = text_after(fake, chat["id"], asked, "Delete everything")
    yes = next(d for d in buttons(question) if d.startswith("E:"))
    edits = len(fake.calls_to("editMessageText", chat["id"]))
    fake.press(user, question.result, yes)
    return str(text_after(fake, chat["id"], edits, "Done.", "editMessageText").params["text"])
