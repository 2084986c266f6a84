"""Blending the anime result with the photo without washing colours out.

Mixing two colours in RGB (or even in Lab) pulls their chroma towards grey
when their hues differ: red and cyan average to grey. We blend in OkLCh
instead: lightness and chroma are interpolated linearly and hue along the
shorter arc, so a half-strength result is as colourful as its inputs.
Oklab (Björn Ottosson, 2020) is used because its hue is perceptually even,
which keeps skin from drifting towards orange or pink mid-way.
"""
from __future__ import annotations

import numpy as np

_RGB_TO_LMS = np.array([[0.4122214708, 0.5363325363, 0.0514459929],
                        [0.2119034982, 0.6806995451, 0.1073969566],
                        [0.0883024619, 0.2817188376, 0.6299787005]], np.float32)
_LMS_TO_LAB = np.array([[0.2104542553, 0.7936177850, -0.0040720468],
                        [1.9779984951, -2.4285922050, 0.4505937099],
                        [0.0259040371, 0.7827717662, -0.8086757660]], np.float32)
_LAB_TO_LMS = np.linalg.inv(_LMS_TO_LAB).astype(np.float32)
_LMS_TO_RGB = np.linalg.inv(_RGB_TO_LMS).astype(np.float32)


def srgb_to_oklab(rgb: np.ndarray) -> np.ndarray:
    """uint8 (or float 0-255) sRGB, shape (..., 3), to float32 Oklab."""
    c = np.asarray(rgb, np.float32) / 255.0
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    lms = np.cbrt(linear @ _RGB_TO_LMS.T)
    return lms @ _LMS_TO_LAB.T


def oklab_to_srgb(lab: np.ndarray) -> np.ndarray:
    """Float Oklab back to uint8 sRGB, clipping colours outside the gamut."""
    linear = np.clip((lab @ _LAB_TO_LMS.T) ** 3 @ _LMS_TO_RGB.T, 0.0, 1.0)
    c = np.where(linear <= 0.0031308, linear * 12.92, 1.055 * linear ** (1 / 2.4) - 0.055)
    return np.clip(np.rint(c * 255.0), 0, 255).astype(np.uint8)


# Below this chroma a colour has no hue worth the name: a pure grey's comes out of float32 rounding
# (about 1e-7) and points anywhere, and blending towards it would tint a photo's white sky at random.
GREY_CHROMA = 1e-4


def blend(photo: np.ndarray, anime: np.ndarray, strength: float) -> np.ndarray:
    """``strength`` 0 gives the photo, 1 the anime image, in between an OkLCh mix. A grey on either side
    takes the other side's hue (its chroma grows from nothing along it)."""
    if strength <= 0:
        return np.asarray(photo, np.uint8)
    if strength >= 1:
        return np.asarray(anime, np.uint8)
    p, a = srgb_to_oklab(photo), srgb_to_oklab(anime)
    cp, ca = np.hypot(p[..., 1], p[..., 2]), np.hypot(a[..., 1], a[..., 2])
    hp, ha = np.arctan2(p[..., 2], p[..., 1]), np.arctan2(a[..., 2], a[..., 1])
    hp, ha = np.where(cp < GREY_CHROMA, ha, hp), np.where(ca < GREY_CHROMA, hp, ha)
    dh = (ha - hp + np.pi) % (2 * np.pi) - np.pi  # the shorter way round
    hue = hp + strength * dh
    chroma = cp + strength * (ca - cp)
    out = np.empty_like(p)
    out[..., 0] = p[..., 0] + strength * (a[..., 0] - p[..., 0])
    out[..., 1] = chroma * np.cos(hue)
    out[..., 2] = chroma * np.sin(hue)
    return oklab_to_srgb(out)


def keep_colours(photo: np.ndarray, anime: np.ndarray) -> np.ndarray:
    """The anime image's lightness (its shading and lines) with the photo's colours."""
    p, a = srgb_to_oklab(photo), srgb_to_oklab(anime)
    p[..., 0] = a[..., 0]
    return oklab_to_srgb(p)
