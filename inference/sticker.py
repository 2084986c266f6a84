"""A person cut out of a drawing: the crop around them, their outline, and a sticker made of it.

A sticker is of one person, as a chat shows them: the largest face with its
hair and shoulders, cut out of the background. The photo is first cut to
that head-and-shoulders box (the selfie segmentation model is made for
people near the camera, not a wide group photo), then drawn as any photo
is, and the segmentation of the same crop becomes the drawing's alpha.

Without the segmentation model the cut is an oval around the head and
shoulders: clean, if not the person's own outline. With it, the oval too
wherever there is no one to cut out: the model calls much that is no person
"person" (a cup of coffee, a cat), so the person's own outline is used only
where the face detector saw a face the mask covers and the mask is sure of
itself (:func:`is_person`; docs/faces.md has the numbers it was set by).

The sticker itself follows the usual look of Telegram stickers: a white
outline around the person and a soft shadow under it, 512 px on its longer
side, WebP with a transparent background, under 512 KB.
"""
from __future__ import annotations

import io

import cv2
import numpy as np
from PIL import Image

from inference.avatar import head_box

SIDE = 512  # a sticker: its longer side exactly this
MAX_BYTES = 512 * 1024  # Telegram's bound on a static sticker's file
VIDEO_MAX_BYTES = 256 * 1024  # and on a video sticker's
VIDEO_SECONDS, VIDEO_FPS = 3.0, 30.0  # a video sticker at most this long, this fast
OUTLINE_PX = 9  # the white outline's width on the 512 px sticker
SHADOW_BLUR_PX = 5.0  # the shadow's softness (Gaussian sigma)
SHADOW_DROP_PX = 4  # how far below the person the shadow falls
SHADOW_OPACITY = 0.35
PAD = OUTLINE_PX + int(3 * SHADOW_BLUR_PX) + SHADOW_DROP_PX  # the room the outline and shadow need round the person
# The head-and-shoulders box around a face box, in face widths beside and face heights below the chin.
SHOULDERS_BESIDE, SHOULDERS_BELOW = 1.0, 1.3
# The cut's edge: mask values below LOW are background, above HIGH person, a short ramp between, so
# the outline follows a crisp edge rather than the model's blur.
LOW, HIGH = 0.35, 0.65
ISLAND_SHARE = 0.10  # a separate piece of "person" smaller than this share of the largest is dropped
# A cut that keeps less of the crop than this found no person (a landscape, a street): its specks would
# make no sticker, so the oval is used instead.
MIN_PERSON_SHARE = 0.05
# A cut that keeps more than this of the crop found no edge to cut along (the person fills the photo, or
# the whole frame is "person"): it is rounded by the oval too, so the sticker is not a plain rectangle.
FILLED_SHARE = 0.8
# Whether the mask is a person's (docs/faces.md, "A sticker's cut: is there a person?"): of the pixels it
# leans to "person" (above 0.5), at least SURE_SHARE are above SURE; a person's masks measured 0.87-0.99, a
# cup of coffee's 0.55, other photos with no one 0.0-0.53. A cat's face (0.83) and a retina (0.92) pass,
# so a face the detector found is asked for too, covered by the mask (FACE_COVERED of its box on average).
SURE, SURE_SHARE = 0.9, 0.75
FACE_COVERED = 0.5
# A sticker's alpha (of 255) from which a pixel is seen: the white outline goes round every such pixel,
# and anything fainter (a resize's ringing round a hard edge) is cleared, so nothing shows beyond it.
VISIBLE = 16

Box = tuple[float, float, float, float]


def subject_box(size: tuple[int, int], face: Box | None) -> tuple[int, int, int, int]:
    """The crop (left, top, right, bottom) of a ``size`` photo for a sticker of ``face``: the head
    with hair, and the shoulders below; the whole photo when there is no face."""
    width, height = size
    if face is None:
        return 0, 0, width, height
    x1, y1, x2, y2 = head_box(face)
    w, h = face[2] - face[0], face[3] - face[1]
    left, right = face[0] - SHOULDERS_BESIDE * w, face[2] + SHOULDERS_BESIDE * w
    top, bottom = y1 - 0.1 * h, face[3] + SHOULDERS_BELOW * h
    box = (min(left, x1), top, max(right, x2), bottom)
    return (max(0, int(box[0])), max(0, int(box[1])), min(width, int(np.ceil(box[2]))),
            min(height, int(np.ceil(box[3]))))


def oval_mask(width: int, height: int) -> np.ndarray:
    """The cut used without the segmentation model: the ellipse inscribed in the crop, feathered by a
    pixel or two so its edge is smooth."""
    mask = np.zeros((height, width), np.uint8)
    cv2.ellipse(mask, (width // 2, height // 2), (max(1, width // 2 - 2), max(1, height // 2 - 2)), 0, 0, 360, 255,
                thickness=-1, lineType=cv2.LINE_AA)
    return mask.astype(np.float32) / 255.0


def person_alpha(mask: np.ndarray | None, width: int, height: int,
                 faces: list[Box] | None) -> tuple[np.ndarray, str]:
    """The cut's alpha for a ``width`` x ``height`` drawing, and how it was made: "person" from the
    segmentation ``mask``, "rounded" for a person filling the crop (rounded by the oval), or "oval"
    where there is no mask or no person in it (see :func:`how_to_cut` for ``faces``)."""
    return cut_by(mask, width, height, how_to_cut(mask, faces))


def how_to_cut(mask: np.ndarray | None, faces: list[Box] | None) -> str:
    """"person", "rounded" or "oval" (see :func:`person_alpha`) for a picture whose segmentation is
    ``mask`` and whose face boxes (in the mask's pixels) are ``faces``, None where no face detector is
    installed. Decided once for a clip, on its first frame, so a video sticker's shape never jumps
    from one to another as the person moves."""
    if mask is None:
        return "oval"
    kept = np.count_nonzero(alpha_of(mask) == 255) / mask.size
    if kept < MIN_PERSON_SHARE or not is_person(mask, faces):
        return "oval"
    return "rounded" if kept > FILLED_SHARE else "person"


def is_person(mask: np.ndarray, faces: list[Box] | None) -> bool:
    """Whether ``mask`` is a person's: sure of itself, and covering a face the detector found (without
    a detector, ``faces`` None, the mask's sureness alone decides). A cut along a mask that is not
    would be ragged and half-transparent, in pieces; the oval is one clean piece."""
    leaning = np.count_nonzero(mask > 0.5)
    if leaning == 0 or np.count_nonzero(mask > SURE) < SURE_SHARE * leaning:
        return False
    return faces is None or any(_covered(mask, face) >= FACE_COVERED for face in faces)


def _covered(mask: np.ndarray, face: Box) -> float:
    """How much of the ``face`` box the mask calls person, on average (0 for a box outside it)."""
    h, w = mask.shape
    x1, y1 = max(0, int(face[0])), max(0, int(face[1]))
    x2, y2 = min(w, int(np.ceil(face[2]))), min(h, int(np.ceil(face[3])))
    return float(mask[y1:y2, x1:x2].mean()) if x2 > x1 and y2 > y1 else 0.0


def in_crop(faces: list[Box], crop: tuple[int, int, int, int], scale: float) -> list[Box]:
    """Face boxes of a photo in the pixels of its ``crop`` resized by ``scale``."""
    left, top = crop[0], crop[1]
    return [((x1 - left) * scale, (y1 - top) * scale, (x2 - left) * scale, (y2 - top) * scale)
            for x1, y1, x2, y2 in faces]


def cut_by(mask: np.ndarray | None, width: int, height: int, how: str) -> tuple[np.ndarray, str]:
    """The alpha of the cut ``how`` says, from ``mask`` (not needed for the oval), and ``how``."""
    if how == "person" and mask is not None:
        return alpha_of(mask), how
    oval = alpha_of(oval_mask(width, height))
    if how == "rounded" and mask is not None:
        return np.minimum(alpha_of(mask), oval), how
    return oval, "oval"


def alpha_of(mask: np.ndarray) -> np.ndarray:
    """The person's alpha (uint8) from a segmentation's probabilities: a crisp edge, and no specks
    of background the model half-believed were a person."""
    alpha = np.clip((mask - LOW) / (HIGH - LOW), 0.0, 1.0)
    solid = (alpha > 0.5).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(solid, connectivity=8)
    if count > 2:
        areas = stats[1:, cv2.CC_STAT_AREA]
        small = np.flatnonzero(areas < ISLAND_SHARE * areas.max()) + 1
        alpha[np.isin(labels, small)] = 0.0
    return np.rint(alpha * 255).astype(np.uint8)


def cut_out(rgb: np.ndarray, alpha: np.ndarray, margin: int = 0) -> Image.Image:
    """The RGBA picture of the person, trimmed to their extent (plus ``margin`` px); the whole picture
    when nothing was found, so a cut never comes back empty."""
    rgba = np.dstack([rgb, alpha])
    ys, xs = np.nonzero(alpha)
    if len(xs) == 0:
        rgba[:, :, 3] = 255
        return Image.fromarray(rgba, "RGBA")
    h, w = alpha.shape
    top, bottom = max(0, ys.min() - margin), min(h, ys.max() + 1 + margin)
    left, right = max(0, xs.min() - margin), min(w, xs.max() + 1 + margin)
    return Image.fromarray(np.ascontiguousarray(rgba[top:bottom, left:right]), "RGBA")


def sticker(person: Image.Image) -> Image.Image:
    """The person (RGBA, trimmed) on a transparent 512 px sticker, with a white outline and a soft shadow."""
    inner = SIDE - 2 * PAD
    scale = inner / max(person.size)
    size = (max(1, round(person.width * scale)), max(1, round(person.height * scale)))
    rgba = np.asarray(person.resize(size, Image.Resampling.LANCZOS)).copy()
    rgba[:, :, 3][rgba[:, :, 3] < VISIBLE] = 0  # too faint to see: left out, outline and all
    canvas = (size[0] + 2 * PAD, size[1] + 2 * PAD)
    shows = np.zeros((canvas[1], canvas[0]), bool)
    shows[PAD:PAD + size[1], PAD:PAD + size[0]] = rgba[:, :, 3] > 0
    outline = _outline(shows, OUTLINE_PX)
    shadow = cv2.GaussianBlur(outline, (0, 0), SHADOW_BLUR_PX)
    shadow = np.roll(shadow, SHADOW_DROP_PX, axis=0) * SHADOW_OPACITY
    layers = Image.new("RGBA", canvas, (0, 0, 0, 0))
    layers.alpha_composite(_solid((0, 0, 0), shadow))
    layers.alpha_composite(_solid((255, 255, 255), outline))
    layers.alpha_composite(Image.fromarray(rgba, "RGBA"), (PAD, PAD))
    out = np.asarray(layers).copy()
    out[:, :, 3][out[:, :, 3] < 3] = 0  # the blur's faint tails: the background stays fully clear
    return Image.fromarray(out, "RGBA")


def outlined(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """One frame of a video sticker: the person (``alpha``) with the sticker's white outline, at the
    frame's own size (every frame of a clip keeps one size, so nothing is trimmed), RGBA."""
    scale = max(rgb.shape[:2]) / SIDE
    person = np.where(alpha >= VISIBLE, alpha, 0).astype(np.float32) / 255.0
    outline = _outline(person > 0, max(1, round(OUTLINE_PX * scale)))
    a = person + outline * (1.0 - person)  # the person over the white outline
    colour = (rgb.astype(np.float32) * person[..., None] + 255.0 * (outline * (1.0 - person))[..., None]) / \
        np.maximum(a, 1e-6)[..., None]
    out = np.dstack([np.clip(np.rint(colour), 0, 255), np.rint(a * 255)]).astype(np.uint8)
    out[:, :, 3][out[:, :, 3] < 3] = 0
    return out


def _outline(shows: np.ndarray, width: int) -> np.ndarray:
    """The white outline's alpha: ``width`` px round every pixel of the sticker that ``shows``, at full
    strength however faintly that pixel shows, so a half-transparent stretch of edge is outlined as
    the rest is (grown from the alpha itself, the outline there was as faint as the edge: a gap)."""
    disk = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * width + 1, 2 * width + 1))
    return cv2.GaussianBlur(cv2.dilate(shows.astype(np.float32), disk), (0, 0), 0.8)


def video_size(width: int, height: int) -> tuple[int, int]:
    """A video sticker's frame size: the clip's shape with its longer side exactly 512 (enlarged if
    need be, as Telegram wants), both sides even for 4:2:0."""
    scale = SIDE / max(width, height)
    w, h = round(width * scale), round(height * scale)
    return (SIDE if w >= h else max(2, w - w % 2)), (SIDE if h > w else max(2, h - h % 2))


def _solid(colour: tuple[int, int, int], alpha: np.ndarray) -> Image.Image:
    layer = np.empty((*alpha.shape, 4), np.uint8)
    layer[:, :, :3] = colour
    layer[:, :, 3] = np.clip(np.rint(alpha * 255), 0, 255).astype(np.uint8)
    return Image.fromarray(layer, "RGBA")


def webp(img: Image.Image) -> bytes:
    """The sticker as WebP under Telegram's 512 KB: near-lossless first, lower quality only if needed."""
    for quality in (95, 85, 70, 50):
        buf = io.BytesIO()
        img.save(buf, "WEBP", quality=quality, alpha_quality=100, method=4)
        if buf.tell() <= MAX_BYTES:
            break
    return buf.getvalue()
