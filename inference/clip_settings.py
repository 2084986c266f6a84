"""What a clip may be and how it is drawn: plain settings, apart from the code that reads clips.

They travel in every work order, so every worker process and the bot's
message schema know them; keeping them here, away from
:mod:`inference.clip_io`, means a photo worker never imports PyAV (15 MB)
until a clip comes.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClipLimits:
    """What a clip may be: longer clips are cut to ``max_seconds``, faster ones dropped to ``max_fps``."""

    max_seconds: float = 10.0
    max_fps: float = 15.0
    max_side: int = 480


@dataclass(frozen=True)
class ClipSettings:
    """Everything besides the model that changes a clip's output."""

    limits: ClipLimits = field(default_factory=ClipLimits)
    fmt: str = "mp4"
    sound: bool = True  # copy the input's sound (an animation has none to keep)
    strength: int = 100
    keep_colours: bool = False
    steady: bool = True
    # "sticker": a video sticker (the person cut out of each frame, outlined, 512 px, WebM with alpha)
    cut: str = ""
    avatar: bool = False  # a square around the first frame's largest face, for an animated profile photo
