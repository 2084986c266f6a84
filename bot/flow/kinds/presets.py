"""The drawing settings some kinds of job set over the result's or the chat's own, typed.

Each starts from a plain picture (no avatar square, no cut, a JPEG), so that a
sticker of an avatar's result is a sticker, not a square.
"""
from __future__ import annotations

from dataclasses import replace

from inference.pipeline import ConvertSettings

AVATAR_SIDE = 1024  # an avatar's side at most: Telegram shows profile photos up to this size
CUTOUT_SIDE = 1024  # a cut-out is a file to use elsewhere: drawn at an avatar's detail
# A sticker's person is drawn 640 px large, then fitted into the 512 px sticker with its outline (inference/sticker.py).
STICKER_SIDE = 640


def plain(base: ConvertSettings) -> ConvertSettings:
    return replace(base, avatar=False, cut="", fmt="jpg")


def sticker(base: ConvertSettings) -> ConvertSettings:
    return replace(plain(base), cut="sticker", fmt="webp", faces=True, max_side=STICKER_SIDE)


def avatar(base: ConvertSettings) -> ConvertSettings:
    """A square around the largest face, at full detail (inference/avatar.py)."""
    return replace(plain(base), avatar=True, faces=True, max_side=AVATAR_SIDE)


def cutout(base: ConvertSettings) -> ConvertSettings:
    """The person with no background, as a transparent PNG."""
    return replace(plain(base), cut="cutout", fmt="png", faces=True, max_side=CUTOUT_SIDE)
