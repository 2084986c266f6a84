"""``animebot convert``: image files in, anime files out, one line (or JSON object) each.

Kept apart from bot/cli.py because most of it is about outputs: picking a
name that overwrites neither an input nor another output, and turning every
way a write can fail into one line while the other inputs still convert.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from inference.backends import Stylizer
from inference.errors import AnimebotError
from inference.pipeline import ConvertSettings, FaceTools
from weights.store import ModelStore, data_home, default_style


def convert(args: argparse.Namespace) -> int:
    """``animebot convert``: draw each input to a file of its own; one line per input that fails."""
    from inference.engine import load_stylizer
    from inference.pipeline import convert_bytes

    if args.output and len(args.inputs) > 1:
        raise AnimebotError("-o takes one input; use --out-dir for several")
    _check_range("--quality", args.quality, 1, 95)
    if args.max_side < 64:
        raise AnimebotError("--max-side must be at least 64")
    _check_range("--strength", args.strength, 0, 100)
    if args.threads is not None:
        _check_range("--threads", args.threads, 1, 256)  # as ANIMEBOT_THREADS
    fmt = _output_format(args)
    store = ModelStore(data_home())
    style = args.style or default_style(store)
    store.require_style(style)
    dests = _destinations(args, style, fmt)
    model = load_stylizer(store, style, args.backend, args.threads)
    face_tools, faces_skipped = _face_tools(store, model, args)
    settings = ConvertSettings(max_side=args.max_side, fmt=fmt, jpeg_quality=args.quality, faces=args.faces,
                               strength=args.strength, keep_colours=args.keep_colours)
    failed = 0
    for src, dest in zip(args.inputs, dests):
        try:
            _check_destination(dest)
            result = convert_bytes(read_input(src), model, settings, face_tools)
            _write(dest, result.data)
        except AnimebotError as exc:
            failed += 1
            if args.json:
                print(json.dumps({"input": str(src), "output": str(dest), "ok": False, "error": exc.code,
                                  "message": exc.message}))
            else:
                print(f"{src}: {exc.message}", file=sys.stderr)
            continue
        if args.json:
            print(
                json.dumps(
                    {
                        "input": str(src),
                        "output": str(dest),
                        "ok": True,
                        "input_size": list(result.input_size),
                        "output_size": list(result.output_size),
                        "style": result.style,
                        "backend": result.backend,
                        **{k: round(v, 4) for k, v in result.timings.items()},
                        # null, with the reason, when the face pass did not run: not "ran and found none"
                        "faces": result.faces if face_tools else None,
                        **({} if face_tools else {"faces_skipped": faces_skipped}),
                    }
                )
            )
        else:
            w, h = result.output_size
            total = sum(result.timings.values())
            print(f"{src} -> {dest} ({w}x{h}, {result.style}, {result.backend}, {total:.1f} s)")
    return 1 if failed else 0


def _check_range(option: str, value: int, lo: int, hi: int) -> None:
    """One line and exit 2 for an option out of its range, before a backend fails on it deep inside."""
    if not lo <= value <= hi:
        raise AnimebotError(f"{option} must be between {lo} and {hi}")


def _destinations(args: argparse.Namespace, style: str, fmt: str) -> list[Path]:
    """Each input's output path: never an input, never another input's output.

    Under --out-dir (or in this folder) outputs are named INPUT-STEM.STYLE.FORMAT,
    so inputs that share a stem (a/x.jpg and b/x.jpg, x.jpg and x.png) would
    overwrite each other's result: the second gets INPUT-STEM-2, and so on.
    A name that is one of the inputs is skipped the same way, so a result
    never replaces a photo, not even one still waiting to be converted.
    """
    if args.output:
        src = args.inputs[0]
        if args.output.exists() and src.exists() and args.output.samefile(src):
            raise AnimebotError(f"-o {args.output} is the input itself; choose another name for the output")
        return [args.output]
    folder = args.out_dir or Path(".")
    taken = {_identity(p) for p in args.inputs}
    dests = []
    for src in args.inputs:
        dest, n = folder / f"{src.stem}.{style}.{fmt}", 1
        while _identity(dest) in taken:
            n += 1
            dest = folder / f"{src.stem}-{n}.{style}.{fmt}"
        taken.add(_identity(dest))
        dests.append(dest)
    return dests


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


def _face_tools(store: ModelStore, model: Stylizer, args: argparse.Namespace) -> tuple[FaceTools | None, str]:
    """The face pass's models, or None and why not (said once here when it was asked for)."""
    from inference.engine import load_face_tools

    if not args.faces:
        return None, "turned off (--no-faces)"
    try:
        tools = load_face_tools(store, model, args.backend, args.threads)
        return tools, "" if tools else f"{model.style} has no face pass (its faces are drawn with the rest)"
    except AnimebotError as exc:
        print(f"animebot: {exc.message}; drawing without the face pass", file=sys.stderr)
        return None, exc.message


def _output_format(args: argparse.Namespace) -> str:
    """jpg or png: from -o's suffix, which --format may repeat but not contradict, else --format, else jpg.

    A ``.png`` holding JPEG bytes misleads every program that opens it, so a
    contradiction is refused rather than settled silently either way.
    """
    if args.output is None:
        return args.format or "jpg"
    implied = _format_of(args.output)
    if implied is None:
        if args.format:
            return args.format
        raise AnimebotError(f"{args.output.name}: output must end in .jpg or .png (or pass --format)")
    if args.format and args.format != implied:
        raise AnimebotError(f"-o {args.output.name} names a {implied} file but --format is {args.format}; "
                            "make them agree")
    return implied


def _format_of(path: Path) -> str | None:
    """The format a file name's suffix promises, if it is one we write."""
    return {"jpg": "jpg", "jpeg": "jpg", "png": "png"}.get(path.suffix.lower().lstrip("."))


def read_input(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise AnimebotError(f"cannot read {path}: {exc.strerror}", code="io") from None
