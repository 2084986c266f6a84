"""The model manifest (``registry.json``) as typed records.

The manifest is data so that supporting a new published file, or a locally
trained "lite" model, needs no code change.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

MANIFEST = Path(__file__).with_name("registry.json")


@dataclass(frozen=True)
class ModelEntry:
    """One known model file and everything needed to fetch, verify and run it."""

    name: str
    label: str
    # "style", "detector", "segmenter", "upscaler" (HD), "sample" (the photo /style previews every
    # style on), or "part" (a file another entry needs beside its own: see ``parts``)
    kind: str
    arch: str  # "animeganv2", "animeganv3", "whitebox", "scrfd", "mediapipe_selfie" or "realcugan"
    format: str  # "tflite", "pytorch", "onnx" or "ncnn"
    filename: str
    url: str | None
    sha256: str | None
    git_sha1: str | None
    size: int | None
    train_size: int
    license: str
    widths: dict[str, Any] | None = None  # only for pruned generators
    upsample: str = "half_pixel"  # the bilinear grid a pytorch-format generator was trained with
    eps: float = 1e-5  # its normalisation epsilon
    # Whom /about thanks. What users call the model, in their language, is the bot's catalogue's
    # (bot/words/locales: style_name_<name>, style_about_<name>), the label where it has none.
    credits: str = ""
    look: str = "scene"  # "scene", "face" (made for aligned face crops), "line_art" or "detector"
    # The styles that draw this style's faces, first installed wins; none
    # installed (or an empty list) means the style draws its own faces.
    face_styles: tuple[str, ...] = ()
    # False: never a face pass. Sketch's crops come back as grey patches in its black-ink page.
    face_pass: bool = True
    multiple: int | None = None  # both sides must divide by this (None: the backend's own)
    min_side: int = 0  # each side is padded up to at least this (AnimeGANv3 wants 256)
    # The entries whose files this model needs beside its own (an ncnn net is a .param and a .bin):
    # downloading or provisioning it installs them too, and it is installed only with them.
    parts: tuple[str, ...] = ()

    def matches(self, sha256: str, git_sha1: str) -> bool:
        """True when the hashes of some bytes are this entry's published ones."""
        if self.sha256 is None and self.git_sha1 is None:
            return False
        return (self.sha256 is None or self.sha256 == sha256) and (
            self.git_sha1 is None or self.git_sha1 == git_sha1
        )


def parse_entries(data: dict[str, Any]) -> list[ModelEntry]:
    return [ModelEntry(**{**item, "face_styles": tuple(item.get("face_styles", ())), "parts": tuple(item.get("parts", ()))})
            for item in data["models"]]


@lru_cache(maxsize=1)
def builtin_entries() -> tuple[ModelEntry, ...]:
    """The entries shipped with animebot."""
    return tuple(parse_entries(json.loads(MANIFEST.read_text())))
