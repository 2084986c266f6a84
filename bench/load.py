"""Load test: many users sending photos in bursts to the real bot, through the fake Bot API.

    python -m bench.load --home DIR [--users 60] [--photos 300] [--bursts 6] [--gap 5] [--deadline 900]
                         [--broker redis://:PASSWORD@HOST:PORT/0 --workers N]

``DIR`` is a data dir with ``hayao`` installed (and ``det_500m`` for the face
pass). The bot runs with its defaults unless ``--env NAME=VALUE`` says
otherwise. Users are split into ``--bursts`` groups; each group sends all its
photos at once, ``--gap`` seconds after the previous group. Photos are the
shared ones and their mirror images (16 distinct); a photo sent again is
forwarded, as Telegram users share pictures (same ``file_unique_id``), so
repeats exercise the cache and the drawing of one photo for many requests.

It reports, in one run:

* that every photo got exactly one answer: a result, or a clear busy or
  limit sentence (and how many of each). A refusal repeated in a chat within
  a minute is told by editing the first one's message with the count not
  taken (bot/chat/replies.py), so its last edit answers that many photos;
* p50 and p95 latency, push to answer, for results and for all answers, also
  as multiples of one photo's latency on the idle bot, measured first;
* each user's p50 and p95 wait for a result, the best user's and the worst's
  (the fair queue should keep them close);
* peak RSS of the bot process and of each worker.

With ``--broker``, the bot draws through Celery: ``--workers`` real
``animebot worker`` processes are started on that Redis (with the bot's
``ANIMEBOT_THREADS``), and the bot gets ``ANIMEBOT_BROKER_URL``.

The whole run is bounded by ``--deadline``; photos unanswered by then are
reported as such (and the run exits 1).
"""
from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image, ImageOps

from bench.memory import peak_rss_mb
from testkit.bot_harness import private_chat, start_bot
from testkit.worker_harness import RunningWorker, start_worker
from testkit.fake_telegram import Call, FakeTelegram
from testkit.journal import settled
from testkit.replies import answers as replies_of
from testkit.wait import WaitTimeout

PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"
KINDS = (("partial", "I took"), ("busy", "busy"), ("per_user_limit", "the most I keep for one person"),
         ("rate_limited", "a minute"),
         ("quota", "today's limit"))


def photo_set(max_side: int = 1600) -> list[bytes]:
    """The shared photos and their mirror images, as phone-sized JPEGs."""
    out = []
    for path in sorted(PHOTOS.glob("*.jpg")):
        img = Image.open(path).convert("RGB")
        img.thumbnail((max_side, max_side))
        for variant in (img, ImageOps.mirror(img)):
            buf = io.BytesIO()
            variant.save(buf, "JPEG", quality=90)
            out.append(buf.getvalue())
    return out


def answers(fake: FakeTelegram, message: dict[str, Any]) -> list[Call]:
    """A photo's results and sentences (testkit.replies), status messages aside."""
    return replies_of(fake, message, "sendPhoto", "sendMessage")


def all_answers(fake: FakeTelegram, messages: list[dict[str, Any]]) -> list[list[Call]]:
    """Each message's answers: its direct replies, or, for a photo refused while a refusal notice
    of its chat was fresh, that notice's last edit, whose "not taken so far: N" counts it among N
    (bot/chat/replies.py edits the notice with the count at most every 2 s, not once a photo)."""
    got = [answers(fake, m) for m in messages]
    counted: dict[int, list[Call]] = {}  # chat -> its last count edit, once per photo it counts
    for i, m in enumerate(messages):
        chat_id = m["chat"]["id"]
        if got[i]:
            continue
        if chat_id not in counted:
            edits = [c for c in fake.calls_to("editMessageText", chat_id) if "not taken so far" in c.params["text"]]
            n = int(re.search(r"not taken so far: (\d+)", edits[-1].params["text"]).group(1)) if edits else 0
            counted[chat_id] = [edits[-1]] * n if edits else []
        if counted[chat_id]:
            got[i] = [counted[chat_id].pop()]
    return got


def kind(call: Call) -> str:
    if call.method == "sendPhoto":
        return "result"
    text = str(call.params["text"])
    return next((name for name, marker in KINDS if marker in text), f"other: {text[:60]}")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_load(home: Path, users: int, photos: int, bursts: int, gap_s: float, deadline_s: float,
             env: dict[str, str], broker: str | None = None, workers: int = 0, probes: int = 1) -> dict[str, Any]:
    """Run the whole load test; returns the report (see the module docstring)."""
    pool = photo_set()
    with FakeTelegram() as fake, tempfile.TemporaryDirectory() as tmp:
        remote: list[RunningWorker] = []
        if broker:
            threads = {k: v for k, v in env.items() if k == "ANIMEBOT_THREADS"}
            remote = [start_worker(Path(tmp) / f"worker-{i}", home, broker, **threads) for i in range(workers)]
            env = {**env, "ANIMEBOT_BROKER_URL": broker}
        bot = start_bot(fake, Path(tmp) / "bot", home, **env)
        errors_log = Path(tmp) / "bot" / "bot.log"
        try:
            chat, user = private_chat(1)
            idle = []
            for data in pool[-1 - probes:]:  # the first warms the worker up; the others are the reference
                t0 = time.monotonic()
                probe = fake.photo_message(chat, user, data)
                fake.wait_for(lambda: answers(fake, probe), 300)
                idle.append(time.monotonic() - t0)
            idle_latency = percentile(idle[1:], 0.5)

            per_user = max(1, photos // users)
            groups = [list(range(g, users, bursts)) for g in range(bursts)]
            sent: list[tuple[dict[str, Any], float]] = []
            uploaded: dict[int, Any] = {}  # pool index -> the file of its first upload
            started = time.monotonic()
            for g, members in enumerate(groups):
                if g:
                    time.sleep(gap_s)
                for i in range(per_user):
                    for u in members:
                        c, usr = private_chat(1000 + u)
                        n = (u * per_user + i) % len(pool)
                        msg = fake.photo_message(c, usr, pool[n], same_file=uploaded.get(n))
                        uploaded.setdefault(n, fake.files[msg["photo"][-1]["file_id"]])
                        sent.append((msg, time.monotonic()))
            deadline = started + deadline_s
            try:
                fake.wait_for(lambda: all(all_answers(fake, [m for m, _ in sent])),
                              max(1.0, deadline - time.monotonic()), "answer to every photo")
            except WaitTimeout:
                pass
            total_s = time.monotonic() - started
            try:  # a duplicate answer, if there were one, is out once the journal has settled
                fake.wait_for(lambda: settled(bot.home, fake), max(1.0, deadline - time.monotonic()) + 60,
                              "settled journal")
            except WaitTimeout:
                pass
            drawing = [pid for w in remote for pid in w.drawing_pids()] or list(bot.worker_pids().values())
            rss = {"bot": peak_rss_mb(bot.process.pid), "workers": [peak_rss_mb(pid) for pid in drawing],
                   "worker_mains": [peak_rss_mb(w.process.pid) for w in remote]}
        finally:
            bot.stop()
            for w in remote:
                w.stop()
            log_text = errors_log.read_text()
            problems = [line for line in log_text.splitlines() if " ERROR " in line]
            # Per photo drawn: the round trip from leaving the queue to the result, less the worker's own time.
            drawn = [(float(trip), float(work)) for trip, work in
                     re.findall(r"drawn in ([\d.]+) s \(worker ([\d.]+) s", log_text)]
            transport = [trip - work for trip, work in drawn]

    counts: dict[str, int] = {}
    result_lat, all_lat = [], []
    by_user: dict[int, list[float]] = {}
    unanswered = duplicated = 0
    for (message, pushed), got in zip(sent, all_answers(fake, [m for m, _ in sent])):
        if not got:
            unanswered += 1
            continue
        duplicated += len(got) > 1
        k = kind(got[0])
        counts[k] = counts.get(k, 0) + 1
        latency = got[0].at - pushed
        all_lat.append(latency)
        if k == "result":
            result_lat.append(latency)
            by_user.setdefault(message["chat"]["id"], []).append(latency)
    user_p50 = sorted(percentile(v, 0.5) for v in by_user.values())
    user_p95 = sorted(percentile(v, 0.95) for v in by_user.values())
    return {
        "photos": len(sent), "users": users, "answered": len(sent) - unanswered, "unanswered": unanswered,
        "answered_twice": duplicated, "kinds": counts, "seconds": total_s,
        "idle_latency_s": idle_latency,
        "result_p50_s": percentile(result_lat, 0.5), "result_p95_s": percentile(result_lat, 0.95),
        "all_p50_s": percentile(all_lat, 0.5), "all_p95_s": percentile(all_lat, 0.95),
        "results_per_min": len(result_lat) / total_s * 60,
        "user_p50_best_s": user_p50[0] if user_p50 else float("nan"),
        "user_p50_worst_s": user_p50[-1] if user_p50 else float("nan"),
        "user_p95_best_s": user_p95[0] if user_p95 else float("nan"),
        "user_p95_worst_s": user_p95[-1] if user_p95 else float("nan"),
        "peak_rss_bot_mb": rss["bot"], "peak_rss_workers_mb": rss["workers"],
        "peak_rss_worker_mains_mb": rss["worker_mains"],
        "transport_p50_ms": percentile(transport, 0.5) * 1000, "transport_p95_ms": percentile(transport, 0.95) * 1000,
        "drawn": len(transport), "worker_p50_s": percentile([work for _, work in drawn], 0.5),
        "error_lines": problems[:5],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="data dir with hayao installed")
    ap.add_argument("--users", type=int, default=60)
    ap.add_argument("--photos", type=int, default=300)
    ap.add_argument("--bursts", type=int, default=6, help="groups of users that send at once")
    ap.add_argument("--gap", type=float, default=5.0, help="seconds between bursts")
    ap.add_argument("--deadline", type=float, default=900.0, help="seconds the whole run may take")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="bot setting, repeatable")
    ap.add_argument("--broker", help="draw through Celery on this Redis URL (starts --workers workers)")
    ap.add_argument("--workers", type=int, default=1, help="animebot worker processes to start with --broker")
    args = ap.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    r = run_load(args.home.resolve(), args.users, args.photos, args.bursts, args.gap, args.deadline, env,
                 args.broker, args.workers)
    idle = r["idle_latency_s"]
    print(f"{r['photos']} photos from {r['users']} users in {args.bursts} bursts, {r['seconds']:.0f} s")
    print(f"answered {r['answered']}, unanswered {r['unanswered']}, answered twice {r['answered_twice']}")
    print("answers: " + ", ".join(f"{k} {n}" for k, n in sorted(r["kinds"].items())))
    print("| | p50 s | p95 s | p50 / idle | p95 / idle |")
    print("|---|---|---|---|---|")
    print(f"| one photo, idle bot | {idle:.2f} | | 1.00 | |")
    for name in ("result", "all"):
        p50, p95 = r[f"{name}_p50_s"], r[f"{name}_p95_s"]
        print(f"| {name} answers | {p50:.2f} | {p95:.2f} | {p50 / idle:.2f} | {p95 / idle:.2f} |")
    print(f"| each user's p50 wait, best and worst | {r['user_p50_best_s']:.2f} | {r['user_p50_worst_s']:.2f} | "
          f"worst / best {r['user_p50_worst_s'] / r['user_p50_best_s']:.2f} | |")
    print(f"| each user's p95 wait, best and worst | {r['user_p95_best_s']:.2f} | {r['user_p95_worst_s']:.2f} | "
          f"worst / best {r['user_p95_worst_s'] / r['user_p95_best_s']:.2f} | |")
    workers = ", ".join(f"{m:.0f}" for m in r["peak_rss_workers_mb"])
    print(f"results/min {r['results_per_min']:.1f}; peak RSS bot {r['peak_rss_bot_mb']:.0f} MB, workers {workers} MB")
    print(json.dumps(r))
    sys.exit(0 if r["unanswered"] == 0 and r["answered_twice"] == 0 else 1)


if __name__ == "__main__":
    main()
