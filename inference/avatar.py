"""The square an avatar is cut to: centred on the largest face, with its hair and chin inside the
circle Telegram shows a profile photo in.

Telegram crops a profile photo to the circle inscribed in its square, so the head must fit that
circle, not the square: the face box the detector gives is widened to the head (hair above it,
ears beside it, the chin below), and the square is the one whose inscribed circle holds every
corner of that head, moved inside the photo where it would reach past an edge. A photo too small
for that is cut to its largest square around the head; a photo with no face, to its centre.
"""
from __future__ import annotations

import math

# The head around a face box, in face-box widths and heights: hair above, ears beside, chin below.
HEAD_ABOVE, HEAD_BESIDE, HEAD_BELOW = 0.55, 0.30, 0.20
CIRCLE_MARGIN = 1.08  # the head's corners a little inside the circle, not on it
# A face shorter than this share of the photo's short side is a passer-by, not the subject: an
# avatar of it would be a blurred thumbnail, so the photo's centre is taken instead.
MIN_FACE_SHARE = 0.08


def subject(size: tuple[int, int], boxes: list[tuple[float, float, float, float]]
            ) -> tuple[float, float, float, float] | None:
    """The face an avatar is of: the largest of ``boxes`` (largest first, as the detector gives them),
    unless it is too small to be the photo's subject."""
    if not boxes or boxes[0][3] - boxes[0][1] < MIN_FACE_SHARE * min(size):
        return None
    return boxes[0]


def head_box(face: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    x1, y1, x2, y2 = face
    w, h = x2 - x1, y2 - y1
    return x1 - HEAD_BESIDE * w, y1 - HEAD_ABOVE * h, x2 + HEAD_BESIDE * w, y2 + HEAD_BELOW * h


def avatar_square(size: tuple[int, int], face: tuple[float, float, float, float] | None) -> tuple[int, int, int, int]:
    """The square (left, top, right, bottom) to cut from a ``size`` photo for an avatar of ``face``
    (the largest face's box), or of the photo's centre when there is none."""
    width, height = size
    most = min(width, height)
    if face is None:
        left, top = (width - most) // 2, (height - most) // 2
        return left, top, left + most, top + most
    x1, y1, x2, y2 = head_box(face)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    side = min(most, math.ceil(math.hypot(x2 - x1, y2 - y1) * CIRCLE_MARGIN))
    left = int(round(min(max(cx - side / 2, 0), width - side)))
    top = int(round(min(max(cy - side / 2, 0), height - side)))
    return left, top, left + side, top + side
