"""Every input a person might send: decoded right, or refused with a clear message."""
from __future__ import annotations

import io
import zlib
import struct

import numpy as np
import pytest
from PIL import Image

from inference.backends import TorchStylizer
from inference.errors import ImageError
from inference.imageio import decode
from inference.pipeline import convert_bytes, resize
from testkit.phone_files import FORMATS as PHONE_FORMATS, as_phone_file


def _save(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def _gradient(w: int = 64, h: int = 48) -> Image.Image:
    x = np.linspace(0, 255, w, dtype=np.float32)[None, :, None]
    y = np.linspace(0, 255, h, dtype=np.float32)[:, None, None]
    arr = np.concatenate([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2)
    return Image.fromarray(arr.astype(np.uint8), "RGB")


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "BMP", "TIFF"])
def test_common_formats_decode_to_rgb(fmt: str) -> None:
    img = decode(_save(_gradient(), fmt))
    assert img.mode == "RGB" and img.size == (64, 48)
    assert np.abs(np.asarray(img, np.int32) - np.asarray(_gradient(), np.int32)).mean() < 4


def test_transparency_is_flattened_onto_white() -> None:
    rgba = Image.new("RGBA", (40, 40), (255, 0, 0, 255))
    rgba.paste((0, 0, 0, 0), (0, 0, 20, 40))  # left half fully transparent black
    out = np.asarray(decode(_save(rgba, "PNG")))
    assert tuple(out[10, 5]) == (255, 255, 255)
    assert tuple(out[10, 30]) == (255, 0, 0)


def test_palette_with_transparency_is_flattened() -> None:
    pal = Image.new("P", (40, 40), 0)
    pal.putpalette([0, 0, 0, 0, 255, 0] + [0] * 762)
    pal.paste(1, (20, 0, 40, 40))
    out = np.asarray(decode(_save(pal, "PNG", transparency=0)))
    assert tuple(out[5, 5]) == (255, 255, 255) and tuple(out[5, 30]) == (0, 255, 0)


def test_sixteen_bit_grey_is_scaled_not_clipped() -> None:
    arr = np.zeros((40, 40), np.uint16)
    arr[:, :20] = 32768
    arr[:, 20:] = 65535
    img = Image.fromarray(arr)
    assert img.mode.startswith("I;16")
    out = np.asarray(decode(_save(img, "PNG")))
    assert tuple(out[0, 0]) == (128, 128, 128)
    assert tuple(out[0, 39]) == (255, 255, 255)


def test_greyscale_becomes_rgb() -> None:
    out = decode(_save(Image.new("L", (40, 40), 77), "PNG"))
    assert out.mode == "RGB" and out.getpixel((0, 0)) == (77, 77, 77)


def test_gif_gives_its_first_frame() -> None:
    frames = [Image.new("RGB", (40, 40), c) for c in ((255, 0, 0), (0, 0, 255))]
    data = _save(frames[0], "GIF", save_all=True, append_images=frames[1:])
    r, g, b = decode(data).getpixel((20, 20))
    assert r > 200 and b < 50


def test_exif_orientation_is_applied() -> None:
    img = Image.new("RGB", (80, 40), (0, 0, 0))
    img.paste((255, 255, 255), (0, 0, 40, 40))  # white on the left
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    out = decode(_save(img, "JPEG", exif=exif.tobytes()))
    assert out.size == (40, 80)
    assert sum(out.getpixel((20, 10))) > 600  # left became top


@pytest.mark.parametrize("fmt", PHONE_FORMATS)
def test_a_phone_s_heic_or_avif_is_read_upright_turned_exactly_once(fmt: str, tiny_model: TorchStylizer) -> None:
    upright = Image.new("RGB", (64, 96), (230, 20, 20))
    upright.paste((20, 20, 230), (0, 0, 64, 32))  # blue on top
    data = as_phone_file(_save(upright, "PNG"), fmt)
    img = decode(data)
    assert img.size == img.info["source_size"] == (64, 96)  # unturned or turned twice: 96x64
    top, bottom = img.getpixel((32, 8)), img.getpixel((32, 88))
    assert top[2] > 180 > top[0] and bottom[0] > 180 > bottom[2]  # turned the wrong way: blue at the bottom
    assert Image.open(io.BytesIO(convert_bytes(data, tiny_model).data)).size == (64, 96)


@pytest.mark.slow  # encodes and decodes a 12-megapixel JPEG
def test_a_phone_sized_jpeg_is_decoded_at_a_reduced_scale_for_a_small_result() -> None:
    big = _gradient(64, 48).resize((4032, 3024), Image.Resampling.BICUBIC)
    exif = Image.Exif()
    exif[0x0112] = 6  # held upright: the file is landscape, the photo portrait
    data = _save(big, "JPEG", quality=90, exif=exif.tobytes())
    full = decode(data)
    reduced = decode(data, at_least=720)
    assert full.size == (3024, 4032) and full.info["source_size"] == (3024, 4032)
    assert reduced.size == (756, 1008) and reduced.info["source_size"] == (3024, 4032)  # libjpeg's 1/4 scale
    assert decode(data, at_least=1440).size == (1512, 2016)
    small_ref, small = resize(full, 720), resize(reduced, 720)
    assert small.size == small_ref.size == (540, 720)
    mse = np.mean((np.asarray(small, np.float64) - np.asarray(small_ref, np.float64)) ** 2)
    assert 10 * np.log10(255**2 / mse) > 38
    png = _save(big, "PNG")
    assert decode(png, at_least=720).size == (4032, 3024)  # only JPEG has a cheap reduced decode


def _bomb_png(width: int, height: int) -> bytes:
    """A valid PNG header claiming width x height, compressed to a few KB."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    row = b"\x00" + b"\x00" * (width // 8 + 1)
    raw = zlib.compress(row * 64, 9)  # only a few rows: the header is what matters
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


BAD_INPUTS = {
    "empty": (b"", "empty"),
    "not_image": (b"%PDF-1.4 this is not a picture\n" * 20, "not_image"),
    "truncated": (None, "corrupt"),
    "bomb": (_bomb_png(20000, 20000), "too_large"),
    "one_pixel": (_save(Image.new("RGB", (1, 1)), "PNG"), "too_small"),
    "sliver": (_save(Image.new("L", (20000, 10)), "PNG"), "aspect"),  # 10 px is narrow, but 2000:1 says more
    "speck": (_save(Image.new("L", (20, 12)), "PNG"), "too_small"),
    "long_strip": (_save(Image.new("L", (4200, 200)), "PNG"), "aspect"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_gets_a_clean_error(name: str, tiny_model: TorchStylizer) -> None:
    data, code = BAD_INPUTS[name]
    if data is None:
        full = _save(_gradient(640, 480), "JPEG", quality=95)
        data = full[: len(full) // 2]
    with pytest.raises(ImageError) as info:
        convert_bytes(data, tiny_model)
    assert info.value.code == code
    msg = info.value.message
    assert msg and "Traceback" not in msg and len(msg) < 200
    assert msg[0].isupper() and msg.endswith(".")
