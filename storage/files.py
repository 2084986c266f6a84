"""Writing a file so that a crash never leaves half of one.

Readers (a worker loading an export, the cache sending a result, a restart
reading the local model list) must see the old file or the whole new one.
So everything is written to a temporary file beside the destination, on the
same filesystem, and renamed over it in one step; a failure removes the
temporary file. Files a database row names go the other way round: the row
first, then the file (:func:`remove`).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path, suffix: str = "") -> Iterator[Path]:
    """A temporary path beside ``path`` to write to (``suffix`` for writers that go by it);
    once the block succeeds it replaces ``path``, and if the block fails it is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".partial-", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # only still there if the block failed


def write_atomically(path: Path, data: bytes) -> None:
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def remove(folder: Path, names: Iterable[str]) -> None:
    """Delete the files ``names`` under ``folder``, each if it is still there: run in a thread, once the
    transaction that deleted the rows naming them is committed, so that neither the event loop nor the
    database's lock waits for a disk. A crash in between leaves files that no row names, which nothing
    finds and the retention sweep deletes (storage/retention.py)."""
    for name in names:
        (folder / name).unlink(missing_ok=True)
