"""The result cache and per-user settings, in one SQLite file (aiosqlite, WAL).

A result is keyed by what determines its pixels: the sha256 of the photo's
bytes, the style, and the version of the pipeline settings. Beside the file
on disk we keep the Telegram ``file_id`` of the photo and document we sent,
so a repeat is answered by reference, with no upload. Telegram's
``file_unique_id`` is mapped to the content hash, so a photo sent again is
recognised without downloading it. The result files are capped in total size
and evicted least-recently-used first.
"""
from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from base.files import write_atomically
from storage.schema import migrate


@dataclass(frozen=True)
class CachedResult:
    key: str
    path: Path
    width: int
    height: int
    media_file_id: str | None  # Telegram's file id of it sent inline: as a photo, or as the clip it is
    document_file_id: str | None
    face_share: float | None = None  # the largest face's size over the photo's short side (None: not looked for)


@dataclass(frozen=True)
class OwnResult:
    """A result its user was sent, as inline mode offers it again: by Telegram's file id."""

    key: str
    style: str
    kind: str  # what it was sent as: "photo", "sticker", or a clip's "animation", "video" or "video_note"
    media_file_id: str


@dataclass(frozen=True)
class LastPhoto:
    """The last photo a user had drawn: what /style previews every style on."""

    content_sha256: str
    file_id: str  # fetches it again
    spoiler: bool  # it came with a spoiler, so its preview sheet does too


def result_key(content_sha256: str, style: str, pipeline_version: str) -> str:
    return f"{content_sha256}:{style}:{pipeline_version}"


def _digest(key: str) -> str:
    """A short, file-name-safe name for a result key (which holds ':' and settings)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class Cache:
    """Open with ``await Cache.open(path, results_dir)``; close with ``await cache.close()``."""

    def __init__(self, db: aiosqlite.Connection, results_dir: Path, max_bytes: int) -> None:
        self._db = db
        self.results_dir = results_dir
        self.max_bytes = max_bytes

    @classmethod
    async def open(cls, db_path: Path, results_dir: Path, max_bytes: int = 2 << 30) -> "Cache":
        db_path.parent.mkdir(parents=True, exist_ok=True)
        results_dir.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(db_path, timeout=30)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=NORMAL")
        # A deleted row's bytes are overwritten, not left in a free page: what /forget and the
        # retention sweep delete must not be readable in the file afterwards.
        await db.execute("PRAGMA secure_delete=ON")
        await migrate(db)
        return cls(db, results_dir, max_bytes)

    @property
    def db(self) -> aiosqlite.Connection:
        """The connection, for other stores that keep their tables in the same file."""
        return self._db

    async def close(self) -> None:
        await self._db.close()

    # --- results ----------------------------------------------------------------

    async def get(self, key: str) -> CachedResult | None:
        """The cached result for ``key``, marking it recently used; None if absent or its file is gone."""
        async with self._db.execute(
            "SELECT filename, width, height, media_file_id, document_file_id, face_share FROM results WHERE key = ?",
            (key,),
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        path = self.results_dir / row[0]
        if not path.is_file():
            await self._db.execute("DELETE FROM results WHERE key = ?", (key,))
            await self._db.commit()
            return None
        await self._db.execute("UPDATE results SET last_used = ? WHERE key = ?", (time.time(), key))
        await self._db.commit()
        return CachedResult(key, path, row[1], row[2], row[3], row[4], row[5])

    async def peek(self, keys: list[str]) -> dict[str, CachedResult]:
        """The cached results of ``keys`` whose files are there, in one query, without marking them used: a
        listing of results is not a use of each."""
        found: dict[str, CachedResult] = {}
        for start in range(0, len(keys), 500):  # SQLite's limit on a statement's parameters is far above this
            part = keys[start:start + 500]
            async with self._db.execute(
                "SELECT key, filename, width, height, media_file_id, document_file_id, face_share FROM results"
                f" WHERE key IN ({','.join('?' * len(part))})", part,
            ) as cur:
                for row in await cur.fetchall():
                    path = self.results_dir / row[1]
                    if path.is_file():
                        found[row[0]] = CachedResult(row[0], path, row[2], row[3], row[4], row[5], row[6])
        return found

    async def has(self, key: str) -> bool:
        """Whether ``key``'s result is cached, without marking it used (a count, not a use)."""
        async with self._db.execute("SELECT filename FROM results WHERE key = ?", (key,)) as cur:
            row = await cur.fetchone()
        return row is not None and (self.results_dir / row[0]).is_file()

    async def put(self, key: str, content_sha256: str, style: str, data: bytes, width: int, height: int,
                  suffix: str = ".jpg", face_share: float | None = None) -> CachedResult:
        """Store a result file atomically, then evict the least recently used beyond the size cap.

        The file is named by the whole key, not only the photo and style: two
        results of one photo drawn with other settings are two files, so
        neither overwrites, nor evicts, the other.
        """
        filename = f"{content_sha256[:2]}/{content_sha256}.{style}.{_digest(key)}{suffix}"
        path = self.results_dir / filename
        await asyncio.to_thread(write_atomically, path, data)
        now = time.time()
        await self._db.execute(
            "INSERT OR REPLACE INTO results (key, content_sha256, style, filename, bytes, width, height,"
            " media_file_id, document_file_id, created_at, last_used, face_share)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?)",
            (key, content_sha256, style, filename, len(data), width, height, now, now, face_share),
        )
        await self._db.commit()
        await self._evict()
        return CachedResult(key, path, width, height, None, None, face_share)

    async def set_media(self, key: str, file_id: str, kind: str) -> None:
        """Remember what Telegram called our upload of the result sent to be seen, and what it was sent as
        (``photo``, ``sticker``, ``animation``, ``video``, ``video_note``): a repeat is sent by reference,
        and inline mode offers it as that kind, the only one Telegram takes its file id as."""
        await self._db.execute("UPDATE results SET media_file_id = ?, media_kind = ? WHERE key = ?", (file_id, kind, key))
        await self._db.commit()

    async def set_document(self, key: str, file_id: str) -> None:
        """Remember what Telegram called our upload of the result as a file."""
        await self._db.execute("UPDATE results SET document_file_id = ? WHERE key = ?", (file_id, key))
        await self._db.commit()

    async def total_bytes(self) -> int:
        async with self._db.execute("SELECT COALESCE(SUM(bytes), 0) FROM results") as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def _evict(self) -> None:
        total = await self.total_bytes()
        if total <= self.max_bytes:
            return
        async with self._db.execute("SELECT key, filename, bytes FROM results ORDER BY last_used ASC") as cur:
            rows = await cur.fetchall()
        for key, filename, size in rows:
            if total <= self.max_bytes:
                break
            (self.results_dir / filename).unlink(missing_ok=True)
            await self._db.execute("DELETE FROM results WHERE key = ?", (key,))
            total -= size
        await self._db.commit()

    async def hold(self, user_id: int, content_sha256: str, key: str = "") -> None:
        """Note that ``user_id`` asked for this photo, and with ``key`` for this result of it, in one
        commit: /forget erases what only they hold, and leaves what another user holds too
        (storage/erasure.py)."""
        now = time.time()
        # One execute each, not executemany: under a burst, Python's sqlite3 failed an executemany
        # now and then with "bad parameter or other API misuse" (bench.load caught it).
        for k in dict.fromkeys(("", key)):
            await self._db.execute(
                "INSERT INTO holdings (user_id, content_sha256, result_key, used_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO UPDATE SET used_at = excluded.used_at",
                (user_id, content_sha256, k, now),
            )
        await self._db.commit()

    async def holds(self, user_id: int, content_sha256: str) -> bool:
        """Whether ``user_id`` asked for this photo (sent it, or asked /anime for it in a group)."""
        async with self._db.execute("SELECT 1 FROM holdings WHERE user_id = ? AND content_sha256 = ? LIMIT 1",
                                    (user_id, content_sha256)) as cur:
            return await cur.fetchone() is not None

    async def own_results(self, user_id: int, limit: int, offset: int = 0, style: str | None = None
                          ) -> list[OwnResult]:
        """The results ``user_id`` asked for and was sent (so Telegram has a file id for them), newest
        first, ``limit`` from ``offset`` on, only of ``style`` when given; preview sheets are not results."""
        async with self._db.execute(
            "SELECT r.key, r.style, r.media_kind, r.media_file_id FROM holdings h JOIN results r ON r.key = h.result_key"
            " WHERE h.user_id = ? AND r.media_file_id IS NOT NULL AND r.media_kind IS NOT NULL AND r.style NOT LIKE '@%'"
            " AND (? IS NULL OR r.style = ?)"
            " ORDER BY h.used_at DESC, r.key LIMIT ? OFFSET ?",
            (user_id, style, style, limit, offset),
        ) as cur:
            rows = await cur.fetchall()
        return [OwnResult(key, style_, kind, file_id) for key, style_, kind, file_id in rows]

    # --- Telegram file identities ----------------------------------------------

    async def remember_upload(self, user_id: int, file_unique_id: str, content_sha256: str, file_id: str) -> None:
        """Remember which bytes a Telegram file holds, how to fetch them again for a re-render, and that
        ``user_id`` sent it (their /forget deletes it, another sender's copy of the same bytes stays)."""
        await self._db.execute(
            "INSERT INTO uploads (file_unique_id, user_id, content_sha256, file_id, seen_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO UPDATE SET file_id = excluded.file_id, seen_at = excluded.seen_at",
            (file_unique_id, user_id, content_sha256, file_id, time.time()),
        )
        await self._db.commit()

    async def file_id_of(self, content_sha256: str) -> str | None:
        """The Telegram file_id that fetches these bytes again (for a redraw), newest first."""
        async with self._db.execute(
            "SELECT file_id FROM uploads WHERE content_sha256 = ? ORDER BY seen_at DESC LIMIT 1", (content_sha256,)
        ) as cur:
            row = await cur.fetchone()
        return row[0] if row else None

    async def content_of(self, file_unique_id: str) -> str | None:
        async with self._db.execute(
            "SELECT content_sha256 FROM uploads WHERE file_unique_id = ?", (file_unique_id,)
        ) as cur:
            row = await cur.fetchone()
        return row[0] if row else None

    # --- users and stats ----------------------------------------------------------

    async def user_prefs(self, user_id: int) -> tuple[str | None, str | None]:
        """(style, language) the user chose, each None if never set."""
        async with self._db.execute("SELECT style, lang FROM users WHERE user_id = ?", (user_id,)) as cur:
            row = await cur.fetchone()
        return (row[0], row[1]) if row else (None, None)

    async def set_user_style(self, user_id: int, style: str) -> None:
        await self._db.execute(
            "INSERT INTO users (user_id, style) VALUES (?, ?) ON CONFLICT(user_id) DO UPDATE SET style = excluded.style",
            (user_id, style),
        )
        await self._db.commit()

    async def set_user_lang(self, user_id: int, lang: str) -> None:
        await self._db.execute(
            "INSERT INTO users (user_id, lang) VALUES (?, ?) ON CONFLICT(user_id) DO UPDATE SET lang = excluded.lang",
            (user_id, lang),
        )
        await self._db.commit()

    async def render_prefs(self, owner_id: int) -> dict[str, int]:
        """The drawing options a user or group set with /settings; absent ones are not in the dict."""
        async with self._db.execute(
            "SELECT faces, strength, keep_colours FROM render_prefs WHERE owner_id = ?", (owner_id,)
        ) as cur:
            row = await cur.fetchone()
        names = ("faces", "strength", "keep_colours")
        return {n: int(v) for n, v in zip(names, row) if v is not None} if row else {}

    async def set_render_pref(self, owner_id: int, name: str, value: int) -> None:
        if name not in ("faces", "strength", "keep_colours"):
            raise ValueError(f"unknown option {name!r}")
        await self._db.execute(
            f"INSERT INTO render_prefs (owner_id, {name}) VALUES (?, ?)"
            f" ON CONFLICT(owner_id) DO UPDATE SET {name} = excluded.{name}",
            (owner_id, value),
        )
        await self._db.commit()

    async def set_last_photo(self, user_id: int, content_sha256: str, spoiler: bool = False) -> None:
        """Remember the photo the user had drawn last (by content, and whether it came with a spoiler),
        for a preview of every style on it."""
        await self._db.execute(
            "INSERT INTO users (user_id, last_photo, last_photo_spoiler) VALUES (?, ?, ?)"
            " ON CONFLICT(user_id) DO UPDATE SET last_photo = excluded.last_photo,"
            " last_photo_spoiler = excluded.last_photo_spoiler",
            (user_id, content_sha256, int(spoiler)),
        )
        await self._db.commit()

    async def last_photo(self, user_id: int) -> LastPhoto | None:
        """The user's last photo, with a file_id that fetches it again; None if none."""
        async with self._db.execute("SELECT last_photo, last_photo_spoiler FROM users WHERE user_id = ?",
                                    (user_id,)) as cur:
            row = await cur.fetchone()
        if row is None or row[0] is None:
            return None
        file_id = await self.file_id_of(row[0])
        return LastPhoto(row[0], file_id, bool(row[1])) if file_id else None

    async def bump(self, name: str, by: int = 1) -> None:
        await self._db.execute(
            "INSERT INTO stats (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + ?",
            (name, by, by),
        )
        await self._db.commit()

    async def stats(self) -> dict[str, int]:
        async with self._db.execute("SELECT name, value FROM stats") as cur:
            return {name: value for name, value in await cur.fetchall()}
