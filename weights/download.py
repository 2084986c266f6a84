"""Fetch a model from its public URL, verify it, and install it atomically.

The bytes stream into a temporary file next to the destination; only a
complete file whose hashes match the registry is renamed into place. Any
failure, Ctrl-C included, deletes the partial file, so nothing half-written
is ever mistaken for an installed model.
"""
from __future__ import annotations

from pathlib import Path
from typing import IO

import httpx
from tqdm import tqdm

from weights.registry import ModelEntry
from weights.store import ModelStore, WeightsError


def download(
    store: ModelStore,
    entry: ModelEntry,
    *,
    progress: IO[str] | None = None,
    timeout: float = 30.0,
) -> Path:
    """Download ``entry`` into ``store``, showing a progress bar on ``progress`` if given."""
    if not entry.url:
        raise WeightsError(f"{entry.name}: no public URL is known; use 'animebot weights import'", code="no_url")
    tmp = store.temp_file()
    try:
        with httpx.stream("GET", entry.url, follow_redirects=True, timeout=timeout) as response:
            if response.status_code != 200:
                raise WeightsError(f"{entry.name}: download failed, HTTP {response.status_code}", code="http")
            total = int(response.headers.get("content-length") or entry.size or 0) or None
            with tmp.open("wb") as fh, tqdm(
                total=total,
                unit="B",
                unit_scale=True,
                desc=entry.name,
                file=progress,
                disable=progress is None,
            ) as bar:
                for chunk in response.iter_bytes(1 << 16):
                    fh.write(chunk)
                    bar.update(len(chunk))
        if entry.size is not None and tmp.stat().st_size != entry.size:
            raise WeightsError(
                f"{entry.name}: download incomplete ({tmp.stat().st_size} of {entry.size} bytes)", code="incomplete"
            )
        return store.install_verified(tmp, entry)
    except httpx.HTTPError as exc:
        raise WeightsError(f"{entry.name}: download failed ({exc.__class__.__name__}: {exc})", code="network") from exc
    finally:
        tmp.unlink(missing_ok=True)
