"""Faces at full detail: align each detected face to a crop, stylize it, paste it back unseen.

A whole-image pass at 720 px leaves a face of 60 px to a few brush strokes.
Like AnimeGANv3's portrait mode, we find each face with insightface's
SCRFD detector on the original photo (inference.detector), align it by its
five landmarks to a square crop with room for hair and chin, stylize that
crop at a size that suits its model and the face (Framing, crop_size), and
warp it back into the result under a feathered mask. Where masks overlap
they are mixed by weight, so no face is pasted "on top" of another.

It is over 300 lines because alignment, framing, masks and pasting are one
geometry: each step's numbers were measured against the others (docs/faces.md).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from inference.colour import oklab_to_srgb, srgb_to_oklab
from inference.detector import Face

CROP = 512  # the largest crop, at which face models were trained
# Crop sizes a scene style draws a face at: the smallest holding it at FACE_DETAIL times its
# size in the result. A few sizes only, so the compiled shapes are reused from photo to photo.
# Side by side on group_3_faces (docs/faces.md), Hayao's faces at 384 px look as at 512, and
# at 256 lose fine lines.
CROP_SIZES = (256, 384, 512)
FACE_DETAIL = 1.5
# A face model (jp_face) needs the face as big as in its 512 px training crops: at 384 px framed
# as at 512 its anime eyes close, at 256 faces wash out. Framed tighter instead (Framing), a
# 384 px crop looks as the 512 one did side by side on group_3_faces and town_1280x854, for 56%
# of the pixels; at 352 and 320 the jaw kept the photo's shading and stubble.
FACE_MODEL_CROP = 384
MAX_FACES = 8
# A face this tall, as a share of the result's short side, is the picture itself (a selfie:
# portrait_closeup's is 0.6, group_3_faces' 0.17): a face model drawing it would give every
# style the same picture, so the style draws it. Smaller faces get the face model.
FACE_FILLS_PICTURE = 0.4
# Eye distance in the photo below which a face is left to the whole-image pass:
# a face that small is blown up 6x or more into the crop and comes back as a
# soft, photo-like patch (an out-of-focus passer-by in town_1280x854, 12 px,
# did exactly that), while it costs a whole crop's pass (docs/faces.md).
MIN_EYE_PX = 16
# insightface's ArcFace template (112 px), zoomed out 1.6x about the crop centre
# so the crop holds hair and chin: eyes land at 47% of the height, the mouth at 70%.
_ARCFACE = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                     [41.5493, 92.3655], [70.7299, 92.2041]], np.float32)
ZOOM = 1.6
# A face model's tighter crop lifts the face by this much of the crop per unit of zoom: at 384 px
# (zoom 1.2) by a tenth, so the chin is inside the paste mask's solid part; without it the
# scene pass showed through at the jaw (group_3_faces' middle man kept his stubble).
LIFT = 0.25


def template(size: int = CROP, zoom: float = ZOOM) -> np.ndarray:
    """Where the five landmarks go in a ``size`` px crop framed at ``zoom`` (less: the face fills more).

    A tighter crop also lifts the face, by LIFT per unit of zoom, so that its chin stays where
    the paste mask is whole rather than in its feathered rim."""
    marks = 0.5 + (_ARCFACE / 112.0 - 0.5) / zoom
    marks[:, 1] -= LIFT * (ZOOM - zoom)
    return (size * marks).astype(np.float32)


TEMPLATE = template()
TEMPLATE_EYE_PX = float(np.linalg.norm(TEMPLATE[1] - TEMPLATE[0]))


def worth_a_pass(face: Face, output_scale: float, face_model: bool = False, result_short: float = 0.0) -> bool:
    """Whether a face gains from its own pass: it must be clear in the photo, and either be
    drawn by a model made for faces (unless it fills the picture: see FACE_FILLS_PICTURE) or come
    out smaller in the result than in a crop. ``result_short`` is the result's short side."""
    if face.eye_px < MIN_EYE_PX:
        return False
    if face_model:
        return (face.box[3] - face.box[1]) * output_scale < FACE_FILLS_PICTURE * result_short
    return face.eye_px * output_scale < TEMPLATE_EYE_PX


def crop_size(face: Face, output_scale: float, sizes: tuple[int, ...] = CROP_SIZES) -> int:
    """The crop to draw ``face`` at: about FACE_DETAIL times the size it will have in the result,
    rounded up to one of ``sizes`` (ascending). A face 60 px wide in the result needs no 512 px drawing."""
    want = FACE_DETAIL * face.eye_px * output_scale / TEMPLATE_EYE_PX * CROP
    return next((size for size in sizes if size >= want), sizes[-1])


@dataclass(frozen=True)
class Framing:
    """How one model's face crops are cut: the sizes it may be given and, for a face model, the
    crop size it was trained at. A face model's drawing depends on a face's size in pixels (at
    384 px, framed as at 512, jp_face's anime eyes close), so its smaller crops keep the face
    as big as in training and only frame it tighter: less hair and background, fewer pixels."""

    sizes: tuple[int, ...] = CROP_SIZES
    trained_at: int | None = None

    def zoom(self, size: int) -> float:
        """The zoom a ``size`` px crop is framed at: ZOOM, or tighter for a face model's smaller crop."""
        return ZOOM * size / (self.trained_at or size)


def align_matrix(face: Face, size: int = CROP, zoom: float = ZOOM) -> np.ndarray:
    """The similarity transform (2x3) taking photo pixels to the aligned ``size`` px crop at ``zoom``."""
    marks = template(size, zoom)
    m, _ = cv2.estimateAffinePartial2D(face.landmarks, marks, method=cv2.LMEDS)
    if m is None:  # degenerate landmarks; fall back to an exact least-squares fit
        m = cv2.getAffineTransform(face.landmarks[:3], marks[:3])
    return m.astype(np.float64)


def warp(src: np.ndarray, m: np.ndarray, size: tuple[int, int], border: int = cv2.BORDER_REFLECT101) -> np.ndarray:
    """``cv2.warpAffine`` that first shrinks the source when the warp shrinks by more than 2x.

    Bilinear sampling alone aliases badly on big reductions (a 12 MP
    photo's face into 512 px, a 512 px crop into a 60 px face).
    """
    scale = float(np.sqrt(abs(np.linalg.det(m[:, :2]))))
    if scale < 0.5:
        f = 2 * scale
        src, m = _sampled_part(src, m, size, margin=2 / f + 2)
        src = cv2.resize(src, None, fx=f, fy=f, interpolation=cv2.INTER_AREA)
        m = m.copy()
        m[:, :2] /= f
    return cv2.warpAffine(src, m, size, flags=cv2.INTER_LINEAR, borderMode=border)


def _sampled_part(src: np.ndarray, m: np.ndarray, size: tuple[int, int], margin: float) -> tuple[np.ndarray, np.ndarray]:
    """The part of ``src`` a warp by ``m`` into ``size`` reads, and the warp for that part.

    Shrinking a whole 12 MP photo for each face cost 100-150 MB and most of
    the time: only the face's rectangle is shrunk now. Where the output
    reaches past an edge of ``src``, the part keeps that edge and the pixels
    its reflection reads, so the border comes out as before."""
    w, h = size
    corners = np.array([[0, 0, 1], [w, 0, 1], [0, h, 1], [w, h, 1]], np.float64) @ cv2.invertAffineTransform(m).T
    (x0, y0), (x1, y1) = corners.min(axis=0) - margin, corners.max(axis=0) + margin
    sh, sw = src.shape[:2]
    x1, y1 = max(x1, -x0), max(y1, -y0)  # what a reflection at the left or top edge reads
    x0, y0 = min(x0, 2 * sw - x1), min(y0, 2 * sh - y1)  # and at the right or bottom edge
    left, top = max(0, int(np.floor(x0))), max(0, int(np.floor(y0)))
    right, bottom = min(sw, int(np.ceil(x1))), min(sh, int(np.ceil(y1)))
    if right <= left or bottom <= top:
        return src, m
    part = m.copy()
    part[:, 2] += m[:, :2] @ np.array([left, top], np.float64)
    return src[top:bottom, left:right], part


@lru_cache(maxsize=8)
def crop_mask(size: int = CROP, centre_y: float = 0.5, radius_x: float = 0.46, radius_y: float = 0.48,
              feather: float = 0.35) -> np.ndarray:
    """A soft ellipse (sizes in crops): 1 over the face, easing to 0 well before the crop's edge.
    Made once per size and shared: never write into it."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    d = np.hypot((x - size * 0.5) / (size * radius_x), (y - size * centre_y) / (size * radius_y))
    t = np.clip((1.0 - d) / feather, 0.0, 1.0)
    return t * t * (3 - 2 * t)  # smoothstep: no kink for the eye to find


def skin_mask(size: int = CROP, zoom: float = ZOOM) -> np.ndarray:
    """The face itself in the aligned crop, brow to chin (at ZOOM: eyes at 47%, mouth at 70% of the
    height); at a smaller ``zoom`` the face fills more of the crop, and so does this."""
    grow = ZOOM / zoom
    return crop_mask(size, centre_y=0.5 + 0.1 * grow, radius_x=0.27 * grow, radius_y=0.31 * grow, feather=0.4)


@dataclass(frozen=True)
class DrawnFace:
    """A stylized crop, the transform from its pixels to the result's, and the zoom it was framed at."""

    crop: np.ndarray
    to_result: np.ndarray  # 2x3
    zoom: float = ZOOM

    def within(self, x0: int, y0: int) -> DrawnFace:
        """The same face, placed in the rectangle of the result whose corner is (x0, y0)."""
        return DrawnFace(self.crop, self.to_result - np.array([[0.0, 0.0, x0], [0.0, 0.0, y0]]), self.zoom)


def paste_faces(whole: np.ndarray, styled: list[DrawnFace], scene_light: bool = False) -> np.ndarray:
    """Blend stylized crops into the whole-image result.

    Each crop's mean colour under its mask is first matched to the
    whole-image result there (in Oklab), so a face pass that came out a
    shade warmer leaves no colour step at its border. With ``scene_light``
    (crops from a face model), the hair and background around the face also
    take the scene's light and colour and keep only their own lines:
    ``jp_face`` paints the background of a crop pale, which showed as a halo
    around every head on a dark wall. Only the rectangle the crops cover is
    computed: outside it the result is the whole-image pass's, untouched.
    """
    if not styled:
        return whole
    x0, y0, x1, y1 = _covered(styled, whole.shape[1], whole.shape[0])
    if x0 >= x1 or y0 >= y1:
        return whole
    out = whole.copy()
    out[y0:y1, x0:x1] = _blend(whole[y0:y1, x0:x1], [d.within(x0, y0) for d in styled], scene_light)
    return out


def _covered(styled: list[DrawnFace], w: int, h: int) -> tuple[int, int, int, int]:
    """The rectangle (x0, y0, x1, y1) of result pixels under any crop, within the result."""
    corners = []
    for d in styled:
        n = d.crop.shape[0]
        box = np.array([[0, 0, 1], [n, 0, 1], [0, n, 1], [n, n, 1]], np.float64)
        corners.append(box @ d.to_result.T)
    pts = np.concatenate(corners)
    x0, y0 = np.floor(pts.min(axis=0)).astype(int) - 2
    x1, y1 = np.ceil(pts.max(axis=0)).astype(int) + 2
    return max(0, x0), max(0, y0), min(w, x1), min(h, y1)


def _blend(whole: np.ndarray, styled: list[DrawnFace], scene_light: bool) -> np.ndarray:
    """:func:`paste_faces` on the rectangle the crops cover; each crop is warped and matched only
    within its own rectangle, since it touches nothing outside it."""
    h, w = whole.shape[:2]
    base = whole.astype(np.float32)
    weight_sum = np.zeros((h, w), np.float32)
    mix = np.zeros((h, w, 3), np.float32)
    keep = np.ones((h, w), np.float32)
    for d in styled:
        x0, y0, x1, y1 = _covered([d], w, h)
        if x0 >= x1 or y0 >= y1:
            continue
        box, to_box, shape = np.s_[y0:y1, x0:x1], d.within(x0, y0).to_result, (x1 - x0, y1 - y0)
        size = d.crop.shape[0]
        face = warp(d.crop, to_box, shape).astype(np.float32)
        alpha = warp(crop_mask(size), to_box, shape, border=cv2.BORDER_CONSTANT)
        face = _match_mean_colour(face, base[box], alpha)
        if scene_light:
            face_skin = warp(skin_mask(size, d.zoom), to_box, shape, border=cv2.BORDER_CONSTANT)
            face = _scene_light_around(face, base[box], alpha, face_skin)
            alpha = alpha * _agreeing(face, base[box], face_skin)
        mix[box] += alpha[..., None] * face
        weight_sum[box] += alpha
        keep[box] *= 1.0 - alpha
    coverage = 1.0 - keep
    faces = mix / np.maximum(weight_sum, 1e-6)[..., None]
    out = coverage[..., None] * faces + (1.0 - coverage[..., None]) * base
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _match_mean_colour(face: np.ndarray, base: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    wsum = float(alpha.sum())
    if wsum < 1.0:
        return face
    ys, xs = np.nonzero(alpha > 0.01)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    a = alpha[y0:y1, x0:x1, None]
    f_lab = srgb_to_oklab(face[y0:y1, x0:x1])
    b_lab = srgb_to_oklab(base[y0:y1, x0:x1])
    shift = ((b_lab - f_lab) * a).sum(axis=(0, 1)) / wsum
    out = face.copy()
    out[y0:y1, x0:x1] = oklab_to_srgb(f_lab + shift)
    return out


def _scene_light_around(face: np.ndarray, base: np.ndarray, alpha: np.ndarray, skin: np.ndarray) -> np.ndarray:
    """``face`` with the low frequencies of ``base`` outside the ``skin`` mask: its lines, the
    scene's light. The blur is normalised by ``alpha``, so pixels the crop does not cover never
    pull it."""
    ys, xs = np.nonzero(alpha > 0.01)
    if len(ys) == 0:
        return face
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    a = alpha[y0:y1, x0:x1]
    sigma = max(2.0, (y1 - y0) / 16)
    diff = (base[y0:y1, x0:x1] - face[y0:y1, x0:x1]) * a[..., None]
    low = cv2.GaussianBlur(diff, (0, 0), sigma) / np.maximum(cv2.GaussianBlur(a, (0, 0), sigma), 1e-3)[..., None]
    out = face.copy()
    out[y0:y1, x0:x1] += (1.0 - skin[y0:y1, x0:x1, None]) * low
    return out


def _agreeing(face: np.ndarray, base: np.ndarray, skin: np.ndarray) -> np.ndarray:
    """How much of ``face`` to keep: all of it on the skin; around it, only where its lightness is
    near the scene's (hair, collars), not where it paints something else (a pale rim of background)."""
    diff = np.abs(face.mean(axis=2) - base.mean(axis=2)) / 255.0
    agree = np.clip(1.0 - (diff - 0.06) / 0.10, 0.0, 1.0)
    agree = cv2.GaussianBlur(agree, (0, 0), 1.5)
    return skin + (1.0 - skin) * agree


def face_pass(photo: np.ndarray, whole: np.ndarray, faces: list[Face],
              stylize: Callable[[list[np.ndarray]], list[np.ndarray]],
              face_model: bool = False, framing: Framing = Framing()) -> tuple[np.ndarray, list[Face]]:
    """Stylize each face worth a pass at its :func:`crop_size` and paste it into ``whole``.

    ``photo`` is the decoded original, ``whole`` the whole-image result
    (smaller, same aspect); ``stylize`` maps square RGB crops of one size to
    their anime versions (all at once, where the model can); ``face_model``
    says it is a model trained on faces rather than the whole image's style;
    ``framing`` says how the model's crops are cut.
    Returns the result and the faces that got a pass.
    """
    scale = whole.shape[1] / photo.shape[1]
    short = min(whole.shape[:2])
    chosen = [f for f in faces[:MAX_FACES] if worth_a_pass(f, scale, face_model, short)]
    by_size: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for face in chosen:
        size = crop_size(face, scale, framing.sizes)
        m = align_matrix(face, size, framing.zoom(size))
        by_size.setdefault(size, []).append((warp(photo, m, (size, size)), cv2.invertAffineTransform(m) * scale))
    styled = []
    for size, group in by_size.items():
        drawn = stylize([crop for crop, _ in group])
        styled += [DrawnFace(crop, to_result, framing.zoom(size)) for crop, (_, to_result) in zip(drawn, group)]
    return paste_faces(whole, styled, scene_light=face_model), chosen
