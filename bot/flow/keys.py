"""The cache key of every result, in one place: what the flow stores a drawing under is what the Mini App
looks it up by (bot/webapp/pictures.py), so the two can never drift apart.

A key is the photo's hash, the style, and a version naming everything else that makes the result's bytes:
the drawing settings (with the kind's preset), the kind's own part (HD's revision), and for a clip how it
is sent and the limits it is drawn under.
"""
from __future__ import annotations

from bot.flow.kinds.base import Kind
from bot.flow.kinds.registry import PHOTO
from bot.flow.requests import Source
from bot.styles import Styles
from inference.clip_settings import ClipLimits
from inference.pipeline import ConvertSettings
from storage.cache import result_key

CLIP_REVISION = 1  # raise when a change to the clip pipeline changes its results (a new cache key)


def drawing_version(styles: Styles, style: str, settings: ConvertSettings, src: Source, clip: ClipLimits) -> str:
    """The version of ``src`` drawn in ``style`` at ``settings``; of a clip, with how it is sent and the limits
    ``clip`` it is drawn under too."""
    version = styles.version(style, settings)
    if not src.clip:
        return version
    return f"{version}|{src.kind}:{clip.max_seconds:g}s:{clip.max_fps:g}fps:{clip.max_side}px:{CLIP_REVISION}"


def key_of(content_sha256: str, style: str, version: str, kind: Kind = PHOTO) -> str:
    """The cache key of what ``kind`` makes of the photo drawn in ``style`` at ``version`` (a drawing's version,
    :func:`drawing_version`): the drawing itself, or with the kind's own part (HD's doubling)."""
    return result_key(content_sha256, style, kind.version(version))


def picture_key(styles: Styles, content_sha256: str, style: str, settings: ConvertSettings, kind: Kind = PHOTO) -> str:
    """The cache key of a still picture drawn in ``style`` as ``kind`` makes it from ``settings``."""
    return key_of(content_sha256, style, styles.version(style, kind.settings(settings)), kind)
