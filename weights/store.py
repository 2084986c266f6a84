"""The data directory: installed model files and derived caches.

Files enter ``models/`` only through :meth:`ModelStore.install_verified`,
which checks the bytes against the registry and then renames them into place,
so a file under its registry name is always a complete, verified copy and
``installed`` can trust mere existence.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from storage.errors import AnimebotError
from storage.files import write_atomically
from weights.hashing import file_digests
from weights.registry import ModelEntry, builtin_entries, parse_entries


class WeightsError(AnimebotError):
    """A model could not be installed: unknown, unreachable or corrupt."""

    code = "weights"


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """``ANIMEBOT_HOME`` (from ``environ``, default the process environment), or ``./data``:
    where models, caches and the database live."""
    env = os.environ if environ is None else environ
    return Path(env.get("ANIMEBOT_HOME") or "data").resolve()


# How to install model files without the internet: the one sentence every "not installed" ends with.
IMPORT_HINT = ("model files you have are installed with: animebot weights import FOLDER; with Docker Compose: "
               "docker compose run --rm -v /path/to/models:/import:ro animebot weights import /import")


def default_style(store: "ModelStore") -> str:
    """The style used when none is asked for: Hayao when installed, else the first installed."""
    names = [e.name for e in store.installed("style")]
    if not names:
        raise WeightsError(f"no style is installed in {store.models_dir}; download one with: animebot weights "
                           f"download hayao; {IMPORT_HINT}", code="not_installed")
    return "hayao" if "hayao" in names else names[0]


@dataclass
class ModelStore:
    """Installed models under ``<home>/models``, looked up by registry name."""

    home: Path
    entries: tuple[ModelEntry, ...] = ()  # default: the shipped registry plus this data dir's own models

    def __post_init__(self) -> None:
        if not self.entries:
            self.entries = builtin_entries() + tuple(self.local_entries())

    @property
    def local_manifest(self) -> Path:
        """Models made here (``animebot prune``), in the registry's own format."""
        return self.models_dir / "local.json"

    def local_entries(self) -> list[ModelEntry]:
        if not self.local_manifest.is_file():
            return []
        try:
            return parse_entries(json.loads(self.local_manifest.read_text()))
        except (ValueError, TypeError, KeyError) as exc:
            raise WeightsError(f"{self.local_manifest} is damaged ({exc.__class__.__name__}); remove it or "
                               "run animebot prune again", code="local_manifest") from None

    def add_local(self, entry: ModelEntry, src: Path) -> Path:
        """Install a model made here under ``entry`` (replacing one of that name) and record it."""
        if any(e.name == entry.name for e in builtin_entries()):
            raise WeightsError(f"{entry.name!r} is a published model's name; choose another", code="name_taken")
        self.models_dir.mkdir(parents=True, exist_ok=True)
        dest = self.path(entry)
        os.replace(src, dest)
        others = [asdict(e) for e in self.local_entries() if e.name != entry.name]
        write_atomically(self.local_manifest, json.dumps({"models": [*others, asdict(entry)]}, indent=2).encode())
        self.entries = builtin_entries() + tuple(self.local_entries())
        return dest

    def add_derived(self, base: ModelEntry, name: str, how: str, fmt: str, data: bytes,
                    **fields: Any) -> ModelEntry:
        """Install a model made here from ``base`` (pruned, quantized) as a style of its own: its entry
        says how it was made (``how``), names its base in the licence, and carries ``fields``."""
        suffix = {"pytorch": ".pt", "onnx": ".onnx"}[fmt]
        tmp = self.temp_file()
        try:
            tmp.write_bytes(data)
            sha256, _ = file_digests(tmp)
            entry = ModelEntry(
                name=name, label=f"{base.label}, {how}", kind="style", arch=base.arch, format=fmt,
                filename=f"{name}{suffix}", url=None, sha256=sha256, git_sha1=None, size=len(data),
                train_size=base.train_size, license=f"derived from {base.name}: {base.license}", **fields,
            )
            self.add_local(entry, tmp)
        finally:
            tmp.unlink(missing_ok=True)  # only left if it was not installed
        return entry

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"

    def entry(self, name: str) -> ModelEntry:
        for e in self.entries:
            if e.name == name:
                return e
        known = ", ".join(e.name for e in self.entries)
        raise WeightsError(f"unknown model {name!r}; known models: {known}", code="unknown_model")

    def path(self, entry: ModelEntry) -> Path:
        return self.models_dir / entry.filename

    def is_installed(self, entry: ModelEntry) -> bool:
        """Its file is here, and so are its parts' (a model missing one cannot be loaded)."""
        return self.path(entry).is_file() and all(self.path(self.entry(p)).is_file() for p in entry.parts)

    def with_parts(self, name: str) -> list[ModelEntry]:
        """The entry called ``name`` and the entries of its parts: what installing it installs."""
        entry = self.entry(name)
        return [entry, *(self.entry(p) for p in entry.parts)]

    def installed(self, kind: str | None = None) -> list[ModelEntry]:
        return [e for e in self.entries if self.is_installed(e) and (kind is None or e.kind == kind)]

    def require(self, name: str) -> tuple[ModelEntry, Path]:
        """The entry and file of an installed model, or an error that says how to install it."""
        entry = self.entry(name)
        if not self.is_installed(entry):
            raise WeightsError(
                f"model {name!r} is not installed; run: animebot weights download {name}", code="not_installed"
            )
        return entry, self.path(entry)

    def require_style(self, name: str) -> tuple[ModelEntry, Path]:
        """An installed style, or an error that lists the installed styles rather than every known model.

        Someone who mistypes a style wants to know what they can use now; the
        face detector or a model they have not downloaded is no answer.
        """
        entry = next((e for e in self.entries if e.name == name), None)
        if entry is not None and entry.kind == "style":
            return self.require(name)
        installed = ", ".join(e.name for e in self.installed("style")) or "none"
        raise WeightsError(f"no style {name!r}; installed styles: {installed} (animebot weights list shows the "
                           "others; animebot weights download NAME installs one)", code="unknown_style")

    def identify(self, path: Path) -> ModelEntry:
        """The registry entry whose published hashes these bytes have."""
        sha256, git_sha1 = file_digests(path)
        for e in self.entries:
            if e.matches(sha256, git_sha1):
                return e
        raise WeightsError(f"{path.name}: not a known model (sha256 {sha256[:12]}…)", code="unknown_file")

    def install_verified(self, src: Path, entry: ModelEntry) -> Path:
        """Move a downloaded temp file into place if its hashes match ``entry``.

        ``src`` must be on the same filesystem as the models directory, so the
        final rename is atomic: readers see no file or the whole file.
        """
        sha256, git_sha1 = file_digests(src)
        if not entry.matches(sha256, git_sha1):
            src.unlink(missing_ok=True)
            raise WeightsError(
                f"{entry.name}: checksum mismatch (got sha256 {sha256[:12]}…, git {git_sha1[:12]}…); file discarded",
                code="checksum",
            )
        dest = self.path(entry)
        os.replace(src, dest)
        return dest

    def temp_file(self) -> Path:
        """An empty file beside the models, for a download or copy in progress."""
        self.models_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".partial-", dir=self.models_dir)
        os.close(fd)
        return Path(name)

    def import_file(self, src: Path) -> ModelEntry:
        """Install a local copy of a published model, recognised by its hash."""
        if not src.is_file():
            raise WeightsError(f"{src}: no such file", code="missing")
        entry = self.identify(src)
        tmp = self.temp_file()
        try:
            shutil.copyfile(src, tmp)
            self.install_verified(tmp, entry)
        finally:
            tmp.unlink(missing_ok=True)
        return entry

    def import_folder(self, folder: Path) -> tuple[list[tuple[Path, ModelEntry]], list[Path]]:
        """Install every known model file directly in ``folder`` (not its subfolders), recognised by hash.

        Returns the files installed, with what each was recognised as, and the
        files that are no known model (a README, another project's model), so
        a folder of downloads can be imported as it is and the rest named.
        """
        installed: list[tuple[Path, ModelEntry]] = []
        unknown: list[Path] = []
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            try:
                installed.append((path, self.import_file(path)))
            except WeightsError as exc:
                if exc.code != "unknown_file":
                    raise
                unknown.append(path)
        return installed, unknown
