"""A cheap remedy for flicker: where the input did not change, keep the previous drawing.

AnimeGAN draws each frame on its own, and its whole-image normalisation moves a
little with every change anywhere in the frame, so still parts of a scene
shimmer. Where the input pixel is the same as in the previous frame (within
``threshold``, after a small blur that ignores sensor noise), the output is
blended with the previous output by ``weight``; where anything moved, the new
drawing is kept as it is, so motion is never smeared. On still parts this is an
exponential average over frames; docs/clips.md has the measurements.
"""
from __future__ import annotations

import cv2
import numpy as np


class Steadier:
    """Feed it the frames in order: ``steady(photo, anime)`` returns the frame to show."""

    def __init__(self, weight: float = 0.8, threshold: float = 12.0) -> None:
        self.weight = weight
        self.threshold = threshold
        self._photo: np.ndarray | None = None
        self._shown: np.ndarray | None = None

    def __call__(self, photo: np.ndarray, anime: np.ndarray) -> np.ndarray:
        current = photo.astype(np.float32)
        drawn = anime.astype(np.float32)
        if self._photo is not None and self._shown is not None and self._photo.shape == current.shape:
            change = cv2.blur(np.abs(current - self._photo).max(axis=2), (5, 5))
            keep = (np.clip(1.0 - change / self.threshold, 0.0, 1.0) * self.weight)[..., None]
            drawn = drawn + keep * (self._shown - drawn)
        self._photo, self._shown = current, drawn
        return np.clip(np.rint(drawn), 0, 255).astype(np.uint8)
