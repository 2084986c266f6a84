"""Prometheus metrics, served at ``/metrics`` by the bot's HTTP server (bot/updates/webhook.py).

The same names whichever pool draws, so one dashboard watches an embedded
bot and a scaled-out one (deploy/grafana, deploy/prometheus). The gauges are read from the pool when
scraped; the counters and histograms are fed by the request flow (bot/flow/) as requests end.
No label carries a user or a chat: labels are outcomes and results, a few values each.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from storage.database import Database


class Watched(Protocol):
    """What the gauges read of a drawing pool (bot/drawing/pool.py has it): this module is a leaf that every
    room reports to, so it names only what it reads, not the pool itself."""

    @property
    def waiting(self) -> int: ...

    @property
    def running(self) -> int: ...

    def online(self) -> int: ...

    def healthy(self) -> tuple[bool, str]: ...

    def broker_reachable(self) -> bool | None: ...

# Without this every counter and histogram also exports a ``_created`` gauge (its start time), which
# reads like a metric of its own (``animebot_jobs_created``) and is of no use to a dashboard.
disable_created_metrics()

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
CACHE_LOOKUPS = Counter("animebot_cache_lookups", "Results looked up in the cache, by result (hit; miss: drawn now)",
                        ["result"], registry=REGISTRY)
CLIPS = Counter("animebot_clips", "Clips a worker finished, by outcome (drawn, failed, cancelled)", ["outcome"],
                registry=REGISTRY)
CLIP_FRAMES = Counter("animebot_clip_frames", "Frames of clips drawn", registry=REGISTRY)
_QUEUE = Gauge("animebot_queue_photos", "Photos waiting for a worker", registry=REGISTRY)
_RUNNING = Gauge("animebot_running_photos", "Photos on a worker now", registry=REGISTRY)
_WORKERS = Gauge("animebot_workers_online", "Drawing processes up: photos the workers can draw at once",
                 registry=REGISTRY)
_HEALTHY = Gauge("animebot_healthy", "1 while /healthz says ok (photos are being drawn: workers up, broker "
                 "reachable; and recorded: the database takes writes), else 0", registry=REGISTRY)

# Every label value exported from the start, at 0: rate() and increase() see a series only from its
# second sample, so a series born at its first failure would hide that failure from the alerts.
for _counter, _values in ((JOBS, ("done", "failed", "cancelled", "refused")), (CACHE_LOOKUPS, ("hit", "miss")),
                          (CLIPS, ("drawn", "failed", "cancelled"))):
    for _value in _values:
        _counter.labels(_value)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class _BrokerUp:
    """``animebot_broker_up``: 1 while the broker answers, 0 while it does not. Absent for an embedded
    bot, which has no broker: a constant 1 would claim a broker that does not exist, and a 0 would
    fire the broker alert for nothing."""

    def __init__(self) -> None:
        self.pool: Watched | None = None

    def collect(self) -> Iterator[Metric]:
        reachable = self.pool.broker_reachable() if self.pool is not None else None
        if reachable is not None:
            yield GaugeMetricFamily("animebot_broker_up", "1 while the Celery broker answers, else 0 (scaled out "
                                    "only)", value=float(reachable))


_BROKER_UP = _BrokerUp()
REGISTRY.register(_BROKER_UP)


class _Writes:
    """``animebot_database_writable`` and ``animebot_database_write_failures_total``, read from the
    database (storage/ knows nothing of Prometheus); absent until the bot has opened it."""

    def __init__(self) -> None:
        self.db: Database | None = None

    def collect(self) -> Iterator[Metric]:
        if self.db is None:
            return
        yield GaugeMetricFamily("animebot_database_writable", "1 while the bot's database takes writes (the journal "
                                "records every photo), else 0", value=float(self.db.unwritable is None))
        yield CounterMetricFamily("animebot_database_write_failures", "Transactions the bot's database refused "
                                  "(locked by another program, disk full, read-only)", value=self.db.failed_writes)


_WRITES = _Writes()
REGISTRY.register(_WRITES)


def watch(pool: Watched, db: Database) -> None:
    """Read the gauges from ``pool`` and ``db`` at every scrape."""
    _QUEUE.set_function(lambda: pool.waiting)
    _RUNNING.set_function(lambda: pool.running)
    _WORKERS.set_function(pool.online)
    _HEALTHY.set_function(lambda: float(pool.healthy()[0] and db.unwritable is None))
    _BROKER_UP.pool = pool
    _WRITES.db = db


def exposition() -> bytes:
    return generate_latest(REGISTRY)
