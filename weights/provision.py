"""Make sure the models a deployment needs are installed, before the bot starts.

The Docker image calls this on every start (``ANIMEBOT_WEIGHTS``): a model
already in the data volume is left alone; a missing one is copied from the
models baked into the image at build time (``ANIMEBOT_BAKED_MODELS``) when a
file there has its published hash, and downloaded from its public URL
otherwise. Either way the bytes are verified before they are installed.

A model that cannot be had (offline, say) is a warning, and the bot starts
with what it has: it stops only when no style is left to draw with, and says
how to install one (:func:`weights.store.default_style`).
"""
from __future__ import annotations

import logging
from pathlib import Path

from weights.download import download
from weights.store import IMPORT_HINT, ModelStore, WeightsError

log = logging.getLogger("animebot.weights")


def provision(store: ModelStore, names: tuple[str, ...], baked: Path | None = None) -> list[str]:
    """Install each of ``names`` that is missing; returns what was done, one line per model
    (a model that could not be installed included, as a warning)."""
    done = []
    for entry in (e for name in names for e in store.with_parts(name)):  # an unknown name is a WeightsError
        name = entry.name
        if store.path(entry).is_file():
            continue
        source = _baked_copy(store, name, baked)
        if source is not None:
            store.import_file(source)
            done.append(f"{name}: installed from {source}")
            log.info(done[-1])
            continue
        log.info("%s: downloading from %s", name, entry.url)
        try:
            download(store, entry)
        except WeightsError as exc:
            done.append(f"{exc.message}; starting without it ({IMPORT_HINT})")
            log.warning(done[-1])
        else:
            done.append(f"{name}: downloaded and verified")
            log.info(done[-1])
    return done


def _baked_copy(store: ModelStore, name: str, baked: Path | None) -> Path | None:
    """A file in ``baked`` whose hashes are the model's, if there is one."""
    if baked is None or not baked.is_dir():
        return None
    for path in sorted(baked.iterdir()):
        if not path.is_file():
            continue
        try:
            if store.identify(path).name == name:
                return path
        except WeightsError:
            continue
    return None
