"""The result cache: drawn results on disk, and a row for each in the bot's SQLite file.

A result is keyed by what determines its pixels: the sha256 of the photo's
bytes, the style, and the version of the pipeline settings. Beside the file
on disk we keep the Telegram ``file_id`` of the photo and document we sent,
so a repeat is answered by reference, with no upload. The result files are
capped in total size and evicted least-recently-used first. Who asked for a
result is storage/holdings.py's; which photo a Telegram file holds,
storage/uploads.py's.
"""
from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from storage.database import Database, Transaction
from storage.files import remove, write_atomically


@dataclass(frozen=True)
class CachedResult:
    key: str
    path: Path
    width: int
    height: int
    media_file_id: str | None  # Telegram's file id of it sent inline: as a photo, or as the clip it is
    document_file_id: str | None
    face_share: float | None = None  # the largest face's size over the photo's short side (None: not looked for)
    # What its first answer said beside it ("animated": the first frame of an animation; a clip's "trimmed",
    # "silent"), so that a repeat says it too.
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResultFile:
    """A result to store: its file's bytes and suffix, its size in pixels, and what its drawing found and said
    beside it (kept in its row, and given back with it: see :class:`CachedResult`)."""

    data: bytes
    width: int
    height: int
    suffix: str = ".jpg"
    face_share: float | None = None
    notes: tuple[str, ...] = ()


def _notes(stored: str) -> tuple[str, ...]:
    return tuple(stored.split(",")) if stored else ()


def result_key(content_sha256: str, style: str, pipeline_version: str) -> str:
    return f"{content_sha256}:{style}:{pipeline_version}"


def _digest(key: str) -> str:
    """A short, file-name-safe name for a result key (which holds ':' and settings)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class ResultCache:
    """The result files and their rows, on the bot's :class:`Database`."""

    def __init__(self, db: Database, results_dir: Path, max_bytes: int = 2 << 30) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        self._db = db
        self.results_dir = results_dir
        self.max_bytes = max_bytes

    async def get(self, key: str) -> CachedResult | None:
        """The cached result for ``key``, marking it recently used; None if absent or its file is gone.

        A miss only reads: it begins no write transaction, so it never waits for the file's write lock
        behind another connection's write. It still takes the database's lock, as every read does:
        on the one shared connection, a read between another task's statements would see their
        write before it is committed, or rolled back (storage/database.py). The file is looked for
        in a thread, outside any transaction: no lookup waits for a disk, nor holds the lock while it
        does. A hit is then marked used in a transaction of its own, and a result evicted in between
        (its row gone) is a miss.
        """
        row = await self._db.fetchone(
            "SELECT filename, width, height, media_file_id, document_file_id, face_share, notes, created_at"
            " FROM results WHERE key = ?", (key,),
        )
        if row is None:
            return None
        path = self.results_dir / row[0]
        if not await asyncio.to_thread(path.is_file):
            # That row goes; not one a put of the same key has made meanwhile, its file since written.
            await self._db.execute("DELETE FROM results WHERE key = ? AND created_at = ?", (key, row[7]))
            return None
        if not await self._db.execute("UPDATE results SET last_used = ? WHERE key = ?", (time.time(), key)):
            return None
        return CachedResult(key, path, row[1], row[2], row[3], row[4], row[5], _notes(row[6]))

    async def peek(self, keys: list[str]) -> dict[str, CachedResult]:
        """The cached results of ``keys`` whose files are there, in one query, without marking them used: a
        listing of results is not a use of each. The files are looked for in a thread."""
        rows: list[sqlite3.Row] = []
        for start in range(0, len(keys), 500):  # SQLite's limit on a statement's parameters is far above this
            part = keys[start:start + 500]
            rows += await self._db.fetchall(
                "SELECT key, filename, width, height, media_file_id, document_file_id, face_share, notes FROM results"
                f" WHERE key IN ({','.join('?' * len(part))})", part,
            )
        there = await asyncio.to_thread(lambda: [row for row in rows if (self.results_dir / row[1]).is_file()])
        return {row[0]: CachedResult(row[0], self.results_dir / row[1], row[2], row[3], row[4], row[5], row[6],
                                     _notes(row[7])) for row in there}

    async def has(self, key: str) -> bool:
        """Whether ``key``'s result is cached, without marking it used (a count, not a use)."""
        row = await self._db.fetchone("SELECT filename FROM results WHERE key = ?", (key,))
        return row is not None and await asyncio.to_thread((self.results_dir / row[0]).is_file)

    async def put(self, key: str, content_sha256: str, style: str, file: ResultFile) -> CachedResult:
        """Store a result file atomically, then evict the least recently used beyond the size cap: their rows
        in the transaction that stores this one, their files once it is committed (storage/files.py).

        The file is named by the whole key, not only the photo and style: two
        results of one photo drawn with other settings are two files, so
        neither overwrites, nor evicts, the other.
        """
        filename = f"{content_sha256[:2]}/{content_sha256}.{style}.{_digest(key)}{file.suffix}"
        path = self.results_dir / filename
        await asyncio.to_thread(write_atomically, path, file.data)
        now = time.time()
        async with self._db.transaction() as tx:
            await tx.execute(
                "INSERT OR REPLACE INTO results (key, content_sha256, style, filename, bytes, width, height,"
                " media_file_id, document_file_id, created_at, last_used, face_share, notes)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?)",
                (key, content_sha256, style, filename, len(file.data), file.width, file.height, now, now, file.face_share,
                 ",".join(file.notes)),
            )
            evicted = await self._evict(tx)
        await asyncio.to_thread(remove, self.results_dir, evicted)
        return CachedResult(key, path, file.width, file.height, None, None, file.face_share, file.notes)

    async def set_media(self, key: str, file_id: str, kind: str) -> None:
        """Remember what Telegram called our upload of the result sent to be seen, and what it was sent as
        (``photo``, ``sticker``, ``animation``, ``video``, ``video_note``): a repeat is sent by reference,
        and inline mode offers it as that kind, the only one Telegram takes its file id as."""
        await self._db.execute("UPDATE results SET media_file_id = ?, media_kind = ? WHERE key = ?", (file_id, kind, key))

    async def set_document(self, key: str, file_id: str) -> None:
        """Remember what Telegram called our upload of the result as a file."""
        await self._db.execute("UPDATE results SET document_file_id = ? WHERE key = ?", (file_id, key))

    async def total_bytes(self) -> int:
        row = await self._db.fetchone("SELECT COALESCE(SUM(bytes), 0) FROM results")
        return int(row[0]) if row else 0

    async def _evict(self, tx: Transaction) -> list[str]:
        """Within the transaction that stored a result, delete the rows of the least recently used beyond the
        cap; the names of their files."""
        total = await self.total_bytes()
        if total <= self.max_bytes:
            return []
        evicted = []
        for key, filename, size in await tx.fetchall("SELECT key, filename, bytes FROM results ORDER BY last_used ASC"):
            if total <= self.max_bytes:
                break
            await tx.execute("DELETE FROM results WHERE key = ?", (key,))
            evicted.append(filename)
            total -= size
        return evicted
