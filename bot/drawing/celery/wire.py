"""What the bot and ``animebot worker`` agree on when drawing is scaled out over Celery and Redis.

Both build their Celery app with :func:`make_celery`, send orders and results
as the plain, versioned dicts made here (with storage/codec.py, the journal's codec too), and meet in Redis through the
workers' heartbeats. Messages are msgpack only, and every one is checked
field by field before it is used: whoever can write to the broker must not
be able to run code on a worker (pickle) or make it draw something other than
a photo order.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import redis
from celery import Celery

from inference.drawer import WorkFailed, WorkOrder
from inference.errors import AnimebotError
from inference.pipeline import Converted
from storage.codec import decode, encode

TASK_NAME = "animebot.draw"
QUEUE = "animebot"
HEARTBEAT_PREFIX = "animebot:worker:"
# Orders and results carry this; a bot and a worker of different releases refuse each other's messages
# with a sentence that says so, rather than misreading a field.
WIRE_VERSION = 2  # 2: clips (an order's clip settings, a result's clip facts)
# Telegram lets a bot download files of up to 20 MB, so no real photo is larger.
MAX_PHOTO_BYTES = 20 << 20
# Short enough that a dead Redis fails a call within seconds instead of hanging it.
REDIS_TIMEOUT_S = 5.0
# How long Redis keeps a result nobody read, and the marker of a task the bot is done with (answered_key).
RESULT_EXPIRES_S = 3600


class BadMessage(AnimebotError):
    """A message from the broker that is not exactly what this release sends; nothing acts on it."""

    code = "bad_message"


class BadOrder(BadMessage):
    code = "bad_order"


def make_celery(broker_url: str, job_timeout_s: float) -> Celery:
    """The Celery app of the bot and of its workers: Redis (``broker_url``) as broker and result store."""
    app = Celery("animebot", broker=broker_url, backend=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="msgpack",
        result_serializer="msgpack",
        accept_content=["msgpack"],
        result_accept_content=["msgpack"],
        # A photo is acknowledged once drawn: if its pool process dies, Celery queues it again at once;
        # if the whole worker dies, Redis hands it out again after the visibility timeout.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=QUEUE,
        # Redis gives an unacknowledged photo to another worker after this long: above the job timeout,
        # so a slow drawing is not drawn twice.
        broker_transport_options={"visibility_timeout": job_timeout_s + 60, "socket_timeout": REDIS_TIMEOUT_S,
                                  "socket_connect_timeout": REDIS_TIMEOUT_S},
        redis_socket_timeout=REDIS_TIMEOUT_S,
        redis_socket_connect_timeout=REDIS_TIMEOUT_S,
        result_expires=RESULT_EXPIRES_S,
        # Past the hard limit Celery kills the pool process (and starts another) and stores TimeLimitExceeded.
        # The soft limit raises in Python code only, so it ends a drawing a little earlier only when it falls
        # between the model's native calls (as a WorkFailed "internal").
        task_time_limit=job_timeout_s,
        task_soft_time_limit=job_timeout_s - min(5.0, job_timeout_s / 10),
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        task_publish_retry=False,  # the bot retries itself, and says so to the user
    )
    return app


def order_to_message(order: WorkOrder) -> dict[str, object]:
    return {"v": WIRE_VERSION, **encode(order)}


def order_from_message(msg: object) -> WorkOrder:
    """The order in ``msg``, or BadOrder if it is not exactly one (fields, types, photo size)."""
    order = decode(_unversioned(msg, "order", BadOrder), WorkOrder, "order", BadOrder)
    if len(order.data) > MAX_PHOTO_BYTES:
        raise BadOrder(f"the order's photo is {len(order.data):,} bytes, over the {MAX_PHOTO_BYTES:,} "
                       f"({MAX_PHOTO_BYTES >> 20} MiB) an order may carry")
    return order


def result_to_message(reply: Converted | WorkFailed) -> dict[str, object]:
    return {"v": WIRE_VERSION, "kind": "failed" if isinstance(reply, WorkFailed) else "converted", **encode(reply)}


def result_from_message(msg: object) -> Converted | WorkFailed:
    """The worker's answer in ``msg``, or BadMessage if it is not exactly one."""
    body = _unversioned(msg, "result", BadMessage)
    kinds: dict[object, type[Converted] | type[WorkFailed]] = {"converted": Converted, "failed": WorkFailed}
    kind = body.pop("kind", None)
    if kind not in kinds:
        raise BadMessage(f"a result's kind must be converted or failed, got {kind!r}")
    return decode(body, kinds[kind], "result", BadMessage)


@dataclass(frozen=True)
class WorkerInfo:
    """One worker process, as its heartbeat tells the bot (``/stats``, and which styles it can send)."""

    name: str  # the Celery node: animebot@HOST-PID of the worker's main process
    pid: int  # this drawing process
    styles: tuple[str, ...]
    engine: str  # e.g. "openvino bf16"
    faces: str  # "on", or "off: why"
    task: str | None  # the Celery task id being drawn now
    seen: float  # unix time of this heartbeat
    progress: tuple[int, int] | None = None  # a clip's frames drawn so far, of how many


CANCEL_PREFIX = "animebot:cancel:"  # a key per task the bot wants stopped (a clip whose Cancel was pressed)
# A key per task the bot is done with (its result read, or the photo given up). Redis hands a killed
# worker's unacknowledged order to another worker after the visibility timeout, long after the bot sent
# it again and answered; a worker that finds this key skips the order instead of drawing it for nobody.
ANSWERED_PREFIX = "animebot:answered:"


def cancel_key(task_id: str) -> str:
    return f"{CANCEL_PREFIX}{task_id}"


def answered_key(task_id: str) -> str:
    return f"{ANSWERED_PREFIX}{task_id}"


def task_id_for(job_id: str, result_key: str) -> str:
    """The Celery task id of one drawing: the job's, and a digest of the drawing's whole cache key.

    One job may draw one photo in several styles at once ("All styles", a preview sheet), and every
    style's key starts with the same photo hash, so the whole key must go into the id: two drawings
    under one id would overwrite each other's result. The id is the same each time the bot sends that
    drawing again, after a lost worker or a restart, so whatever is delivered twice is answered once."""
    return f"{job_id}:{hashlib.sha256(result_key.encode()).hexdigest()[:32]}"


def order_summary(order: WorkOrder) -> str:
    """What Celery's tools (``celery inspect active``, Flower, its logs) show of an order in place of
    its arguments: which job and style, and how big, never the photo's bytes."""
    kind = "clip" if order.clip is not None else "photo"
    return f"(job {order.job_id}, {order.style}, {kind} of {len(order.data):,} bytes)"


def heartbeat_key(info: WorkerInfo) -> str:
    return f"{HEARTBEAT_PREFIX}{info.name}:{info.pid}"


def write_heartbeat(client: redis.Redis, info: WorkerInfo, ttl_s: float) -> None:
    """Say that ``info``'s process is alive; Redis forgets it ``ttl_s`` after the last heartbeat."""
    client.set(heartbeat_key(info), json.dumps(encode(info)), px=int(ttl_s * 1000))


def read_workers(client: redis.Redis) -> list[WorkerInfo]:
    """Every worker process whose heartbeat is fresh, sorted by name and pid; unreadable entries are skipped."""
    keys = list(client.scan_iter(match=f"{HEARTBEAT_PREFIX}*", count=100))
    workers = []
    for raw in client.mget(keys) if keys else []:
        if raw is None:  # expired since the SCAN
            continue
        try:
            workers.append(decode(json.loads(raw), WorkerInfo, "heartbeat", BadMessage))
        except (ValueError, BadMessage):  # not JSON, or not a heartbeat of this release
            continue
    return sorted(workers, key=lambda w: (w.name, w.pid))


def _unversioned(msg: object, what: str, error: type[BadMessage]) -> dict[str, object]:
    """``msg`` without its version field, once the version is ours."""
    if not isinstance(msg, dict):
        raise error(f"the {what} must be a map, got {type(msg).__name__}")
    body = dict(msg)
    version = body.pop("v", None)
    if type(version) is not int or version != WIRE_VERSION:
        raise error(f"the {what} is in format version {version!r}, not {WIRE_VERSION}: the bot and its workers "
                    "must run the same release")
    return body
