"""The real bot, end to end through the fake Bot API, under each worker layout.

    python -m bench.bot_layouts --home DIR [--layouts 1x2,2x1,2x2]

``DIR`` is a data dir with ``hayao`` installed. For each layout (workers x
threads per worker) it starts ``animebot run`` and measures, in one run:

* latency: update pushed to photo received, for single photos one at a time;
* a cache hit: the same photo sent again;
* throughput: two users sending five photos each at once;
* peak RSS (VmHWM) of the bot process and of each worker.

Ratios are against the first layout listed, measured in the same run.
"""
from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image

from bench.memory import peak_rss_mb
from testkit.bot_harness import RunningBot, private_chat, start_bot
from testkit.fake_telegram import FakeTelegram
from testkit.replies import answers

PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"


def _photos() -> list[bytes]:
    """The shared photos and their mirror images: distinct bytes, so nothing comes from the cache."""
    originals = [p.read_bytes() for p in sorted(PHOTOS.glob("*.jpg"))]
    mirrored = []
    for data in originals:
        out = io.BytesIO()
        Image.open(io.BytesIO(data)).transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(out, "JPEG", quality=92)
        mirrored.append(out.getvalue())
    return originals + mirrored


def _answered(fake: FakeTelegram, message: dict[str, Any]) -> bool:
    return bool(answers(fake, message, "sendPhoto"))


def measure(layout: str, home: Path, photos: list[bytes]) -> dict[str, Any]:
    workers, threads = (int(x) for x in layout.split("x"))
    with FakeTelegram() as fake, tempfile.TemporaryDirectory() as tmp:
        bot: RunningBot = start_bot(fake, Path(tmp) / "bot", home, ANIMEBOT_WORKERS=str(workers),
                                    ANIMEBOT_THREADS=str(threads), ANIMEBOT_PER_USER_LIMIT="20",
                                    ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_QUEUE_SIZE="32")
        try:
            chat, user = private_chat(1)
            latencies = []
            for data in photos[8:11]:
                t0 = time.monotonic()
                msg = fake.photo_message(chat, user, data)
                fake.wait_for(lambda: _answered(fake, msg), 300)
                latencies.append(time.monotonic() - t0)
            file = fake.files[msg["photo"][-1]["file_id"]]
            t0 = time.monotonic()
            again = fake.photo_message(chat, user, b"", same_file=file)
            fake.wait_for(lambda: _answered(fake, again), 60)
            hit = time.monotonic() - t0

            burst = photos[:8] + photos[11:13]
            t0 = time.monotonic()
            sent = []
            for i, data in enumerate(burst):
                c, u = private_chat(2 + i % 2)
                sent.append(fake.photo_message(c, u, data))
            fake.wait_for(lambda: all(_answered(fake, m) for m in sent), 900)
            burst_s = time.monotonic() - t0

            pids = bot.worker_pids()
            rss_workers = [peak_rss_mb(pid) for pid in pids.values()]
            rss_bot = peak_rss_mb(bot.process.pid)
        finally:
            bot.stop()
    return {"layout": layout, "latency_s": statistics.median(latencies), "cache_hit_s": hit,
            "burst_s": burst_s, "photos_per_min": len(burst) / burst_s * 60,
            "rss_bot_mb": rss_bot, "rss_workers_mb": rss_workers}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="data dir with hayao installed")
    ap.add_argument("--layouts", default="1x2,2x1,2x2", help="WORKERSxTHREADS, comma-separated")
    args = ap.parse_args()
    photos = _photos()
    rows = [measure(layout, args.home.resolve(), photos) for layout in args.layouts.split(",")]
    ref = rows[0]
    print("| layout | latency s (median of 3) | vs first | cache hit s | 2 users x 5 photos s | photos/min | vs first "
          "| peak RSS bot MB | peak RSS per worker MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        workers = ", ".join(f"{m:.0f}" for m in r["rss_workers_mb"])
        print(f"| {r['layout']} | {r['latency_s']:.2f} | {r['latency_s'] / ref['latency_s']:.2f} | "
              f"{r['cache_hit_s']:.3f} | {r['burst_s']:.1f} | {r['photos_per_min']:.1f} | "
              f"{r['photos_per_min'] / ref['photos_per_min']:.2f} | {r['rss_bot_mb']:.0f} | {workers} |")


if __name__ == "__main__":
    main()
