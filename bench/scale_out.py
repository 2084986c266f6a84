"""The broker path against the bot's own worker processes, in one run on this machine.

    python -m bench.scale_out --home DIR [--users 20] [--photos 60] [--bursts 4] [--gap 3] [--timings 3] [--no-load]
                              [--layouts 0,1,2]

Runs :mod:`bench.load` three times with the same photos and the same total
threads (this machine's 2 cores): the embedded pool (1 worker x 2 threads),
then Celery over a Redis of its own with one ``animebot worker`` of 2
threads, then two workers of 1 thread. It prints photos/min and p50/p95
latency for each, as ratios to the embedded pool; what each pool's transport
costs a photo (the bot's round trip from queue to result, less the time the
worker measured itself, from the bot's log lines), and how much more the
broker path costs than the pipe to a local worker; and peak RSS of the bot and
of a drawing process. Needs ``redis-server`` on the PATH.

First, what Redis holds for one order of a 1 MB photo while it waits in the queue: with the photo
inside (every order before claim checks, and what a bot still sends while a worker of that release is
up), and as a claim check (the order in the queue, the photo in a key of its own with a lifetime).

Then, ``--timings`` times over, a fresh ``animebot worker`` on that Redis is timed (the
numbers tests/scale_out/test_celery_worker.py used to bound, now reported here): an order in a style
it lacks, from sending to its refusal coming back (the test allowed 10 s for two); and, after
SIGKILL to its main process, until its pool process is gone and until its heartbeat is gone
from Redis (the test allowed 15 s for the heartbeat).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis as redis_client

from bench.load import run_load
from bot.drawing.celery.app import QUEUE, make_celery
from bot.drawing.celery.wire import (TASK_NAME, order_to_message, photo_key, put_photo, read_workers,
                                     result_from_message)
from inference.drawer import WorkFailed, WorkOrder
from inference.pipeline import ConvertSettings
from testkit.pictures import noisy_jpeg
from testkit.redis_server import RedisServer
from testkit.wait import wait_for
from testkit.worker_harness import start_worker

PHOTO = Path(__file__).resolve().parents[2] / "shared" / "photos" / "square_512.jpg"

LAYOUTS = (("embedded, 1 worker x 2 threads", None, 0, "2"),
           ("Celery, 1 worker x 2 threads", "broker", 1, "2"),
           ("Celery, 2 workers x 1 thread", "broker", 2, "1"))


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def order_footprint(redis: RedisServer, size: int) -> list[tuple[str, int, int, int]]:
    """For each way of sending: the photo's bytes, and the bytes Redis holds for the order in the queue and
    for the photo's key (0: none), with that key's lifetime in seconds (-1: none), as MEMORY USAGE counts."""
    url = redis.url(db=8)  # a database no worker reads: the order stays queued
    app = make_celery(url, 120)
    client = redis_client.Redis.from_url(url)
    photo = noisy_jpeg(size)
    rows = []
    try:
        for name, key in (("photo inside the order", None), ("claim check", photo_key("bench-footprint"))):
            if key is not None:
                put_photo(client, key, photo, 600)
            order = WorkOrder("bench-footprint", photo, "hayao", ConvertSettings())
            app.send_task(TASK_NAME, args=[order_to_message(order, key)], task_id="bench-footprint", queue=QUEUE)
            held = int(client.memory_usage(key, samples=0) or 0) if key else 0
            rows.append((name, int(client.memory_usage(QUEUE, samples=0) or 0), held, int(client.ttl(key)) if key else -1))
            client.flushdb()
    finally:
        client.close()
    print(f"| a {len(photo):,}-byte photo's order | in the queue, bytes | its photo's key, bytes | the key's lifetime s |")
    print("|---|---|---|---|")
    for name, queued, held, ttl in rows:
        print(f"| {name} | {queued:,} | {held:,} | {ttl} |")
    return rows


def worker_timings(home: Path, redis: RedisServer, folder: Path, rounds: int) -> dict[str, list[float]]:
    """Seconds, per round with a fresh worker: a refusal's round trip, and a killed worker's pool
    process and heartbeat disappearing (see the module docstring)."""
    url = redis.url(db=7)  # a queue and heartbeats of its own
    app = make_celery(url, 120)
    out: dict[str, list[float]] = {"refusal_s": [], "pool_gone_s": [], "heartbeat_gone_s": []}
    client = redis_client.Redis.from_url(url)
    try:
        for i in range(rounds):
            worker = start_worker(folder / f"timing-{i}", home, url)
            try:
                (info,) = wait_for(lambda: read_workers(client), 60, "heartbeat of the new worker")
                order = WorkOrder(f"bench-{i}", PHOTO.read_bytes(), "nosuch", ConvertSettings())
                t0 = time.monotonic()
                task = app.send_task(TASK_NAME, args=[order_to_message(order)], task_id=str(uuid.uuid4()))
                reply = result_from_message(task.get(timeout=120))
                out["refusal_s"].append(time.monotonic() - t0)
                assert isinstance(reply, WorkFailed), reply
                worker.kill_main()
                t0 = time.monotonic()
                wait_for(lambda: not _alive(info.pid), 300, "end of the pool process")
                out["pool_gone_s"].append(time.monotonic() - t0)
                wait_for(lambda: not read_workers(client), 300, "end of the heartbeat")
                out["heartbeat_gone_s"].append(time.monotonic() - t0)
            finally:
                worker.kill9()
    finally:
        client.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="data dir with hayao (and det_500m) installed")
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--photos", type=int, default=60)
    ap.add_argument("--bursts", type=int, default=4)
    ap.add_argument("--gap", type=float, default=3.0)
    ap.add_argument("--timings", type=int, default=3, help="rounds of the worker timings (0: none)")
    ap.add_argument("--no-load", action="store_true", help="the worker timings only")
    ap.add_argument("--layouts", default="0,1,2",
                    help="which layouts to run, by index (0: embedded, 1: one Celery worker, 2: two); the first "
                         "two give the broker's cost per photo")
    args = ap.parse_args()
    reports: list[tuple[str, dict[str, Any]]] = []
    timings: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        redis = RedisServer(Path(tmp) / "redis").start()
        try:
            order_footprint(redis, 1 << 20)
            if args.timings:
                timings = worker_timings(args.home.resolve(), redis, Path(tmp), args.timings)
                print("worker timings", json.dumps(timings), flush=True)
            chosen = [LAYOUTS[int(i)] for i in args.layouts.split(",")]
            for name, broker, workers, threads in () if args.no_load else chosen:
                env = {"ANIMEBOT_THREADS": threads, "ANIMEBOT_WORKERS": "1", "ANIMEBOT_RATE_PER_MINUTE": "0"}
                r = run_load(args.home.resolve(), args.users, args.photos, args.bursts, args.gap, 1800.0, env,
                             redis.url() if broker else None, workers, probes=5)
                reports.append((name, r))
                print(name, json.dumps(r), flush=True)
        finally:
            redis.kill()
    if timings:
        print("| a worker's | median s | max s | rounds |")
        print("|---|---|---|---|")
        for key, what in (("refusal_s", "refusal of a style it lacks, round trip"),
                          ("pool_gone_s", "pool process gone after SIGKILL to its main process"),
                          ("heartbeat_gone_s", "heartbeat gone from Redis after that SIGKILL")):
            print(f"| {what} | {statistics.median(timings[key]):.2f} | {max(timings[key]):.2f} | {len(timings[key])} |")
    if not reports:
        return
    base = reports[0][1]
    print("| layout | photos/min | vs embedded | idle photo s | result p50 s | result p95 s | p95 vs embedded "
          "| peak RSS bot MB | peak RSS drawing process MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in reports:
        workers = ", ".join(f"{m:.0f}" for m in r["peak_rss_workers_mb"])
        print(f"| {name} | {r['results_per_min']:.1f} | {r['results_per_min'] / base['results_per_min']:.2f} "
              f"| {r['idle_latency_s']:.2f} | {r['result_p50_s']:.2f} | {r['result_p95_s']:.2f} "
              f"| {r['result_p95_s'] / base['result_p95_s']:.2f} | {r['peak_rss_bot_mb']:.0f} | {workers} |")
    print("| layout | photos drawn | a photo's own time p50 s | transport p50 ms | transport p95 ms |")
    print("|---|---|---|---|---|")
    for name, r in reports:
        print(f"| {name} | {r['drawn']} | {r['worker_p50_s']:.2f} | {r['transport_p50_ms']:.0f} "
              f"| {r['transport_p95_ms']:.0f} |")
    celery, draw_s = reports[1][1], base["idle_latency_s"]
    extra = celery["transport_p50_ms"] - base["transport_p50_ms"]
    print(f"the broker path adds {extra:+.0f} ms a photo (p50) over the pipe to a local worker: "
          f"{extra / 1000 / draw_s * 100:+.1f}% of one idle photo's {draw_s:.2f} s")
    unanswered = sum(r["unanswered"] + r["answered_twice"] for _, r in reports)
    raise SystemExit(1 if unanswered else 0)


if __name__ == "__main__":
    main()
