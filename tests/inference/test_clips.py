"""Clips as a person sees them come back: the rate, length, sound, orientation and size they
expect, a one-sentence answer for every file that is not a clip we can draw, and frames that are
the photo path's drawings.

The mechanics run on the tiny random generator and on clips made here (testkit/clip_maker.py).
Where which input frame is shown is the point, the clip is drawn at strength 0 without the
flicker remedy (PASS_THROUGH): each output frame is then the input frame the engine read, and
numbered frames say which one it was.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from PIL import Image

from storage.errors import AnimebotError
from inference.backends import Stylizer
from inference.clip_io import ClipError, ClipInfo, plan, probe, write_gif
from inference.clip_settings import ClipLimits, ClipSettings
from inference.clips import ClipCancelled, convert_clip, draw_frame, is_clip
from testkit.clip_maker import frame_number, gif, mp4, numbered_frames, pan_frames, read_back
from testkit.pictures import psnr, synthetic_image, synthetic_photo
from weights.store import ModelStore

pytestmark = pytest.mark.slow  # every test here encodes and decodes real video and sound with PyAV

PASS_THROUGH = ClipSettings(strength=0, steady=False)


@lru_cache(maxsize=None)
def photo() -> bytes:
    """Any photo will do for the camera to pan over: a synthetic one, so no test here needs ../shared."""
    return synthetic_photo(640, 480)


def pan(frames: int, size: tuple[int, int]) -> list[np.ndarray]:
    return pan_frames(photo(), frames, size)


def shown(data: bytes) -> list[int]:
    """Which numbered input frame each frame of an output clip shows."""
    return [frame_number(f) for f in read_back(data)["frames"]]


def animebot(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a person runs it (as tests/cli/test_cli.py does)."""
    script = Path(sys.executable).with_name("animebot")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "bot"]
    env = {**os.environ, "ANIMEBOT_HOME": str(home)}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=300)


# --- rate and length -------------------------------------------------------------------------

def test_a_30_fps_clip_comes_back_at_15_fps_for_as_long_without_sound(tiny_model: Stylizer) -> None:
    result = convert_clip(mp4(pan(60, (320, 240)), 30), tiny_model)
    out = read_back(result.data)
    assert out["codec"] == "h264" and result.data[4:8] == b"ftyp"
    assert out["fps"] == pytest.approx(15, abs=0.01) and len(out["frames"]) == 30 == result.frames
    assert out["seconds"] == pytest.approx(2.0, rel=0.05)
    assert out["size"] == (320, 240) and not result.plan.trimmed
    assert out["audio"] is None and result.sound is None  # nothing to keep, and nothing said about it


def test_dropping_to_15_fps_keeps_every_other_frame(tiny_model: Stylizer) -> None:
    """Even dropping: motion stays smooth and in time, rather than stuttering or speeding up."""
    result = convert_clip(mp4(numbered_frames(60, (160, 96)), 30), tiny_model, PASS_THROUGH)
    assert shown(result.data) == list(range(0, 60, 2))


def test_a_10_fps_gif_stays_10_fps_and_silent(tiny_model: Stylizer) -> None:
    result = convert_clip(gif(numbered_frames(20, (160, 96)), 10), tiny_model, PASS_THROUGH)
    out = read_back(result.data)
    assert out["fps"] == pytest.approx(10, abs=0.01) and out["seconds"] == pytest.approx(2.0, rel=0.05)
    assert shown(result.data) == list(range(20))
    assert out["audio"] is None and result.sound is None


def test_a_variable_rate_clip_keeps_its_length_and_shows_each_frame_when_it_was_shown(
        tiny_model: Stylizer) -> None:
    """A phone drops to 10 fps in the dark: the second second must not be squeezed or lost."""
    times = [i / 30 for i in range(30)] + [1 + i / 10 for i in range(10)]
    source = mp4(numbered_frames(len(times), (160, 96)), 10, times=times)  # the last frame lasts 1/10 s
    length = read_back(source)["seconds"]
    assert length == pytest.approx(2.0, abs=0.1)  # the clip is what the test means it to be
    result = convert_clip(source, tiny_model, PASS_THROUGH)
    out = read_back(result.data)
    assert out["seconds"] == pytest.approx(length, abs=1 / 15)
    numbers = shown(result.data)
    assert numbers[:15] == list(range(0, 30, 2))  # the first second: every other frame
    assert set(range(30, 40)) <= set(numbers)  # the second: each frame, none lost...
    assert numbers == sorted(numbers)
    assert all(abs(times[n] - k / 15) <= 1 / 15 for k, n in enumerate(numbers))  # ...each when it was shown
    assert result.drawn == len(set(numbers)) < result.frames  # a held frame is not drawn twice


def test_a_gif_that_pauses_on_its_last_frame_keeps_its_motion(tiny_model: Stylizer) -> None:
    """A second of 20 fps, then the last frame for two: 7 fps on average, which would make the
    motion choppy; it comes back at the 15 fps cap, the pause as long as it was."""
    images = [Image.fromarray(f) for f in numbered_frames(21, (160, 96))]
    buf = io.BytesIO()
    images[0].save(buf, "GIF", save_all=True, append_images=images[1:], duration=[50] * 20 + [2000], loop=0)
    result = convert_clip(buf.getvalue(), tiny_model, PASS_THROUGH)
    out = read_back(result.data)
    assert out["fps"] == pytest.approx(15, abs=0.01) and out["seconds"] == pytest.approx(3.0, rel=0.05)
    numbers = shown(result.data)
    assert len(set(numbers[:15])) == 15 and numbers == sorted(numbers)  # a new picture at every tick...
    assert numbers[15:] == [20] * 30  # ...then the pause
    assert result.drawn == 16


# --- sound -----------------------------------------------------------------------------------

def test_aac_sound_is_kept_for_as_long(tiny_model: Stylizer) -> None:
    result = convert_clip(mp4(pan(30, (160, 96)), 15, sound_s=2.0), tiny_model)
    out = read_back(result.data)
    assert result.sound == "kept" and out["audio"] == "aac"
    assert out["audio_s"] == pytest.approx(2.0, rel=0.05) and out["seconds"] == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize(("audio_codec", "heard_as"), [("libopus", "aac"), ("vorbis", "aac")])
def test_a_webm_comes_back_as_mp4_with_its_sound(tiny_model: Stylizer, audio_codec: str, heard_as: str) -> None:
    """A WebM's Opus or Vorbis is re-encoded to AAC, which every Telegram client plays in an MP4."""
    source = mp4(pan(20, (160, 96)), 10, sound_s=2.0, fmt="webm", codec="libvpx-vp9", audio_codec=audio_codec)
    assert is_clip(source) and probe(source).codec == "vp9"
    result = convert_clip(source, tiny_model)
    out = read_back(result.data)
    assert result.data[4:8] == b"ftyp" and out["codec"] == "h264"
    assert result.sound == "kept" and out["audio"] == heard_as
    assert out["audio_s"] == pytest.approx(2.0, abs=0.1)


def test_a_clip_whose_sound_is_damaged_is_drawn_silent_and_says_so(tiny_model: Stylizer) -> None:
    result = convert_clip(mp4(pan(20, (160, 96)), 10, sound_s=2.0, garbled_sound=True), tiny_model)
    out = read_back(result.data)
    assert result.sound == "damaged" and out["audio"] is None
    assert len(out["frames"]) == 20 and out["seconds"] == pytest.approx(2.0, rel=0.05)


# --- orientation and size --------------------------------------------------------------------

@pytest.mark.parametrize("rotation", [90, 270])
def test_a_portrait_video_stored_sideways_comes_back_upright(tiny_model: Stylizer, rotation: int) -> None:
    """Phones store a portrait video as landscape frames and a rotation to show them with."""
    upright = np.asarray(synthetic_image(192, 320))
    stored = np.ascontiguousarray(np.rot90(upright, -rotation // 90))  # what displaying turns back
    source = mp4([stored] * 10, 10, rotation=rotation)
    assert probe(source).rotation == rotation
    result = convert_clip(source, tiny_model, ClipSettings(steady=False))
    out = read_back(result.data)
    assert out["size"] == (192, 320)
    expected = draw_frame(upright, tiny_model, ClipSettings())
    assert psnr(out["frames"][5], expected) >= 30
    assert psnr(out["frames"][5], np.rot90(expected, 2)) < 25  # and not upside down


def test_the_long_side_is_capped_and_sides_are_even(tiny_model: Stylizer) -> None:
    capped = convert_clip(mp4(pan(10, (640, 360)), 10), tiny_model, ClipSettings(ClipLimits(max_side=256)))
    assert read_back(capped.data)["size"] == (256, 144)
    odd = convert_clip(gif(pan(10, (175, 99)), 10), tiny_model)  # H.264's 4:2:0 needs even sides
    assert read_back(odd.data)["size"] == odd.plan.size == (174, 98)


def test_a_clip_longer_than_the_limit_is_cut_with_its_sound(tiny_model: Stylizer) -> None:
    result = convert_clip(mp4(pan(30, (160, 96)), 10, sound_s=3.0), tiny_model,
                          ClipSettings(ClipLimits(max_seconds=1.0)))
    out = read_back(result.data)
    assert result.plan.trimmed and result.plan.seconds == 1.0
    assert len(out["frames"]) == 10 and out["seconds"] == pytest.approx(1.0, rel=0.05)
    assert out["audio_s"] == pytest.approx(1.0, abs=0.05)


# --- GIF -------------------------------------------------------------------------------------

def test_a_transparent_gif_is_flattened_onto_white(tiny_model: Stylizer) -> None:
    result = convert_clip(gif(pan(10, (160, 96)), 10, transparent_corner=True), tiny_model, PASS_THROUGH)
    for frame in read_back(result.data)["frames"]:
        assert frame[:48, :80].mean() > 245  # not black, as transparency read as colour 0 would be
        assert frame[48:, 80:].mean() < 200  # the picture itself is still there


def test_gif_output_is_an_animated_gif_with_every_frame(tiny_model: Stylizer) -> None:
    result = convert_clip(mp4(pan(60, (160, 96)), 30), tiny_model, ClipSettings(fmt="gif"))
    with Image.open(io.BytesIO(result.data)) as img:
        assert img.format == "GIF" and img.is_animated and img.size == (160, 96)
        assert img.n_frames == 30 == result.frames
        assert img.info["duration"] == pytest.approx(1000 / 15, abs=10)
    assert is_clip(result.data)


def test_write_gif_keeps_every_frame_and_refuses_none() -> None:
    frames = numbered_frames(12, (64, 32))
    data = write_gif(iter(frames), 12)
    with Image.open(io.BytesIO(data)) as img:
        got = []
        for i in range(img.n_frames):
            img.seek(i)
            got.append(frame_number(np.asarray(img.convert("RGB"))))
    assert got == list(range(12))
    with pytest.raises(ClipError):
        write_gif(iter([]), 12)


# --- cancel and progress ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["mp4", "gif"])
def test_cancel_stops_the_clip_and_leaves_no_files(tiny_model: Stylizer, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    asked: list[int] = []
    working: list[bool] = []

    def cancelled() -> bool:
        asked.append(1)
        working.append(any(tmp_path.glob("animebot-clip-*")))
        return len(asked) > 5

    with pytest.raises(ClipCancelled):
        convert_clip(mp4(pan(60, (160, 96)), 30), tiny_model, ClipSettings(fmt=fmt), cancelled=cancelled)
    assert len(asked) == 6  # asked before each frame, and nothing drawn after the answer was yes
    assert all(working) == (fmt == "mp4")  # the MP4 writer's file existed while it worked...
    assert not list(tmp_path.iterdir())  # ...and is gone


def test_progress_rises_to_the_total(tiny_model: Stylizer) -> None:
    seen: list[tuple[int, int]] = []
    result = convert_clip(mp4(pan(60, (160, 96)), 30), tiny_model, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(n, 30) for n in range(1, 31)] and result.frames == 30


# --- hostile input ---------------------------------------------------------------------------

def one_sentence(exc: AnimebotError) -> None:
    """The error is one the bot and the CLI can show a person as it is."""
    assert exc.code == "bad_clip" and exc.message.endswith(".") and exc.message.count(". ") == 0
    assert "\n" not in exc.message and len(exc.message) < 120


def test_an_mp4_cut_before_its_index_is_refused(tiny_model: Stylizer) -> None:
    source = mp4(pan(20, (160, 96)), 10)
    assert source.find(b"moov") > len(source) // 2  # as a camera writes it: the index last
    with pytest.raises(ClipError) as err:
        convert_clip(source[: len(source) // 2], tiny_model)
    one_sentence(err.value)


def test_an_mp4_cut_after_its_index_comes_back_as_the_part_it_has(tiny_model: Stylizer) -> None:
    """Index first (as this engine and Telegram write MP4): the first half of the bytes still plays,
    with the sound up to the cut, even where the cut falls inside a sound packet."""
    whole = convert_clip(mp4(numbered_frames(60, (160, 96)), 30, sound_s=2.0), tiny_model, PASS_THROUGH).data
    assert whole.find(b"moov") < whole.find(b"mdat")
    with av.open(io.BytesIO(whole)) as container:
        cut = next(p for p in container.demux(container.streams.audio[0]) if p.pos > len(whole) // 2)
    result = convert_clip(whole[: cut.pos + cut.size // 2], tiny_model, PASS_THROUGH)
    out = read_back(result.data)
    numbers = shown(result.data)
    assert 5 <= len(numbers) < 25
    # Each frame at its time (or the one before it, where its packet lay past the cut)...
    assert all(2 * k - 2 <= n <= 2 * k for k, n in enumerate(numbers))
    assert len(numbers) == numbers[-1] // 2 + 1  # ...and no still picture after the last one
    assert out["seconds"] == pytest.approx(len(numbers) / 15, abs=0.07)
    assert result.sound == "kept" and out["audio_s"] == pytest.approx(float(cut.pts * cut.time_base), abs=0.03)


@pytest.mark.parametrize("data", [
    b"hello, this is not a video at all\n" * 100,
    b"\x00\x00\x00\x18ftypisom" + b"not really an mp4" * 50,
], ids=["text", "fake-mp4-header"])
def test_a_file_that_is_not_a_video_gets_one_sentence(tiny_model: Stylizer, data: bytes) -> None:
    with pytest.raises(ClipError) as err:
        convert_clip(data, tiny_model)
    one_sentence(err.value)


def test_a_one_frame_gif_is_a_picture() -> None:
    assert not is_clip(gif(pan(1, (64, 48)), 10))
    assert is_clip(gif(pan(2, (64, 48)), 10))


def test_a_gif_of_1x1_frames_is_too_small(tiny_model: Stylizer) -> None:
    tiny = gif([np.full((1, 1, 3), i * 5, np.uint8) for i in range(50)], 10)
    assert is_clip(tiny)
    with pytest.raises(ClipError) as err:
        convert_clip(tiny, tiny_model)
    one_sentence(err.value)
    assert "too small" in err.value.message


def huge_declared_mov() -> bytes:
    """A QuickTime file of raw 64x48 frames whose sample description claims 16000x16000: raw
    video has no size of its own, so the decoder would believe it and allocate 768 MB a frame."""
    buf = io.BytesIO()
    with av.open(buf, "w", format="mov") as out:
        stream = out.add_stream("rawvideo", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "rgb24"
        for rgb in pan(5, (64, 48)):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        out.mux(stream.encode(None))
    data = bytearray(buf.getvalue())
    entry = data.index(b"raw ", data.index(b"stsd"))  # the sample entry; its width and height 24 bytes on
    data[entry + 28:entry + 32] = (16000).to_bytes(2, "big") * 2
    return bytes(data)


def test_a_header_declaring_huge_frames_is_refused_before_decoding(tiny_model: Stylizer) -> None:
    data = huge_declared_mov()
    assert is_clip(data)
    with pytest.raises(ClipError) as err:
        convert_clip(data, tiny_model)
    one_sentence(err.value)
    assert "16000x16000" in err.value.message and "too big" in err.value.message


# --- the CLI ---------------------------------------------------------------------------------

def test_cli_converts_a_clip_to_mp4_and_reports_it(tiny_store: ModelStore, tmp_path: Path) -> None:
    src = tmp_path / "walk.mov"
    src.write_bytes(mp4(pan(30, (160, 96)), 30, fmt="mov", sound_s=1.0))
    out = tmp_path / "walk.mp4"
    done = animebot(tiny_store.home, "convert", str(src), "-o", str(out), "--style", "tiny", "--fps", "10", "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["ok"] and report["kind"] == "clip" and report["output"] == str(out)
    assert report["frames"] == 10 and report["fps"] == 10 and report["seconds"] == pytest.approx(1.0)
    assert report["sound"] == "kept" and report["output_size"] == [160, 96]
    back = read_back(out.read_bytes())
    assert len(back["frames"]) == 10 and back["fps"] == pytest.approx(10) and back["audio"] == "aac"


def test_cli_refuses_a_picture_name_for_a_clip_in_one_line(tiny_store: ModelStore, tmp_path: Path) -> None:
    src = tmp_path / "walk.mp4"
    src.write_bytes(mp4(pan(10, (160, 96)), 10))
    # tiny_store has no face detector: a clip, which never uses the face pass, must not warn of it
    done = animebot(tiny_store.home, "convert", str(src), "-o", str(tmp_path / "out.jpg"), "--style", "tiny")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert ".mp4 or .gif" in done.stderr
    assert not (tmp_path / "out.jpg").exists()


# --- the real model --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hayao(real_store: ModelStore) -> Stylizer:
    from inference.engine import load_stylizer

    return load_stylizer(real_store, "hayao")


@pytest.mark.parametrize("steady", [False, True])
def test_each_frame_is_the_photo_paths_drawing(hayao: Stylizer, shared_photo: Callable[[str], bytes],
                                               steady: bool) -> None:
    """The clip is the photo path frame by frame (the flicker remedy included, on a moving camera)."""
    from inference.pipeline import resize, stylize

    source = mp4(pan_frames(shared_photo("street_1279x867.jpg"), 30, (480, 270)), 30)
    result = convert_clip(source, hayao, ClipSettings(ClipLimits(max_side=320), steady=steady))
    frames = read_back(result.data)["frames"]
    inputs = read_back(source)["frames"]
    assert len(frames) == 15 and frames[0].shape == (180, 320, 3)
    for k in (0, 7, 14):
        reference = np.asarray(stylize(resize(Image.fromarray(inputs[2 * k]), 320), hayao))
        assert psnr(frames[k], reference) >= 30, f"frame {k}"


def test_a_wide_clip_keeps_its_long_side_within_the_limit_and_a_sliver_is_refused() -> None:
    """No panorama allowance for clips (photos get one): every frame of a wide clip costs."""
    wide = plan(ClipInfo(1920, 540, 0, 30.0, 2.0, None, "h264"), ClipLimits())
    assert wide.size == (480, 134)  # 135 rounded down to even, as H.264's 4:2:0 needs
    frames = [np.full((32, 1280, 3), 128, np.uint8)] * 4
    with pytest.raises(ClipError, match="too long and thin"):
        probe(mp4(frames, 10))
