"""The broker path against the bot's own worker processes, in one run on this machine.

    python -m bench.scale_out --home DIR [--users 20] [--photos 60] [--bursts 4] [--gap 3]

Runs :mod:`bench.load` three times with the same photos and the same total
threads (this machine's 2 cores): the embedded pool (1 worker x 2 threads),
then Celery over a Redis of its own with one ``animebot worker`` of 2
threads, then two workers of 1 thread. It prints photos/min and p50/p95
latency for each, as ratios to the embedded pool; what each pool's transport
costs a photo (the bot's round trip from queue to result, less the time the
worker measured itself, from the bot's log lines), and how much more the
broker path costs than the pipe to a local worker; and peak RSS of the bot and
of a drawing process. Needs ``redis-server`` on the PATH.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.load import run_load
from testkit.redis_server import RedisServer

LAYOUTS = (("embedded, 1 worker x 2 threads", None, 0, "2"),
           ("Celery, 1 worker x 2 threads", "broker", 1, "2"),
           ("Celery, 2 workers x 1 thread", "broker", 2, "1"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="data dir with hayao (and det_500m) installed")
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--photos", type=int, default=60)
    ap.add_argument("--bursts", type=int, default=4)
    ap.add_argument("--gap", type=float, default=3.0)
    args = ap.parse_args()
    reports: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        redis = RedisServer(Path(tmp) / "redis").start()
        try:
            for name, broker, workers, threads in LAYOUTS:
                env = {"ANIMEBOT_THREADS": threads, "ANIMEBOT_WORKERS": "1", "ANIMEBOT_RATE_PER_MINUTE": "0"}
                r = run_load(args.home.resolve(), args.users, args.photos, args.bursts, args.gap, 1800.0, env,
                             redis.url() if broker else None, workers, probes=5)
                reports.append((name, r))
                print(name, json.dumps(r), flush=True)
        finally:
            redis.kill()
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
