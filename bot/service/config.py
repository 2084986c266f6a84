"""The bot's settings and the worker's, read once from the environment (the bot's also from an optional ``.env``).

Everything an operator may tune lives here, so the rest of the bot takes a ``Config`` and never reads
``os.environ`` itself. Each variable is one field of a pydantic-settings model: its name, default and
bounds stated once, and the variables the bot and its workers share declared once, in :class:`Shared`.
The environment is gathered by :func:`load_config` (the process's, or a test's mapping, with ``.env``
beneath it) and handed to the model whole, so both are read alike. A missing or malformed value is a
:class:`ConfigError` whose message is the one line the operator sees; secrets are ``SecretStr`` (or
left out of ``repr``) so that no log or traceback prints them.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from inference.engine import DEFAULT_BACKEND, Backend
from inference.pipeline import DEFAULT_MAX_SIDE
from storage.errors import AnimebotError
from weights.store import data_home

TELEGRAM_API = "https://api.telegram.org/bot"
TELEGRAM_FILES = "https://api.telegram.org/file/bot"
# What Telegram's own Bot API lets a bot fetch (getFile) and send; a Bot API server of the operator's own,
# run with --local, lets it do both up to LOCAL_API_MB.
CLOUD_DOWNLOAD_MB = 20
CLOUD_UPLOAD_MB = 50
LOCAL_API_MB = 2000
PREFIX = "ANIMEBOT_"


class ConfigError(AnimebotError):
    code = "config"


def variable(name: str) -> Any:
    """The environment variable a field is read from, where it is not ``ANIMEBOT_<FIELD>``."""
    return AliasChoices(name)


class Shared(BaseSettings):
    """What the bot and its workers both read, under the same names."""

    # Read only what load_config gathered (init values): never os.environ behind a test's back.
    model_config = SettingsConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    home: Path
    backend: Backend = DEFAULT_BACKEND
    job_timeout_s: int = Field(120, ge=1, le=3600, validation_alias=variable("ANIMEBOT_JOB_TIMEOUT"))
    default_style: str | None = Field(None, validation_alias=variable("ANIMEBOT_STYLE"))
    # Models to install at start when missing (the Docker image sets these): copied from baked_models when a
    # file there has the right hash, else downloaded. See weights/provision.py.
    weights: tuple[str, ...] = ()
    baked_models: Path | None = None
    # Scaled out: drawing happens in `animebot worker` processes reached through Celery over this Redis URL;
    # unset, the bot's own processes draw. It may hold a password: never in repr.
    broker_url: str | None = Field(None, repr=False)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)

    @field_validator("weights", mode="before")
    @classmethod
    def _names(cls, raw: object) -> object:
        return tuple(n for n in raw.replace(" ", "").split(",") if n) if isinstance(raw, str) else raw

    @field_validator("broker_url")
    @classmethod
    def _redis(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("redis://", "rediss://")):
            raise ConfigError("ANIMEBOT_BROKER_URL must be a Redis URL (redis://:password@host:6379/0); "
                              f"got one starting {url.split(':', 1)[0]!r}")
        return url

    @classmethod
    def read(cls, env: Mapping[str, str], **given: Any) -> Any:
        """The settings from ``env``: each field's variable, blank meaning unset; ``given`` over them."""
        values: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            raw = env.get(env_name(name, info), "").strip()
            if raw:
                values[name] = raw
        try:
            return cls(**{**values, **given})
        except ValidationError as exc:
            raise ConfigError(_one_line(cls, exc, env)) from None


def env_name(field: str, info: FieldInfo) -> str:
    alias = info.validation_alias
    return str(alias.choices[0]) if isinstance(alias, AliasChoices) else PREFIX + field.upper()


def _one_line(model: type[Shared], exc: ValidationError, env: Mapping[str, str]) -> str:
    """The first thing wrong, as the operator set it: the variable's name, what it must be, what it was."""
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error["loc"] else ""
    info = model.model_fields.get(field)
    name = env_name(field, info) if info is not None else field
    raw = env.get(name, "").strip()
    kind = error["type"]
    if kind == "missing" and name == "TELEGRAM_BOT_TOKEN":
        return "TELEGRAM_BOT_TOKEN is not set; get one from @BotFather and put it in the environment or .env"
    if kind in ("int_parsing", "int_from_float"):
        return f"{name} must be a whole number, got {raw!r}"
    if kind in ("greater_than_equal", "less_than_equal") and info is not None:
        low, high = (next(getattr(m, side) for m in info.metadata if hasattr(m, side)) for side in ("ge", "le"))
        return f"{name} must be between {low} and {high}, got {raw}"
    if kind == "literal_error":
        return f"{name} must be one of {error['ctx']['expected'].replace(chr(39), '')}, got {raw!r}"
    if kind == "bool_parsing":
        return f"{name} must be true or false, got {raw!r}"
    if kind == "float_parsing":
        return f"{name} must be a number, got {raw!r}"
    return f"{name}: {error['msg']}, got {raw!r}"


class Kept(Shared):
    """How long users' data is kept: the bot's setting, which ``animebot backup --prune`` reads too."""

    # Results, records of photos, stored requests and update contents older than this are deleted
    # (storage/retention.py); /forget deletes one user's at once. Backups older than this are deleted by
    # `animebot backup --prune DIR` (docs/privacy.md).
    keep_days: int = Field(30, ge=1, le=3650)


class Config(Kept):
    """The bot's settings."""

    token: SecretStr = Field(validation_alias=variable("TELEGRAM_BOT_TOKEN"))
    base_url: str = Field(TELEGRAM_API, validation_alias=variable("TELEGRAM_API_BASE_URL"))
    base_file_url: str = Field(TELEGRAM_FILES, validation_alias=variable("TELEGRAM_API_FILE_URL"))
    # The Bot API server at base_url runs with --local (docs/operations.md, "Your own Bot API server"):
    # getFile gives a path on a disk this bot shares, and files past Telegram's 20 MB and 50 MB go both ways.
    api_local: bool = Field(False, validation_alias=variable("TELEGRAM_API_LOCAL"))
    # The biggest file a user may send, ours and not Telegram's: a 2-core bot decodes a 50 MB PNG in a few
    # seconds, and a waiting file's bytes are kept in memory. Without a local Bot API, 20 MB still caps it.
    max_file_mb: int = Field(50, ge=1, le=LOCAL_API_MB)
    # One worker using every core, chosen by measurement (docs/benchmarks.md, "Choosing the worker layout",
    # has the numbers): a lone user waits less than with one single-threaded worker per core, for about as
    # many photos a minute and half the memory. Unset, each worker gets an equal share of the cores.
    workers: int = Field(1, ge=1, le=64)
    threads_per_worker: int = Field(0, ge=1, le=256, validation_alias=variable("ANIMEBOT_THREADS"))
    # Photos that may wait for a worker, all users together; the journal holds them, and each waiting
    # photo's bytes are in memory (a few hundred kB).
    queue_size: int = Field(100, ge=1, le=10_000)
    # Photos one user may have waiting or being drawn; past it, the rest of a burst is refused with one
    # sentence. The fair queue (bot/drawing/fairqueue.py), not this limit, keeps one user from starving others.
    per_user_limit: int = Field(20, ge=1, le=10_000)
    max_side: int = Field(DEFAULT_MAX_SIDE, ge=64, le=4096)
    # Clips (GIFs, videos, video notes): longer ones are drawn as their first video_max_s seconds.
    video_max_s: int = Field(10, ge=1, le=60)
    video_max_side: int = Field(480, ge=64, le=1280)
    admins: frozenset[int] = frozenset()
    cache_mb: int = Field(2048, ge=1, le=1 << 24)
    # How long an album's parts are waited for after its first, before it is drawn as one request.
    album_wait_s: float = Field(1.0, ge=0.1, le=30, validation_alias=variable("ANIMEBOT_ALBUM_WAIT"))
    # "Fast mode": while fast_queue photos wait, a style with a lite version (``animebot prune``) is drawn
    # with it instead, so waits stay bounded. ANIMEBOT_FAST_MODE=hayao=hayao-lite,paprika=paprika-lite
    fast_styles: tuple[tuple[str, str], ...] = Field((), validation_alias=variable("ANIMEBOT_FAST_MODE"))
    fast_queue: int = Field(4, ge=0, le=10_000)
    poll_timeout_s: ClassVar[int] = 30
    # Abuse and access (bot/flow/access.py); 0 switches a limit off. An empty allowlist lets everyone in.
    rate_per_minute: int = Field(10, ge=0, le=100_000)
    daily_quota: int = Field(200, ge=0, le=10_000_000)
    allowlist: frozenset[int] = frozenset()
    # A graceful stop waits this long for photos already being drawn; Docker's stop grace period must be
    # longer (docker-compose.yml gives 60 s).
    stop_wait_s: int = Field(30, ge=0, le=3600, validation_alias=variable("ANIMEBOT_STOP_WAIT"))
    # Webhook mode instead of polling when webhook_url is set.
    webhook_url: str | None = None
    webhook_listen: str = "0.0.0.0"
    webhook_port: int = Field(8443, ge=1, le=65535)
    webhook_secret: str | None = Field(None, repr=False)
    # Polling mode: serve /healthz and /metrics on this port too (webhook mode always does, on its port).
    metrics_port: int | None = Field(None, ge=0, le=65535)
    # The Mini App's public https:// address (bot/webapp/): served at /app by the same server as the webhook
    # or /metrics, offered as the menu button and under each result. Unset: no Mini App.
    webapp_url: str | None = None
    # HD (bot/flow/kinds/hd.py): the HD button under results, when the Real-CUGAN model is installed.
    hd: bool = True  # ANIMEBOT_HD=on or off

    @property
    def cache_bytes(self) -> int:
        return self.cache_mb << 20

    @property
    def download_bytes(self) -> int:
        """The biggest file the bot fetches: ours, within what the Bot API it talks to hands out."""
        return min(self.max_file_mb, LOCAL_API_MB if self.api_local else CLOUD_DOWNLOAD_MB) << 20

    @property
    def upload_bytes(self) -> int:
        """The biggest file the Bot API it talks to takes from it."""
        return (LOCAL_API_MB if self.api_local else CLOUD_UPLOAD_MB) << 20

    @field_validator("admins", "allowlist", mode="before")
    @classmethod
    def _ids(cls, raw: object, info: ValidationInfo) -> object:
        """Telegram ids separated by commas or spaces."""
        if not isinstance(raw, str):
            return raw
        try:
            return frozenset(int(part) for part in raw.replace(",", " ").split())
        except ValueError:
            name = env_name(str(info.field_name), cls.model_fields[str(info.field_name)])
            raise ConfigError(f"{name} must be Telegram ids separated by commas, got {raw!r}") from None

    @field_validator("hd", mode="before")
    @classmethod
    def _on_off(cls, raw: object) -> object:
        if isinstance(raw, str) and raw not in ("on", "off"):
            raise ConfigError(f"ANIMEBOT_HD must be one of on, off, got {raw!r}")
        return raw == "on" if isinstance(raw, str) else raw

    @field_validator("webhook_url")
    @classmethod
    def _https_webhook(cls, url: str | None) -> str | None:
        """Telegram only calls HTTPS webhooks (a reverse proxy usually terminates TLS in front of us)."""
        if url is not None and not url.startswith("https://"):
            raise ConfigError(f"the webhook URL must start with https://, got {url!r}")
        return url

    @field_validator("webapp_url")
    @classmethod
    def _https_page(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith("https://"):
            raise ConfigError("ANIMEBOT_WEBAPP_URL must start with https:// (Telegram opens Mini Apps over HTTPS "
                              f"only), got {url!r}")
        return url

    @field_validator("webhook_secret")
    @classmethod
    def _secret(cls, secret: str | None) -> str | None:
        if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
            raise ConfigError("ANIMEBOT_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
        return secret

    @field_validator("fast_styles", mode="before")
    @classmethod
    def _pairs(cls, raw: object) -> object:
        """``hayao=hayao-lite,paprika=paprika-lite`` as (style, lite style) pairs."""
        if not isinstance(raw, str):
            return raw
        pairs = []
        for item in filter(None, raw.replace(" ", "").split(",")):
            style, sep, lite = item.partition("=")
            if not (sep and style and lite):
                raise ConfigError(f"ANIMEBOT_FAST_MODE must look like hayao=hayao-lite, got {raw!r}")
            pairs.append((style, lite))
        return tuple(pairs)

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, values: dict[str, Any]) -> dict[str, Any]:
        """What one variable's default depends on another's: each worker's share of the cores; a metrics port
        of 0 is none."""
        _share_cores(values, "threads_per_worker", "workers")
        if str(values.get("metrics_port", "")).strip() in ("0", ""):
            values.pop("metrics_port", None)
        return values

    @model_validator(mode="after")
    def _served(self) -> Config:
        """The rules across variables: the Mini App needs the bot's HTTP server, and local mode a local server."""
        if self.webapp_url and not (self.webhook_url or self.metrics_port):
            raise ConfigError("ANIMEBOT_WEBAPP_URL needs the bot's HTTP server: set ANIMEBOT_METRICS_PORT when "
                              "polling (the page is served there at /app), or run in webhook mode")
        if self.api_local and self.base_url == TELEGRAM_API:
            raise ConfigError("TELEGRAM_API_LOCAL=true needs TELEGRAM_API_BASE_URL set to your own Bot API server "
                              "(telegram-bot-api --local); Telegram's api.telegram.org has no local mode")
        return self


def load_config(environ: Mapping[str, str] | None = None, dotenv: Path | None = Path(".env"),
                webhook_url: str | None = None) -> Config:
    """Build the config from ``environ`` (default: the process environment).

    A ``.env`` file, when present, fills in variables the environment does not set, so ``docker run -e``
    and a shell export always win. ``webhook_url`` (``animebot run --webhook``) wins over both.
    """
    env = _gathered(environ, dotenv)
    if webhook_url:
        env["ANIMEBOT_WEBHOOK_URL"] = webhook_url
    cfg: Config = Config.read(env, home=data_home(env))
    return cfg


def load_kept(environ: Mapping[str, str] | None = None, dotenv: Path | None = Path(".env")) -> Kept:
    """The home and ``ANIMEBOT_KEEP_DAYS`` as the bot reads them (no token needed): for backups."""
    env = _gathered(environ, dotenv)
    kept: Kept = Kept.read(env, home=data_home(env))
    return kept


def _gathered(environ: Mapping[str, str] | None, dotenv: Path | None) -> dict[str, str]:
    """``environ`` (default: the process environment), with a ``.env`` file's variables beneath it."""
    env = dict(os.environ if environ is None else environ)
    if dotenv is not None and dotenv.is_file():
        from dotenv import dotenv_values

        for key, value in dotenv_values(dotenv).items():
            if value is not None:
                env.setdefault(key, value)
    return env


class WorkerConfig(Shared):
    """What ``animebot worker`` needs: no Telegram token, a broker, and the models to draw with."""

    broker_url: str = Field(repr=False)  # a worker is only ever scaled out
    threads: int = Field(0, ge=1, le=256)
    concurrency: int = Field(1, ge=1, le=64, validation_alias=variable("ANIMEBOT_WORKER_CONCURRENCY"))

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Each drawing process's share of the cores, unless ANIMEBOT_THREADS says."""
        _share_cores(values, "threads", "concurrency")
        return values


def load_worker_config(environ: Mapping[str, str] | None = None) -> WorkerConfig:
    """The worker's settings, from the same variables the bot reads (``.env`` is not read: a worker machine
    is configured by its environment)."""
    env = dict(os.environ if environ is None else environ)
    if not env.get("ANIMEBOT_BROKER_URL", "").strip():
        raise ConfigError("ANIMEBOT_BROKER_URL is not set; a worker needs the Redis URL the bot uses, "
                          "e.g. redis://:password@redis:6379/0")
    cfg: WorkerConfig = WorkerConfig.read(env, home=data_home(env))
    return cfg


def broker_password(url: str | None) -> str | None:
    """The password in a broker URL, for the log redaction (never for printing)."""
    if not url:
        return None
    from urllib.parse import urlsplit

    return urlsplit(url).password or None


def _share_cores(values: dict[str, Any], threads: str, processes: str) -> None:
    """``threads``'s default, where the environment gives none: an equal share of the cores for each of the
    ``processes`` (a bad count is left to its own field's check, and shares as one)."""
    if threads not in values:
        try:
            count = max(1, int(values.get(processes, 1)))
        except (TypeError, ValueError):
            count = 1
        values[threads] = max(1, _cores() // count)


def _cores() -> int:
    """CPUs this process may use (a container's cpuset, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
