"""Digests: the two a published model file can be checked against, and export cache keys.

GitHub records a git blob SHA-1 for every file (``git hash-object``), and
release pages publish sha256; computing both in one read lets either verify.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def file_digests(path: Path) -> tuple[str, str]:
    """Return (sha256, git blob SHA-1) of a file, reading it once."""
    size = path.stat().st_size
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(f"blob {size}\0".encode())
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            sha256.update(chunk)
            blob.update(chunk)
    return sha256.hexdigest(), blob.hexdigest()


def key_for(ident: dict[str, Any]) -> str:
    """A short, stable file name for an export made from exactly what ``ident`` lists."""
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]
