"""What the bot and ``animebot worker`` send each other through Redis, and check before use.

Orders and results are plain, versioned dicts made here (with storage/codec.py, the journal's
codec too); every message is checked field by field, and anything that is not exactly what some
format this release reads says is refused unread. Beside them, each worker process's heartbeat, and
the keys by which the bot asks a clip to stop and says it is done with a task.

A rolling upgrade runs a bot and workers of two releases side by side, so each message is written
in the oldest format that can say it: an order that asks nothing of the newest format's fields is
written without them, under the older version, and a worker of the release before reads it. A worker
reads every format from :data:`OLDEST_READ` on, an older one's missing fields taking the values they
stood for. What only the newest format can say (an HD) is refused by an older worker; the bot sends it
again a few times and then says so to its user (bot/drawing/celery/resend.py).
"""
from __future__ import annotations

import copy
import hmac
import json
from dataclasses import dataclass

import redis

from storage.errors import AnimebotError
from inference.drawer import WorkFailed, WorkOrder
from inference.pipeline import Converted
from storage.codec import decode, encode

TASK_NAME = "animebot.draw"
HEARTBEAT_PREFIX = "animebot:worker:"
# Orders and results carry their format's version; a bot and a worker of releases too far apart refuse each
# other's messages with a sentence that says so, rather than misreading a field. tests/scale_out/
# test_wire_formats.py holds each format's fields: a change to them fails it until it has a version here.
WIRE_VERSION = 5  # 2: clips (an order's clip settings, a result's clip facts); 3: stickers and cut-outs
# (settings.cut); 4: HD (an order's hd); 5: a failure's numbers (WorkFailed.values)
OLDEST_READ = 3  # the oldest format read, and written where it can say the message (the release before HD)
# What each format after OLDEST_READ added, by the message that carries it, with what a message of an older
# format means by its absence. A drawing's result has not changed since 3.
ADDED: dict[str, dict[int, dict[str, object]]] = {"order": {4: {"hd": False}}, "failed": {5: {"values": {}}}}
# A Celery header on each order: the newest format its bot reads results in. A worker answers in it, leaving
# out what that format lacks (a failure's numbers); an order without it is from a bot before the header,
# which reads OLDEST_READ.
READS_HEADER = "animebot_reads"
# Telegram lets a bot download files of up to 20 MB, so no real photo is larger.
MAX_PHOTO_BYTES = 20 << 20


class BadMessage(AnimebotError):
    """A message from the broker that is not exactly what this release sends; nothing acts on it."""

    code = "bad_message"


class BadOrder(BadMessage):
    code = "bad_order"


def order_to_message(order: WorkOrder) -> dict[str, object]:
    """``order`` in the oldest format that can say it (one whose later fields it leaves as they were)."""
    return _in_oldest_format(encode(order), ADDED["order"])


def order_from_message(msg: object) -> WorkOrder:
    """The order in ``msg``, or BadOrder if it is not exactly one (fields, types, photo size)."""
    body, version = _versioned(msg, "order", BadOrder)
    order = decode(_as_now(body, version, ADDED["order"], "order", BadOrder), WorkOrder, "order", BadOrder)
    if len(order.data) > MAX_PHOTO_BYTES:
        raise BadOrder(f"the order's photo is {len(order.data):,} bytes, over the {MAX_PHOTO_BYTES:,} "
                       f"({MAX_PHOTO_BYTES >> 20} MiB) an order may carry")
    return order


def result_to_message(reply: Converted | WorkFailed, reads: int = WIRE_VERSION) -> dict[str, object]:
    """``reply`` in the oldest format that can say it, and none newer than its bot ``reads``: a bot of the
    release before gets a failure without its numbers (it says the worker's English sentence)."""
    kind = "failed" if isinstance(reply, WorkFailed) else "converted"
    return {"kind": kind, **_in_oldest_format(encode(reply), ADDED.get(kind, {}), reads)}


def result_from_message(msg: object) -> Converted | WorkFailed:
    """The worker's answer in ``msg``, or BadMessage if it is not exactly one."""
    body, version = _versioned(msg, "result", BadMessage)
    kinds: dict[object, type[Converted] | type[WorkFailed]] = {"converted": Converted, "failed": WorkFailed}
    kind = body.pop("kind", None)
    if kind not in kinds:
        raise BadMessage(f"a result's kind must be converted or failed, got {kind!r}")
    return decode(_as_now(body, version, ADDED.get(str(kind), {}), "result", BadMessage), kinds[kind], "result",
                  BadMessage)


@dataclass(frozen=True)
class WorkerInfo:
    """One worker process, as its heartbeat tells the bot (``/stats``, and which styles it can send)."""

    name: str  # the Celery node: animebot@HOST-RANDOM-PID of the worker's main process
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
# Celery's revoke cannot do this: a worker keeps revoked ids in its own memory (on disk only with a state
# db), so one started later learns them only from a live one at mingle, and a revoke lets a task already
# running store its result.
ANSWERED_PREFIX = "animebot:answered:"


def cancel_key(task_id: str) -> str:
    return f"{CANCEL_PREFIX}{task_id}"


def answered_key(task_id: str) -> str:
    return f"{ANSWERED_PREFIX}{task_id}"


def task_id_for(job_id: str, result_key: str, secret: bytes) -> str:
    """The Celery task id of one drawing: the job's, and a digest of the drawing's whole cache key.

    One job may draw one photo in several styles at once ("All styles", a preview sheet), and every
    style's key starts with the same photo hash, so the whole key must go into the id: two drawings
    under one id would overwrite each other's result. The id is the same each time the bot sends that
    drawing again, after a lost worker or a restart, so whatever is delivered twice is answered once.
    The digest is keyed with the bot's own ``secret``: task ids are in Redis, in Flower and in the
    workers' logs, and a plain hash of the key would let anyone holding a photo prove it was drawn."""
    return f"{job_id}:{hmac.new(secret, result_key.encode(), 'sha256').hexdigest()[:32]}"


def order_summary(order: WorkOrder) -> str:
    """What Celery's tools (``celery inspect active``, Flower, its logs) show of an order in place of
    its arguments: which job and style, and how big, never the photo's bytes."""
    kind = "clip" if order.clip is not None else "photo"
    return f"(job {order.job_id}, {order.style}, {kind} of {len(order.data):,} bytes)"


def result_summary(reply: Converted | WorkFailed) -> str:
    """What Celery's tools show of a result in place of the drawing: its size and faces, or why it
    failed, never the drawing's bytes."""
    if isinstance(reply, WorkFailed):
        return f"(failed: {reply.code})"
    kind = "clip" if reply.clip is not None else "picture"
    faces = sum(1 for f in reply.faces if f.get("pass"))
    w, h = reply.output_size
    return f"({reply.style} {kind} {w}x{h}, {faces} face(s) redrawn, {len(reply.data):,} bytes)"


class Summarized:
    """A result on its way to Redis: the message the bot reads, shown by Celery's tools as its summary.

    Celery's events carry a task's result as its repr, and Flower shows and keeps them; a plain dict
    would show the drawing's first kilobyte as hex. The serializer of bot/drawing/celery/app.py stores
    :attr:`message` alone."""

    __slots__ = ("message", "summary")

    def __init__(self, message: dict[str, object], summary: str) -> None:
        self.message = message
        self.summary = summary

    def __repr__(self) -> str:
        return self.summary


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


def _in_oldest_format(body: dict[str, object], added: dict[int, dict[str, object]], newest: int = WIRE_VERSION
                      ) -> dict[str, object]:
    """``body`` under the oldest version whose fields say it all, and none past ``newest`` (the fields of
    formats after it are left out): the fields of each later format are left out while they hold what an
    older message means by their absence."""
    version = WIRE_VERSION
    while version > OLDEST_READ and (version > newest or all(
            body[name] == was for name, was in added.get(version, {}).items())):
        for name in added.get(version, {}):
            del body[name]
        version -= 1
    return {"v": version, **body}


def _as_now(body: dict[str, object], version: int, added: dict[int, dict[str, object]], what: str,
            error: type[BadMessage]) -> dict[str, object]:
    """``body``, of format ``version``, with the fields later formats added, as its absence of them means."""
    for since, fields in added.items():
        if since > version:
            for name, was in fields.items():
                if name in body:
                    raise error(f"the {what} has the field {name}, which its format version {version} does not")
                body[name] = copy.copy(was)  # a map of its own, not one shared by every message
    return body


def _versioned(msg: object, what: str, error: type[BadMessage]) -> tuple[dict[str, object], int]:
    """``msg`` without its version field, and that version, once it is one this release reads."""
    if not isinstance(msg, dict):
        raise error(f"the {what} must be a map, got {type(msg).__name__}")
    body = dict(msg)
    version = body.pop("v", None)
    if type(version) is not int or not OLDEST_READ <= version <= WIRE_VERSION:
        raise error(f"the {what} is in format version {version!r}, and this release reads {OLDEST_READ} to "
                    f"{WIRE_VERSION}: the bot and its workers are of releases too far apart")
    return body, version
