"""``animebot convert``: image and clip files in, anime files out, one line (or JSON object) each.

Kept apart from bot/cli/main.py because most of it is about outputs: picking a
name that overwrites neither an input nor another output, and turning every
way a write can fail into one line while the other inputs still convert.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from storage.errors import AnimebotError
from inference.clip_settings import ClipLimits
from inference.clips import FORMATS as CLIP_FORMATS
from inference.clip_settings import ClipSettings
from inference.clips import ConvertedClip, convert_clip, is_clip
from inference.drawer import Drawer, DrawerSpec, WorkFailed
from inference.engine import UPSCALER
from inference.pipeline import DEFAULT_MAX_SIDE, ConvertSettings, Converted, FaceTools
from weights.store import ModelStore, data_home, default_style


def convert(args: argparse.Namespace) -> int:
    """``animebot convert``: draw each input to a file of its own; one line per input that fails."""
    _check_options(args)
    still_fmt, clip_fmt = _output_formats(args)
    store = ModelStore(data_home())
    style = args.style or default_style(store)
    store.require_style(style)
    if args.hd:
        store.require(UPSCALER)  # one line now, not one per input, when HD is not installed
    painter = _Painter(args, Drawer(DrawerSpec(store.home, args.backend, args.threads, style)), style, still_fmt,
                       clip_fmt)
    names = _Names(args, f"{style}-hd" if args.hd else style)
    failed = 0
    for src in args.inputs:
        dest = None
        try:
            data = read_input(src)
            clip = is_clip(data)
            if clip and args.hd:
                raise AnimebotError(f"{src} is a clip; --hd doubles pictures only", code="hd_clip")
            dest = names.next(src, clip_fmt if clip else still_fmt, clip)
            _check_destination(dest)
            if clip:
                moving = convert_clip(data, painter.model, painter.clip_settings)
                _write(dest, moving.data)
                _report_clip(args, src, dest, moving)
                continue
            result = painter.picture(data, src)
            _write(dest, result.data)
        except AnimebotError as exc:
            failed += 1
            _report_failure(args, src, dest, exc)
            continue
        _report_picture(args, src, dest, result, painter.faces)
    return 1 if failed else 0


def _check_options(args: argparse.Namespace) -> None:
    """Every option's range, before any model loads: a mistake costs one line, not a minute."""
    if args.output and len(args.inputs) > 1:
        raise AnimebotError("-o takes one input; use --out-dir for several")
    _check_range("--quality", args.quality, 1, 95)
    if args.max_side is not None and args.max_side < 64:
        raise AnimebotError("--max-side must be at least 64")
    if not 0 < args.max_seconds <= 600 or not 1 <= args.fps <= 60:
        raise AnimebotError("--max-seconds must be between 0 and 600, and --fps between 1 and 60")
    _check_range("--strength", args.strength, 0, 100)
    if args.threads is not None:
        _check_range("--threads", args.threads, 1, 256)  # as ANIMEBOT_THREADS


class _Painter:
    """The models and settings every input is drawn with, loaded as the bot's workers load them; the face
    tools with the first picture (clips skip the face pass)."""

    def __init__(self, args: argparse.Namespace, drawer: Drawer, style: str, still_fmt: str, clip_fmt: str) -> None:
        self.args, self.drawer, self.style, self.still_fmt = args, drawer, style, still_fmt
        self.model = drawer.model(style)
        self.faces: tuple[FaceTools | None, str] | None = None
        # HD doubles the drawing's own pixels: drawn to PNG (lossless), not to the output's JPEG.
        self.settings = ConvertSettings(max_side=args.max_side or DEFAULT_MAX_SIDE, fmt="png" if args.hd else still_fmt,
                                        jpeg_quality=args.quality, faces=args.faces, strength=args.strength,
                                        keep_colours=args.keep_colours)
        self.clip_settings = ClipSettings(ClipLimits(args.max_seconds, args.fps, args.max_side or ClipLimits.max_side),
                                          clip_fmt, strength=args.strength, keep_colours=args.keep_colours)

    def picture(self, data: bytes, src: Path) -> Converted:
        from inference.pipeline import convert_bytes

        self.faces = self.faces or _face_tools(self.drawer, self.style, self.args)
        result = convert_bytes(data, self.model, self.settings, self.faces[0])
        if self.args.hd:
            result = _doubled(result, self.drawer, src, self.still_fmt, self.args.quality)
        return result


def _report_failure(args: argparse.Namespace, src: Path, dest: Path | None, exc: AnimebotError) -> None:
    if args.json:
        print(json.dumps({"input": str(src), "output": str(dest) if dest else None, "ok": False,
                          "error": exc.code, "message": exc.message}))
    else:
        print(f"{src}: {exc.message}", file=sys.stderr)


def _report_picture(args: argparse.Namespace, src: Path, dest: Path | None, result: Converted,
                    faces: tuple[FaceTools | None, str] | None) -> None:
    face_tools, faces_skipped = faces or (None, "")
    if args.json:
        print(json.dumps({
            "input": str(src), "output": str(dest), "ok": True, "input_size": list(result.input_size),
            "output_size": list(result.output_size), "style": result.style, "backend": result.backend,
            **{k: round(v, 4) for k, v in result.timings.items()},
            # null, with the reason, when the face pass did not run: not "ran and found none"
            "faces": result.faces if face_tools else None,
            **({} if face_tools else {"faces_skipped": faces_skipped}),
        }))
    else:
        w, h = result.output_size
        total = sum(result.timings.values())
        print(f"{src} -> {dest} ({w}x{h}, {result.style}, {result.backend}, {total:.1f} s)")


def _doubled(drawn: Converted, drawer: Drawer, src: Path, fmt: str, quality: int) -> Converted:
    """The drawing doubled (``--hd``) by the drawer, as the bot's workers will double a result, as a
    ``fmt`` file; its timings gain the doubling's, as ``hd_s``."""
    hd = drawer.hd(str(src), drawn.data, fmt, quality)
    if isinstance(hd, WorkFailed):
        raise AnimebotError(hd.message, code=hd.code)
    return replace(drawn, data=hd.data, output_size=hd.output_size,
                   timings={**drawn.timings, "hd_s": sum(hd.timings.values())})


def _report_clip(args: argparse.Namespace, src: Path, dest: Path, clip: ConvertedClip) -> None:
    w, h = clip.plan.size
    if args.json:
        print(json.dumps({
            "input": str(src), "output": str(dest), "ok": True, "kind": "clip",
            "input_size": [clip.source.width, clip.source.height], "output_size": [w, h],
            "style": clip.style, "backend": clip.backend, "frames": clip.frames, "drawn": clip.drawn,
            "fps": round(float(clip.plan.fps), 4), "seconds": round(clip.frames / float(clip.plan.fps), 4),
            "input_seconds": round(clip.source.seconds, 4), "trimmed": clip.plan.trimmed, "sound": clip.sound,
            **{k: round(v, 4) for k, v in clip.timings.items()},
        }))
        return
    notes = (", cut to the first {:g} s".format(clip.plan.seconds) if clip.plan.trimmed else "") + \
        (", its sound could not be read" if clip.sound == "damaged" else "")
    print(f"{src} -> {dest} ({w}x{h}, {clip.frames} frames at {float(clip.plan.fps):g} fps, {clip.style}, "
          f"{clip.backend}, {clip.timings['total_s']:.1f} s{notes})")


def _check_range(option: str, value: int, lo: int, hi: int) -> None:
    """One line and exit 2 for an option out of its range, before a backend fails on it deep inside."""
    if not lo <= value <= hi:
        raise AnimebotError(f"{option} must be between {lo} and {hi}")


class _Names:
    """Each input's output path: never an input, never another input's output.

    Under --out-dir (or in this folder) outputs are named INPUT-STEM.STYLE.FORMAT,
    so inputs that share a stem (a/x.jpg and b/x.jpg, x.jpg and x.png) would
    overwrite each other's result: the second gets INPUT-STEM-2, and so on.
    A name that is one of the inputs is skipped the same way, so a result
    never replaces a photo, not even one still waiting to be converted.
    """

    def __init__(self, args: argparse.Namespace, style: str) -> None:
        self.args, self.style = args, style
        self.taken = {_identity(p) for p in args.inputs}
        src, out = args.inputs[0], args.output
        if out is not None and out.exists() and src.exists() and out.samefile(src):
            raise AnimebotError(f"-o {out} is the input itself; choose another name for the output")

    def next(self, src: Path, fmt: str, clip: bool) -> Path:
        if self.args.output:
            implied = _format_of(self.args.output)
            if implied is not None and (implied in CLIP_FORMATS) != clip:
                kind, wanted = ("a clip", ".mp4 or .gif") if clip else ("a picture", ".jpg or .png")
                raise AnimebotError(f"{src} is {kind}: name the output {wanted}")
            return Path(self.args.output)
        folder = self.args.out_dir or Path(".")
        dest, n = folder / f"{src.stem}.{self.style}.{fmt}", 1
        while _identity(dest) in self.taken:
            n += 1
            dest = folder / f"{src.stem}-{n}.{self.style}.{fmt}"
        self.taken.add(_identity(dest))
        return dest


def _identity(path: Path) -> str:
    """Two paths with the same identity may be one file: absolute, links followed, and case
    ignored, as macOS and Windows file systems do (elsewhere that costs at most a needless -2)."""
    return str(path.resolve()).casefold()


def _check_destination(dest: Path) -> None:
    """Refuse an output path that cannot take a file before the photo is drawn for it, making its folder."""
    if dest.is_dir():
        raise _cannot_write(dest, "it is a folder")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise _cannot_write(dest, f"{dest.parent} is a file, not a folder") from None
    except OSError as exc:
        raise _cannot_write(dest, exc.strerror) from None


def _write(dest: Path, data: bytes) -> None:
    try:
        dest.write_bytes(data)
    except OSError as exc:
        raise _cannot_write(dest, exc.strerror) from None


def _cannot_write(dest: Path, why: str | None) -> AnimebotError:
    return AnimebotError(f"cannot write {dest}: {why}", code="output")


def _face_tools(drawer: Drawer, style: str, args: argparse.Namespace) -> tuple[FaceTools | None, str]:
    """The face pass's models, or None and why not (said once here when it was asked for)."""
    if not args.faces:
        return None, "turned off (--no-faces)"
    tools = drawer.face_tools(style)
    if drawer.face_problem:
        print(f"animebot: {drawer.face_problem}; drawing without the face pass", file=sys.stderr)
        return None, drawer.face_problem
    return tools, "" if tools else f"{style} has no face pass (its faces are drawn with the rest)"


def _output_formats(args: argparse.Namespace) -> tuple[str, str]:
    """The format for pictures (jpg or png) and for clips (mp4 or gif): from -o's suffix, which
    --format may repeat but not contradict, else --format, else jpg and mp4.

    A ``.png`` holding JPEG bytes misleads every program that opens it, so a
    contradiction is refused rather than settled silently either way.
    """
    still, clip = "jpg", "mp4"
    if args.format:
        still, clip = (still, args.format) if args.format in CLIP_FORMATS else (args.format, clip)
    if args.output is None:
        return still, clip
    implied = _format_of(args.output)
    if implied is None:
        if args.format:
            return still, clip
        raise AnimebotError(f"{args.output.name}: output must end in .jpg, .png, .mp4 or .gif (or pass --format)")
    if args.format and args.format != implied:
        raise AnimebotError(f"-o {args.output.name} names a {implied} file but --format is {args.format}; "
                            "make them agree")
    return (still, implied) if implied in CLIP_FORMATS else (implied, clip)


def _format_of(path: Path) -> str | None:
    """The format a file name's suffix promises, if it is one we write."""
    return {"jpg": "jpg", "jpeg": "jpg", "png": "png", "mp4": "mp4", "gif": "gif"}.get(
        path.suffix.lower().lstrip("."))


def read_input(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise AnimebotError(f"cannot read {path}: {exc.strerror}", code="io") from None
