"""Prometheus metrics, served at ``/metrics`` by the bot's HTTP server (bot/updates/webhook.py).

The same names whichever pool draws, so one dashboard watches an embedded
bot and a scaled-out one. The gauges are read from the pool when scraped;
the counters and histograms are fed by the request flow (bot/flow/) as requests end.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from bot.drawing.pool import Pool

REGISTRY = CollectorRegistry()  # ours alone: no process or GC collectors of the default one
# Seconds: a photo waits from nothing to minutes, and is drawn in about one to thirty.
BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600)

JOBS = Counter("animebot_jobs", "Requests ended, by outcome (done, failed, cancelled, refused)", ["outcome"],
               registry=REGISTRY)
WAITING_S = Histogram("animebot_photo_wait_seconds", "From queued to taken by a worker", buckets=BUCKETS,
                      registry=REGISTRY)
DRAWING_S = Histogram("animebot_photo_draw_seconds", "From taken by a worker to drawn", buckets=BUCKETS,
                      registry=REGISTRY)
JOB_S = Histogram("animebot_job_seconds", "From taken on to answered, whole requests", buckets=BUCKETS,
                  registry=REGISTRY)
_QUEUE = Gauge("animebot_queue_photos", "Photos waiting for a worker", registry=REGISTRY)
_RUNNING = Gauge("animebot_running_photos", "Photos on a worker now", registry=REGISTRY)
_WORKERS = Gauge("animebot_workers_online", "Photos the workers can draw at once (worker processes up)",
                 registry=REGISTRY)
_HEALTHY = Gauge("animebot_workers_healthy", "1 while photos are being drawn (workers up, broker reachable)",
                 registry=REGISTRY)

CONTENT_TYPE = CONTENT_TYPE_LATEST


def watch(pool: Pool) -> None:
    """Read the gauges from ``pool`` at every scrape."""
    _QUEUE.set_function(lambda: pool.waiting)
    _RUNNING.set_function(lambda: pool.running)
    _WORKERS.set_function(lambda: pool.size)
    _HEALTHY.set_function(lambda: float(pool.healthy()[0]))


def exposition() -> bytes:
    return generate_latest(REGISTRY)
