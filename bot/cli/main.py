"""``animebot``: the command line. One subcommand per job, each a thin shell
around the library so that everything it does is also what the bot does."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from storage.errors import AnimebotError
from bot.cli.convert import convert, read_input
from inference.clip_settings import ClipLimits
from inference.engine import BACKENDS, DEFAULT_BACKEND
from inference.pipeline import DEFAULT_MAX_SIDE
from weights.store import ModelStore, WeightsError, data_home

if TYPE_CHECKING:
    import numpy as np

    from weights.registry import ModelEntry


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except AnimebotError as exc:
        print(f"animebot: {exc.message}", file=sys.stderr)
        return 2
    except PermissionError as exc:
        print(f"animebot: {_not_writable(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("animebot: interrupted", file=sys.stderr)
        return 130


def _not_writable(exc: PermissionError) -> str:
    """A data folder another user owns (a root-owned /data: a volume made by hand, a bind mount) is one
    sentence naming the owner it needs and how to give it, not a traceback."""
    home = data_home()
    path = Path(exc.filename) if exc.filename else home
    if path != home and home not in path.parents:
        return f"{path}: permission denied"
    uid, gid = os.getuid(), os.getgid()
    chown = f"chown -R {uid}:{gid} {home}"
    how = f"docker compose run --rm --user root --entrypoint chown animebot -R {uid}:{gid} {home}" \
        if Path("/.dockerenv").exists() else f"as root, {chown}"
    return f"cannot write {path}: {home} must belong to UID {uid}, the user animebot runs as; fix it with: {how}"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="animebot", description="Turn photos into anime art on the CPU.")
    sub = p.add_subparsers(dest="command", required=True)

    w = sub.add_parser("weights", help="list, download or import model files")
    wsub = w.add_subparsers(dest="action", required=True)
    wl = wsub.add_parser("list", help="show known models, which are installed, and their licences")
    wl.set_defaults(handler=_weights_list)
    wd = wsub.add_parser("download", help="download models from their public URLs and verify them")
    wd.add_argument("names", nargs="+", metavar="NAME")
    wd.set_defaults(handler=_weights_download)
    wi = wsub.add_parser("import", help="install local copies of known model files, matched by hash; "
                                        "a folder: every known model file in it")
    wi.add_argument("paths", nargs="+", metavar="PATH", type=Path)
    wi.set_defaults(handler=_weights_import)

    pr = sub.add_parser("prune", help="make a faster 'lite' style: prune a model, then distil it on photos")
    pr.add_argument("--from", dest="base", default="hayao", help="the installed style to start from (default hayao)")
    pr.add_argument("--width", type=float, default=0.75, help="fraction of channels to keep, 0.3-1 (default 0.75)")
    pr.add_argument("--minutes", type=float, default=30.0, help="training time to spend now (default 30)")
    pr.add_argument("--name", help="name of the new style (default BASE-lite)")
    pr.add_argument("--photos", type=Path, required=True, help="a folder of photos to train on (20+ is better)")
    pr.add_argument("--device", default="auto", help="cpu, cuda, or auto (a GPU when there is one)")
    pr.add_argument("--fresh", action="store_true", help="start over instead of resuming saved progress")
    pr.set_defaults(handler=_prune)

    q = sub.add_parser("quantize", help="make an int8 copy of a style, checked against the original")
    q.add_argument("--from", dest="base", default="hayao", help="the installed style to start from (default hayao)")
    q.add_argument("--photos", type=Path, required=True, help="a folder of photos to calibrate with (8+ is better)")
    q.add_argument("--name", help="name of the new style (default BASE-int8)")
    q.add_argument("--keep-fp32", type=int, default=2, help="convolutions kept in fp32 at each end (default 2)")
    q.set_defaults(handler=_quantize)

    r = sub.add_parser("run", help="run the Telegram bot (settings from the environment or .env)")
    r.add_argument("--webhook", metavar="URL",
                   help="take updates by webhook at this https:// URL instead of polling (or ANIMEBOT_WEBHOOK_URL)")
    r.set_defaults(handler=_run)
    wk = sub.add_parser("worker", help="draw photos for a bot elsewhere, via Celery over Redis (ANIMEBOT_BROKER_URL)")
    wk.set_defaults(handler=_worker)
    h = sub.add_parser("health", help="exit 0 if the bot in ANIMEBOT_HOME is running with all its workers")
    h.set_defaults(handler=_health)
    b = sub.add_parser("backup", help="write ANIMEBOT_HOME (its database and cached results; not models) to one "
                                      "file, while the bot runs (docs/operations.md, 'Backups')")
    b.add_argument("path", nargs="?", type=Path, metavar="PATH",
                   help="the file to write (.tar; .tar.gz to compress); written whole or not at all")
    b.add_argument("--prune", type=Path, metavar="DIR",
                   help="delete the backups in DIR made more than ANIMEBOT_KEEP_DAYS days ago (docs/privacy.md)")
    b.set_defaults(handler=_backup)
    rs = sub.add_parser("restore", help="fill an empty ANIMEBOT_HOME from a backup; the bot upgrades it at its start")
    rs.add_argument("path", type=Path, metavar="PATH")
    rs.set_defaults(handler=_restore)

    c = sub.add_parser("convert", help="convert image files and clips (GIF, MP4, MOV, WebM) to anime")
    c.add_argument("inputs", nargs="+", metavar="INPUT", type=Path)
    dest = c.add_mutually_exclusive_group()
    dest.add_argument("-o", "--output", type=Path, help="output file (one input only)")
    dest.add_argument("--out-dir", type=Path, help="folder for outputs, named INPUT-STEM.STYLE.FORMAT "
                                                   "(INPUT-STEM-2... when two inputs share a stem)")
    c.add_argument("--style", help="installed style name (default: hayao if installed)")
    c.add_argument("--max-side", type=int,
                   help=f"long side of the output, px (default: {DEFAULT_MAX_SIDE} for pictures, a panorama's is "
                        f"longer, see docs/benchmarks.md; {ClipLimits.max_side} for clips)")
    c.add_argument("--format", choices=("jpg", "png", "mp4", "gif"),
                   help="output format: jpg or png for pictures, mp4 or gif for clips (default: from -o, "
                        "else jpg and mp4)")
    c.add_argument("--max-seconds", type=float, default=ClipLimits.max_seconds,
                   help=f"a longer clip is cut to its first this many seconds (default {ClipLimits.max_seconds:g})")
    c.add_argument("--fps", type=float, default=ClipLimits.max_fps,
                   help=f"a clip's frame rate cap: frames are dropped evenly (default {ClipLimits.max_fps:g})")
    c.add_argument("--quality", type=int, default=92, help="JPEG quality, 1-95")
    c.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                   help=f"how the model runs (default: {DEFAULT_BACKEND}, the fastest measured)")
    c.add_argument("--threads", type=int, help="CPU threads for the model, 1-256 (default: all cores)")
    c.add_argument("--faces", action=argparse.BooleanOptionalAction, default=True,
                   help="draw each face again at full detail and blend it in (default: on)")
    c.add_argument("--strength", type=int, default=100, help="how much of the style, 0-100 (default 100)")
    c.add_argument("--keep-colours", "--keep-colors", action="store_true",
                   help="keep the photo's colours; take only the anime lightness and lines")
    c.add_argument("--hd", action="store_true",
                   help="double each side of the drawing with Real-CUGAN 2x (pictures only; needs the "
                        "realcugan_up2x model)")
    c.add_argument("--json", action="store_true", help="print one JSON object per image")
    c.set_defaults(handler=convert)
    return p


def _store() -> ModelStore:
    return ModelStore(data_home())


def _photos_in(folder: Path, side: int, min_side: int) -> list["np.ndarray"]:
    """The folder's photos as RGB arrays at most ``side`` px long, skipping what is not an image."""
    import numpy as np

    from inference.imageio import decode
    from inference.pipeline import resize

    files = sorted(p for p in folder.glob("*")
                   if p.suffix.lower() in (".jpg", ".jpeg", ".png", ".webp", ".heic", ".heif", ".avif"))
    photos = []
    for f in files:
        try:
            photos.append(np.asarray(resize(decode(read_input(f), at_least=side), side)))
        except AnimebotError as exc:
            print(f"{f}: skipped ({exc.message})", file=sys.stderr)
    return [p for p in photos if min(p.shape[:2]) >= min_side]


def _generator_base(store: ModelStore, name: str, verb: str) -> tuple["ModelEntry", Path]:
    base, path = store.require(name)
    if base.arch != "animeganv2" or base.format == "onnx":
        raise AnimebotError(f"{name} is not an AnimeGANv2 generator's weights; only those can be {verb}")
    return base, path


def _quantize(args: argparse.Namespace) -> int:
    import tempfile

    from inference.engine import exported_onnx
    from inference.quantize import CROP, quantize, save_int8, worst_psnr

    store = _store()
    base, path = _generator_base(store, args.base, "quantized")
    name = args.name or f"{args.base}-int8"
    photos = _photos_in(args.photos, 1024, CROP)
    if len(photos) < 3:
        raise AnimebotError(f"{args.photos}: need at least 3 photos of {CROP} px or more (2 to calibrate, 1 to check)")
    held_out = photos[-max(1, len(photos) // 4):]
    fp32 = exported_onnx(store, base, path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "int8.onnx"
        quantize(fp32, out, photos[: len(photos) - len(held_out)], args.keep_fp32)
        psnr = worst_psnr(fp32, out, held_out)
        entry = save_int8(store, base, name, out, args.keep_fp32)
    print(f"{name}: installed; worst PSNR against {args.base} on {len(held_out)} held-out photo(s) at 720 px: "
          f"{psnr:.1f} dB{'' if psnr >= 38 else ' (below 38 dB: visible; try --keep-fp32 3)'}. "
          f"Use it with --style {entry.name}, or ANIMEBOT_STYLE={entry.name}")
    return 0


def _prune(args: argparse.Namespace) -> int:
    import torch

    from inference.engine import build_animeganv2
    from inference.prune import Budget, distill, parameter_count, prune, save_lite

    if not 0.3 <= args.width <= 1.0:
        raise AnimebotError("--width must be between 0.3 and 1")
    store = _store()
    base, path = _generator_base(store, args.base, "pruned")
    name = args.name or f"{args.base}-lite"
    photos = _photos_in(args.photos, 1024, 256)
    if len(photos) < 2:
        raise AnimebotError(f"{args.photos}: need at least 2 photos of 256 px or more to train on")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    teacher = build_animeganv2(base, path)
    student = prune(teacher, args.width)
    checkpoint = store.cache_dir / "prune" / f"{name}-{args.width:.2f}.pt"
    if args.fresh:
        checkpoint.unlink(missing_ok=True)
    print(f"{name}: {parameter_count(teacher):,} -> {parameter_count(student):,} parameters; "
          f"training on {len(photos)} photos on {device} for {args.minutes:g} min"
          + (" (resuming)" if checkpoint.is_file() else ""))
    history = distill(student, teacher, photos, Budget(args.minutes * 60), device=device, checkpoint=checkpoint,
                      on_progress=lambda p: print(f"  step {p.step}, {p.seconds / 60:.1f} min: "
                                                  f"held-out loss {p.held_out_loss:.4f}", flush=True))
    entry = save_lite(store, base, name, student, args.width)
    print(f"{name}: installed; held-out loss {history[0].held_out_loss:.4f} -> {history[-1].held_out_loss:.4f}. "
          f"Use it with --style {entry.name}, or ANIMEBOT_STYLE={entry.name}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from bot.root.app import run
    from bot.service.config import broker_password, load_config
    from bot.service.logs import setup_logging

    from weights.provision import provision

    cfg = load_config(webhook_url=args.webhook)
    setup_logging(cfg.token.get_secret_value(), cfg.webhook_secret, broker_password(cfg.broker_url))
    provision(ModelStore(cfg.home), cfg.weights, cfg.baked_models)
    run(cfg)
    return 0


def _worker(args: argparse.Namespace) -> int:
    from bot.drawing.celery.worker import run_worker
    from bot.service.config import load_worker_config

    return run_worker(load_worker_config())


def _health(args: argparse.Namespace) -> int:
    from bot.root.life import health

    ok, why = health(data_home())
    print(f"animebot: {why}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def _backup(args: argparse.Namespace) -> int:
    from bot.service.config import load_kept
    from storage.backup import back_up, prune

    if args.path is None and args.prune is None:
        raise AnimebotError("name the file to write (animebot backup PATH), or the folder to prune (--prune DIR)")
    kept = load_kept()
    if args.path is not None:
        made = back_up(kept.home, args.path.resolve())
        counts = ", ".join(f"{table} {n}" for table, n in made.counts.items())
        gone = f" ({made.skipped} more that it names were deleted meanwhile)" if made.skipped else ""
        print(f"{made.path}: {made.size:,} bytes: the database ({counts}) and {made.results} result "
              f"file(s){gone}")
    if args.prune is not None:
        pruned = prune(args.prune, kept.keep_days * 86400)
        for path in pruned.deleted:
            print(f"{path}: deleted (older than ANIMEBOT_KEEP_DAYS, {kept.keep_days} days)")
        for path in pruned.unreadable:
            print(f"{path}: not a backup this release can read; left alone", file=sys.stderr)
        print(f"{args.prune}: {len(pruned.deleted)} deleted, {pruned.kept} kept")
    return 0


def _restore(args: argparse.Namespace) -> int:
    from bot.service.config import load_kept
    from storage.backup import restore

    home = load_kept().home
    done = restore(args.path.resolve(), home)
    counts = ", ".join(f"{table} {n}" for table, n in done.counts.items())
    print(f"{home}: restored from {args.path}, made {time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(done.created))}"
          f" (database schema {done.schema}: {counts}; {done.results} result file(s)). Models are not in backups: "
          f"the bot installs those ANIMEBOT_WEIGHTS names at its start, and brings the database up to date")
    return 0


def _weights_list(args: argparse.Namespace) -> int:
    store = _store()
    print(f"models in {store.models_dir}")
    for e in store.entries:
        mark = "installed" if store.is_installed(e) else "-"
        print(f"  {e.name:<18} {e.kind:<8} {mark:<10} {e.label}")
        print(f"  {'':<18} licence: {e.license}")
    return 0


def _weights_download(args: argparse.Namespace) -> int:
    from weights.download import download

    store = _store()
    failed = 0
    for name in args.names:
        try:
            for entry in store.with_parts(name):  # an ncnn model is two files
                path = download(store, entry, progress=sys.stderr)
                print(f"{entry.name}: installed {path}")
        except WeightsError as exc:
            print(f"animebot: {exc.message}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _weights_import(args: argparse.Namespace) -> int:
    store = _store()
    failed = 0
    for path in args.paths:
        try:
            found, unknown = store.import_folder(path) if path.is_dir() else ([(path, store.import_file(path))], [])
            for file, entry in found:
                print(f"{file}: installed as {entry.name}")
            if unknown:
                print(f"{path}: not recognised, left alone: {', '.join(p.name for p in unknown)}")
            if not found:
                raise WeightsError(f"{path}: no known model file in this folder", code="missing")
        except WeightsError as exc:
            print(f"animebot: {exc.message}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
