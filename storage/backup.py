"""``animebot backup`` and ``animebot restore``: the bot's home in one file, and back.

A backup is a tar file (gzipped when its name ends in ``.gz`` or ``.tgz``) of, in this order:

- ``manifest.json``: the backup's format (:data:`FORMAT`), the database's schema version (storage/schema.py),
  when it was made, counts of its rows, and the size and sha256 of the database copy;
- ``bot.db``: a copy of the database made by SQLite's online backup API, a snapshot of one moment however the
  bot writes meanwhile (never a copy of the file, which would miss the write-ahead log's latest writes);
- ``results/…``: the result files that copy names, and no others: a result drawn after the snapshot is not in
  it, and one deleted since (evicted, /forget, the sweep) is skipped and counted; the restored bot treats its
  row as a miss, as it does any result whose file is gone;
- ``sums.json``: each result file's size and sha256, last, so that a file cut short is known by its absence.

Models are not in it (they are reinstalled by hash), nor ``cache/`` (remade on demand), nor the heartbeat.

A restore fills an empty home: everything is unpacked into a folder inside the home and checked (the sums,
``PRAGMA integrity_check``, the versions) before anything is moved into place, so a damaged, cut-short or
newer release's file leaves the home as it was. A backup of an older release restores, and the bot brings its
database up to date at its start as it always does.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from storage.errors import AnimebotError
from storage.files import replacing
from storage.schema import STEPS

FORMAT = 1  # what this release writes and the newest it reads
MANIFEST, DB, RESULTS, SUMS = "manifest.json", "bot.db", "results", "sums.json"
# What an empty home may already hold: the models (a volume of their own in Compose) and their compiled
# exports. Neither is in a backup, and a restore leaves both alone.
NOT_IN_BACKUPS = frozenset({"models", "cache"})
COUNTED = ("users", "render_prefs", "results", "holdings", "sticker_sets", "stickers", "jobs", "uploads")
PARTIAL = ".partial-"  # files.replacing()'s prefix: a backup being written, or one a crash cut short
_CHUNK = 1 << 20
_SMALL = 64 << 20  # the most a manifest or the sums may be


class BackupError(AnimebotError):
    code = "backup"


@dataclass(frozen=True)
class Made:
    path: Path
    counts: dict[str, int]
    results: int  # result files in the backup
    skipped: int  # files the copy named that were gone by the time they were read
    size: int


@dataclass(frozen=True)
class Restored:
    schema: int
    created: float
    counts: dict[str, int]
    results: int


@dataclass
class Pruned:
    deleted: list[Path] = field(default_factory=list)
    kept: int = 0
    unreadable: list[Path] = field(default_factory=list)  # .tar files that are not backups we can read


def back_up(home: Path, dest: Path, now: float | None = None) -> Made:
    """Write ``home``'s backup to ``dest``: whole, or (on any failure) not at all."""
    if not (home / DB).is_file():
        raise BackupError(f"{home} holds no {DB}: there is nothing to back up there (is ANIMEBOT_HOME right?)")
    if dest.is_dir():
        raise BackupError(f"{dest} is a folder; name the file to write, e.g. {dest / 'animebot.tar'}")
    created = time.time() if now is None else now
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{PARTIAL}db-", dir=dest.parent) as work, \
            replacing(dest, suffix=".tar") as tmp:
        copy = Path(work) / DB
        schema, counts, names = _snapshot(home / DB, copy)
        manifest = {"format": FORMAT, "schema": schema, "created": created, "counts": counts,
                    DB: {"size": copy.stat().st_size, "sha256": _sha256(copy)}}
        sums: dict[str, list[Any]] = {}
        skipped = 0
        with tarfile.open(tmp, "w:gz" if _gzipped(dest) else "w", format=tarfile.PAX_FORMAT) as tar:
            _add_bytes(tar, MANIFEST, json.dumps(manifest, indent=1).encode(), created)
            with copy.open("rb") as db:
                _add_file(tar, DB, db)
            for name in names:
                try:
                    source = (home / RESULTS / name).open("rb")
                except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    skipped += 1  # deleted since the snapshot: its row is a miss to the restored bot
                    continue
                with source:
                    sums[name] = list(_add_file(tar, f"{RESULTS}/{name}", source))
            _add_bytes(tar, SUMS, json.dumps({"results": sums, "skipped": skipped}).encode(), created)
    return Made(dest, counts, len(sums), skipped, dest.stat().st_size)


def restore(source: Path, home: Path) -> Restored:
    """Fill the empty ``home`` from the backup ``source``; on any refusal or failure ``home`` is as it was."""
    _require_empty(home)
    if not source.is_file():
        raise BackupError(f"{source}: no such file")
    made_home = not home.exists()
    home.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".restore-", dir=home))
    moved: list[tuple[Path, Path]] = []
    try:
        manifest, results = _unpack(source, home, work)
        _check_database(work / DB, manifest, source, home)
        _require_empty(home, also=work.name)  # nothing started here meanwhile
        for name in (RESULTS, DB):  # the database last: a home with one is a home in use
            if (work / name).exists():
                os.rename(work / name, home / name)
                moved.append((home / name, work / name))
    except BaseException:
        for there, back in reversed(moved):
            os.rename(there, back)
        shutil.rmtree(work, ignore_errors=True)
        if made_home:
            with contextlib.suppress(OSError):
                home.rmdir()
        raise
    shutil.rmtree(work, ignore_errors=True)
    return Restored(manifest["schema"], manifest["created"], manifest["counts"], results)


def prune(folder: Path, keep_s: float, now: float | None = None) -> Pruned:
    """Delete the backups in ``folder`` made more than ``keep_s`` seconds ago (by their manifest's date, which
    a copy keeps), and leftovers of backups a crash cut short that are as old. Other files are left alone."""
    cutoff = (time.time() if now is None else now) - keep_s
    pruned = Pruned()
    if not folder.is_dir():
        raise BackupError(f"{folder}: no such folder")
    for path in sorted(folder.iterdir()):
        if path.name.startswith(PARTIAL):
            if path.stat().st_mtime < cutoff:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
                pruned.deleted.append(path)
            continue
        if not path.is_file() or path.name.startswith("."):
            continue
        created = _created(path)
        if created is None:
            if path.name.endswith((".tar", ".tar.gz", ".tgz")):
                pruned.unreadable.append(path)
        elif created < cutoff:
            path.unlink()
            pruned.deleted.append(path)
        else:
            pruned.kept += 1
    return pruned


def _snapshot(db: Path, copy: Path) -> tuple[int, dict[str, int], list[str]]:
    """Copy the database at ``db`` to ``copy`` with SQLite's online backup (one step: a snapshot of one moment,
    which the bot's writes meanwhile do not disturb), checked whole; its schema version, counts and results."""
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as src, \
            contextlib.closing(sqlite3.connect(copy, isolation_level=None)) as dst:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")  # one file, whatever the bot's connection uses
        if (why := _integrity(dst)) is not None:
            raise BackupError(f"{db} is damaged ({why}); a backup of it would be too, so none was written")
        schema = int(dst.execute("PRAGMA user_version").fetchone()[0])
        tables = {row[0] for row in dst.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        counts = {t: int(dst.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in COUNTED if t in tables}
        names = [row[0] for row in dst.execute("SELECT filename FROM results")] if "results" in tables else []
    return schema, counts, [n for n in dict.fromkeys(names) if _safe(n)]


def _unpack(source: Path, home: Path, work: Path) -> tuple[dict[str, Any], int]:
    """Unpack ``source`` into ``work``, checking each part against the manifest and the sums: the manifest, and
    how many result files."""
    def damaged(why: str) -> BackupError:
        return BackupError(f"{source} is damaged or cut short ({why}); nothing was restored, and {home} is as it was")

    try:
        with _opened(source) as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST or not first.isfile():
                raise damaged(f"it does not begin with an animebot backup's {MANIFEST}")
            manifest = _json(tar, first)
            _readable(manifest, source, home)
            got: dict[str, list[Any]] = {}
            sums: dict[str, Any] | None = None
            while (member := tar.next()) is not None:
                if sums is not None:
                    raise damaged(f"{member.name} follows the end")
                if member.name == SUMS and member.isfile():
                    sums = _json(tar, member)
                elif member.name == DB and member.isfile():
                    size, digest = _extract(tar, member, work / DB)
                    if [size, digest] != [manifest[DB]["size"], manifest[DB]["sha256"]]:
                        raise damaged(f"its {DB} is not the one its manifest describes")
                elif (name := _result_name(member)) is not None:
                    got[name] = list(_extract(tar, member, work / RESULTS / name))
                else:
                    raise damaged(f"it holds {member.name!r}, which no backup holds")
    except BackupError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise damaged(" ".join(str(exc).split()) or type(exc).__name__) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise damaged(f"its {MANIFEST} or {SUMS} cannot be read: {exc}") from None
    if sums is None:
        raise damaged(f"its end, {SUMS}, is missing")
    if not (work / DB).is_file():
        raise damaged(f"it holds no {DB}")
    if got != sums["results"]:
        bad = sorted(n for n in got.keys() | sums["results"].keys() if got.get(n) != sums["results"].get(n))
        raise damaged(f"{len(bad)} result file(s) are missing or not as written, e.g. {bad[0]}")
    return manifest, len(got)


def _readable(manifest: dict[str, Any], source: Path, home: Path) -> None:
    """Refuse a backup a newer release made: its format, or its database's schema, newer than this one reads."""
    fmt, schema = manifest["format"], manifest["schema"]
    if not isinstance(fmt, int) or not isinstance(schema, int):
        raise ValueError("the format and schema are not numbers")
    if fmt > FORMAT or schema > len(STEPS):
        raise BackupError(f"{source} was made by a newer animebot (backup format {fmt}, database schema {schema}; "
                          f"this release reads format {FORMAT} and schema {len(STEPS)} at most): restore it with that "
                          f"release or a later one; {home} is as it was")


def _check_database(copy: Path, manifest: dict[str, Any], source: Path, home: Path) -> None:
    with contextlib.closing(sqlite3.connect(copy, isolation_level=None)) as db:
        why = _integrity(db)
        schema = int(db.execute("PRAGMA user_version").fetchone()[0])
    if why is None and schema != manifest["schema"]:
        why = f"schema {schema}, where its manifest says {manifest['schema']}"
    if why is not None:
        raise BackupError(f"{source} is damaged: its {DB} fails SQLite's check ({why}); nothing was restored, "
                          f"and {home} is as it was")


def _require_empty(home: Path, also: str = "") -> None:
    found = sorted(p.name for p in home.iterdir() if p.name not in NOT_IN_BACKUPS | {also}) if home.is_dir() else []
    if home.exists() and not home.is_dir():
        found = [home.name]
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise BackupError(f"{home} is not empty (it holds {shown}): a restore fills only an empty home; point "
                          f"ANIMEBOT_HOME at a new folder, or move these away first")


def _integrity(db: sqlite3.Connection) -> str | None:
    """None if SQLite's ``integrity_check`` finds the file whole, else its first finding."""
    try:
        rows = db.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if rows == [("ok",)] else str(rows[0][0])


def _created(path: Path) -> float | None:
    """When the backup at ``path`` was made, from its manifest; None if it is not a backup that can be read."""
    try:
        with _opened(path) as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST:
                return None
            return float(_json(tar, first)["created"])
    except (tarfile.TarError, EOFError, zlib.error, OSError, ValueError, KeyError, TypeError):
        return None


def _opened(path: Path) -> tarfile.TarFile:
    """The tar file at ``path``, gzipped or not, by its first bytes (not its name, which a copy may change)."""
    with path.open("rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return tarfile.open(path, "r:gz" if gzipped else "r:")


def _json(tar: tarfile.TarFile, member: tarfile.TarInfo) -> dict[str, Any]:
    if member.size > _SMALL:
        raise ValueError(f"{member.name} is {member.size} bytes")
    reader = tar.extractfile(member)
    assert reader is not None  # a regular file
    found = json.loads(reader.read())
    if not isinstance(found, dict):
        raise ValueError(f"{member.name} is not an object")
    return found


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, to: Path) -> tuple[int, str]:
    """Write ``member`` to ``to``; its size and sha256."""
    reader = tar.extractfile(member)
    assert reader is not None  # a regular file
    to.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with to.open("xb") as out:
        while chunk := reader.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(mtime), 0o600
    tar.addfile(info, io.BytesIO(data))


def _add_file(tar: tarfile.TarFile, name: str, file: IO[bytes]) -> tuple[int, str]:
    """Add the open ``file`` as ``name``; its size and sha256, as read. (A result file is never written
    in place, only replaced whole or deleted, so what is open keeps its size while it is read.)"""
    stat = os.fstat(file.fileno())
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = stat.st_size, int(stat.st_mtime), 0o600
    reader = _Hashing(file)
    tar.addfile(info, reader)
    return stat.st_size, reader.digest.hexdigest()


class _Hashing:
    """A file read through, its sha256 taken on the way."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        chunk = self._file.read(size)
        self.digest.update(chunk)
        return chunk


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _result_name(member: tarfile.TarInfo) -> str | None:
    """The name under ``results/`` of a result file's member; None for any other member."""
    head, _, name = member.name.partition("/")
    return name if head == RESULTS and member.isfile() and _safe(name) else None


def _safe(name: str) -> bool:
    """Whether a result's file name stays under ``results/``: relative, with no ``..``."""
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def _gzipped(path: Path) -> bool:
    return path.name.endswith((".gz", ".tgz"))
