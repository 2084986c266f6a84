"""What each user and chat chose: a style and language, drawing options, and the last photo drawn.

A user's style and language, and the photo they had drawn last, are one row
of ``users``; the drawing options /settings sets are one row of
``render_prefs`` per user or group (a private chat's id is its user's).
"""
from __future__ import annotations

from dataclasses import dataclass

from storage.database import Database
from storage.uploads import Uploads

RENDER_OPTIONS = ("faces", "strength", "keep_colours")


@dataclass(frozen=True)
class Prefs:
    """The style and language a user chose; each None if never set."""

    style: str | None = None
    lang: str | None = None


@dataclass(frozen=True)
class LastPhoto:
    """The last photo a user had drawn: what /style previews every style on."""

    content_sha256: str
    file_id: str  # fetches it again
    spoiler: bool  # it came with a spoiler, so its preview sheet does too


class UserSettings:
    """The ``users`` and ``render_prefs`` tables, on the bot's :class:`Database`. The last photo is
    fetched again by what ``uploads`` knows of it."""

    def __init__(self, db: Database, uploads: Uploads) -> None:
        self._db = db
        self._uploads = uploads

    async def prefs(self, user_id: int) -> Prefs:
        row = await self._db.fetchone("SELECT style, lang FROM users WHERE user_id = ?", (user_id,))
        return Prefs(row[0], row[1]) if row else Prefs()

    async def set_style(self, user_id: int, style: str) -> None:
        await self._db.execute(
            "INSERT INTO users (user_id, style) VALUES (?, ?) ON CONFLICT(user_id) DO UPDATE SET style = excluded.style",
            (user_id, style),
        )

    async def set_lang(self, user_id: int, lang: str) -> None:
        await self._db.execute(
            "INSERT INTO users (user_id, lang) VALUES (?, ?) ON CONFLICT(user_id) DO UPDATE SET lang = excluded.lang",
            (user_id, lang),
        )

    async def render_prefs(self, owner_id: int) -> dict[str, int]:
        """The drawing options a user or group set with /settings; absent ones are not in the dict."""
        row = await self._db.fetchone(
            "SELECT faces, strength, keep_colours FROM render_prefs WHERE owner_id = ?", (owner_id,)
        )
        return {n: int(v) for n, v in zip(RENDER_OPTIONS, row) if v is not None} if row else {}

    async def set_render_pref(self, owner_id: int, name: str, value: int) -> None:
        if name not in RENDER_OPTIONS:
            raise ValueError(f"unknown option {name!r}")
        await self._db.execute(
            f"INSERT INTO render_prefs (owner_id, {name}) VALUES (?, ?)"
            f" ON CONFLICT(owner_id) DO UPDATE SET {name} = excluded.{name}",
            (owner_id, value),
        )

    async def set_last_photo(self, user_id: int, content_sha256: str, spoiler: bool = False) -> None:
        """Remember the photo the user had drawn last (by content, and whether it came with a spoiler),
        for a preview of every style on it."""
        await self._db.execute(
            "INSERT INTO users (user_id, last_photo, last_photo_spoiler) VALUES (?, ?, ?)"
            " ON CONFLICT(user_id) DO UPDATE SET last_photo = excluded.last_photo,"
            " last_photo_spoiler = excluded.last_photo_spoiler",
            (user_id, content_sha256, int(spoiler)),
        )

    async def last_photo(self, user_id: int) -> LastPhoto | None:
        """The user's last photo, with a file_id that fetches it again; None if none."""
        row = await self._db.fetchone("SELECT last_photo, last_photo_spoiler FROM users WHERE user_id = ?", (user_id,))
        if row is None or row[0] is None:
            return None
        file_id = await self._uploads.file_id_of(row[0])
        return LastPhoto(row[0], file_id, bool(row[1])) if file_id else None
