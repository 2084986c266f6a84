"""The bot's settings, read once from the environment (and an optional ``.env``).

Everything an operator may tune lives here, so the rest of the bot takes a
``Config`` and never reads ``os.environ`` itself. A missing or malformed
value is a :class:`ConfigError` whose message is the one line the operator
sees.
"""
from __future__ import annotations

import os
import re
from typing import cast
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from storage.errors import AnimebotError
from inference.engine import BACKENDS, DEFAULT_BACKEND, Backend
from inference.pipeline import DEFAULT_MAX_SIDE
from weights.store import data_home

TELEGRAM_API = "https://api.telegram.org/bot"
TELEGRAM_FILES = "https://api.telegram.org/file/bot"


class ConfigError(AnimebotError):
    code = "config"


@dataclass(frozen=True)
class Config:
    token: str
    home: Path
    base_url: str = TELEGRAM_API
    base_file_url: str = TELEGRAM_FILES
    # One worker using every core, chosen by measurement (docs/benchmarks.md, "Choosing the
    # worker layout", has the numbers): a lone user waits less than with one
    # single-threaded worker per core, for about as many photos a minute and
    # half the memory. load_config() gives each worker an equal share of the
    # cores this process may use.
    workers: int = 1
    threads_per_worker: int = 2
    # Photos that may wait for a worker, all users together; the journal holds
    # them, and each waiting photo's bytes are in memory (a few hundred kB).
    queue_size: int = 100
    # Photos one user may have waiting or being drawn; past it, the rest of a
    # burst is refused with one sentence. The fair queue (bot/drawing/fairqueue.py),
    # not this limit, keeps one user from starving the others.
    per_user_limit: int = 20
    job_timeout_s: float = 120.0
    max_side: int = DEFAULT_MAX_SIDE
    # Clips (GIFs, videos, video notes): longer ones are drawn as their first video_max_s seconds.
    video_max_s: int = 10
    video_max_side: int = 480
    default_style: str | None = None
    backend: Backend = DEFAULT_BACKEND
    admins: frozenset[int] = frozenset()
    cache_bytes: int = 2 << 30
    album_wait_s: float = 1.0
    # "Fast mode": while this many photos wait, a style with a lite version
    # (``animebot prune``) is drawn with it instead, so waits stay bounded.
    fast_styles: tuple[tuple[str, str], ...] = ()
    fast_queue: int = 4
    poll_timeout_s: int = 30
    # Abuse and access (bot/flow/access.py); 0 switches a limit off. An empty
    # allowlist lets everyone in.
    rate_per_minute: int = 10
    daily_quota: int = 200
    allowlist: frozenset[int] = frozenset()
    # A graceful stop waits this long for photos already being drawn; Docker's
    # stop grace period must be longer (docker-compose.yml gives 60 s).
    stop_wait_s: float = 30.0
    # Results, records of photos, stored requests and update contents older than this are deleted
    # (storage/retention.py); /forget deletes one user's at once.
    keep_days: int = 30
    # Webhook mode instead of polling when webhook_url is set.
    webhook_url: str | None = None
    webhook_listen: str = "0.0.0.0"
    webhook_port: int = 8443
    webhook_secret: str | None = None
    # Polling mode: serve /healthz and /metrics on this port too (webhook mode always does, on its port).
    metrics_port: int | None = None
    # The Mini App's public https:// address (bot/webapp/): served at /app by the same server as the webhook
    # or /metrics, offered as the menu button and under each result. Unset: no Mini App.
    webapp_url: str | None = None
    # HD (bot/flow/kinds/hd.py): the HD button under results, when the Real-CUGAN model is installed.
    hd: bool = True
    # Models to install at start when missing (the Docker image sets these):
    # copied from baked_models when a file there has the right hash, else
    # downloaded. See weights/provision.py.
    weights: tuple[str, ...] = ()
    baked_models: Path | None = None
    # Scaled out: drawing happens in `animebot worker` processes reached
    # through Celery over this Redis URL; unset, the bot's own processes draw.
    broker_url: str | None = None

    def __repr__(self) -> str:  # the token must never reach a log, even via repr()
        return f"Config(home={self.home}, workers={self.workers}x{self.threads_per_worker}, ...)"


def load_config(environ: Mapping[str, str] | None = None, dotenv: Path | None = Path(".env"),
                webhook_url: str | None = None) -> Config:
    """Build the config from ``environ`` (default: the process environment).

    A ``.env`` file, when present, fills in variables the environment does
    not set, so ``docker run -e`` and a shell export always win.
    """
    env = dict(os.environ if environ is None else environ)
    if dotenv is not None and dotenv.is_file():
        from dotenv import dotenv_values

        for key, value in dotenv_values(dotenv).items():
            if value is not None:
                env.setdefault(key, value)

    token = env.get("TELEGRAM_BOT_TOKEN", "").strip()
    if not token:
        raise ConfigError("TELEGRAM_BOT_TOKEN is not set; get one from @BotFather and put it in the environment or .env")
    home = data_home(env)
    workers = _int(env, "ANIMEBOT_WORKERS", Config.workers, 1, 64)
    cfg = Config(
        token=token,
        home=home,
        base_url=env.get("TELEGRAM_API_BASE_URL") or TELEGRAM_API,
        base_file_url=env.get("TELEGRAM_API_FILE_URL") or TELEGRAM_FILES,
        workers=workers,
        threads_per_worker=_int(env, "ANIMEBOT_THREADS", max(1, _cores() // workers), 1, 256),
        queue_size=_int(env, "ANIMEBOT_QUEUE_SIZE", Config.queue_size, 1, 10_000),
        per_user_limit=_int(env, "ANIMEBOT_PER_USER_LIMIT", Config.per_user_limit, 1, 10_000),
        job_timeout_s=float(_int(env, "ANIMEBOT_JOB_TIMEOUT", int(Config.job_timeout_s), 1, 3600)),
        max_side=_int(env, "ANIMEBOT_MAX_SIDE", Config.max_side, 64, 4096),
        video_max_s=_int(env, "ANIMEBOT_VIDEO_MAX_S", Config.video_max_s, 1, 60),
        video_max_side=_int(env, "ANIMEBOT_VIDEO_MAX_SIDE", Config.video_max_side, 64, 1280),
        default_style=env.get("ANIMEBOT_STYLE") or None,
        backend=_backend(env),
        admins=_ids(env.get("ANIMEBOT_ADMINS", ""), "ANIMEBOT_ADMINS"),
        cache_bytes=_int(env, "ANIMEBOT_CACHE_MB", Config.cache_bytes >> 20, 1, 1 << 24) << 20,
        fast_styles=_pairs(env.get("ANIMEBOT_FAST_MODE", "")),
        fast_queue=_int(env, "ANIMEBOT_FAST_QUEUE", Config.fast_queue, 0, 10_000),
        rate_per_minute=_int(env, "ANIMEBOT_RATE_PER_MINUTE", Config.rate_per_minute, 0, 100_000),
        daily_quota=_int(env, "ANIMEBOT_DAILY_QUOTA", Config.daily_quota, 0, 10_000_000),
        allowlist=_ids(env.get("ANIMEBOT_ALLOWLIST", ""), "ANIMEBOT_ALLOWLIST"),
        keep_days=_int(env, "ANIMEBOT_KEEP_DAYS", Config.keep_days, 1, 3650),
        stop_wait_s=float(_int(env, "ANIMEBOT_STOP_WAIT", int(Config.stop_wait_s), 0, 3600)),
        webhook_url=_webhook_url(webhook_url or env.get("ANIMEBOT_WEBHOOK_URL", "").strip() or None),
        webhook_listen=env.get("ANIMEBOT_WEBHOOK_LISTEN", "").strip() or Config.webhook_listen,
        webhook_port=_int(env, "ANIMEBOT_WEBHOOK_PORT", Config.webhook_port, 1, 65535),
        webhook_secret=_secret(env.get("ANIMEBOT_WEBHOOK_SECRET", "").strip() or None),
        metrics_port=_int(env, "ANIMEBOT_METRICS_PORT", 0, 0, 65535) or None,
        weights=tuple(n for n in env.get("ANIMEBOT_WEIGHTS", "").replace(" ", "").split(",") if n),
        baked_models=Path(env["ANIMEBOT_BAKED_MODELS"]) if env.get("ANIMEBOT_BAKED_MODELS") else None,
        broker_url=_broker_url(env),
        webapp_url=_webapp_url(env),
        hd=_choice(env, "ANIMEBOT_HD", "on", ("on", "off")) == "on",
    )
    if cfg.webapp_url and not (cfg.webhook_url or cfg.metrics_port):
        raise ConfigError("ANIMEBOT_WEBAPP_URL needs the bot's HTTP server: set ANIMEBOT_METRICS_PORT when polling "
                          "(the page is served there at /app), or run in webhook mode")
    return cfg


@dataclass(frozen=True)
class WorkerConfig:
    """What ``animebot worker`` needs: no Telegram token, a broker, and the models to draw with."""

    home: Path
    broker_url: str
    backend: Backend = DEFAULT_BACKEND
    threads: int = 2
    concurrency: int = 1
    job_timeout_s: float = 120.0
    default_style: str | None = None
    weights: tuple[str, ...] = ()
    baked_models: Path | None = None

    def __repr__(self) -> str:  # the broker URL holds a password
        return f"WorkerConfig(home={self.home}, concurrency={self.concurrency}x{self.threads}, ...)"


def load_worker_config(environ: Mapping[str, str] | None = None) -> WorkerConfig:
    """The worker's settings, from the same variables the bot reads (``.env`` is not read: a
    worker machine is configured by its environment)."""
    env = dict(os.environ if environ is None else environ)
    broker_url = _broker_url(env)
    if broker_url is None:
        raise ConfigError("ANIMEBOT_BROKER_URL is not set; a worker needs the Redis URL the bot uses, "
                          "e.g. redis://:password@redis:6379/0")
    concurrency = _int(env, "ANIMEBOT_WORKER_CONCURRENCY", WorkerConfig.concurrency, 1, 64)
    return WorkerConfig(
        home=data_home(env),
        broker_url=broker_url,
        backend=_backend(env),
        threads=_int(env, "ANIMEBOT_THREADS", max(1, _cores() // concurrency), 1, 256),
        concurrency=concurrency,
        job_timeout_s=float(_int(env, "ANIMEBOT_JOB_TIMEOUT", int(WorkerConfig.job_timeout_s), 1, 3600)),
        default_style=env.get("ANIMEBOT_STYLE") or None,
        weights=tuple(n for n in env.get("ANIMEBOT_WEIGHTS", "").replace(" ", "").split(",") if n),
        baked_models=Path(env["ANIMEBOT_BAKED_MODELS"]) if env.get("ANIMEBOT_BAKED_MODELS") else None,
    )


def _broker_url(env: Mapping[str, str]) -> str | None:
    url = env.get("ANIMEBOT_BROKER_URL", "").strip() or None
    if url is not None and not url.startswith(("redis://", "rediss://")):
        raise ConfigError("ANIMEBOT_BROKER_URL must be a Redis URL (redis://:password@host:6379/0); "
                          f"got one starting {url.split(':', 1)[0]!r}")
    return url


def broker_password(url: str | None) -> str | None:
    """The password in a broker URL, for the log redaction (never for printing)."""
    if not url:
        return None
    from urllib.parse import urlsplit

    return urlsplit(url).password or None


def _cores() -> int:
    """CPUs this process may use (a container's cpuset, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = env.get(name, "").strip() or default
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _backend(env: Mapping[str, str]) -> Backend:
    return cast(Backend, _choice(env, "ANIMEBOT_BACKEND", DEFAULT_BACKEND, BACKENDS))


def _pairs(raw: str) -> tuple[tuple[str, str], ...]:
    """``hayao=hayao-lite,paprika=paprika-lite`` as (style, lite style) pairs."""
    pairs = []
    for item in raw.replace(" ", "").split(","):
        if not item:
            continue
        style, sep, lite = item.partition("=")
        if not sep or not style or not lite:
            raise ConfigError(f"ANIMEBOT_FAST_MODE must look like hayao=hayao-lite, got {raw!r}")
        pairs.append((style, lite))
    return tuple(pairs)


def _ids(raw: str, name: str) -> frozenset[int]:
    try:
        return frozenset(int(part) for part in raw.replace(",", " ").split())
    except ValueError:
        raise ConfigError(f"{name} must be Telegram ids separated by commas, got {raw!r}") from None


def _webhook_url(url: str | None) -> str | None:
    """Telegram only calls HTTPS webhooks (a reverse proxy usually terminates TLS in front of us)."""
    if url is not None and not url.startswith("https://"):
        raise ConfigError(f"the webhook URL must start with https://, got {url!r}")
    return url


def _webapp_url(env: Mapping[str, str]) -> str | None:
    """Telegram opens Mini Apps over HTTPS only."""
    url = env.get("ANIMEBOT_WEBAPP_URL", "").strip() or None
    if url is not None and not url.startswith("https://"):
        raise ConfigError(f"ANIMEBOT_WEBAPP_URL must start with https:// (Telegram opens Mini Apps over HTTPS only), "
                          f"got {url!r}")
    return url


def _secret(secret: str | None) -> str | None:
    if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
        raise ConfigError("ANIMEBOT_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
    return secret
