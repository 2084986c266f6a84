"""What the bot and ``animebot worker`` send each other through Redis, and check before use.

Orders and results are plain, versioned dicts made here (with storage/codec.py, the journal's
codec too); every message is checked field by field, and anything that is not exactly what some
format this release reads says is refused unread. Beside them: each worker process's heartbeat, the
key by which the bot asks a clip to stop, and the key a photo's bytes wait in.

A photo's bytes do not ride in its order (the claim check): the bot puts them in a key of their own,
with a lifetime, and the order (a few hundred bytes) names the key. Redis's queue and kombu's hash of
orders being drawn then hold no photo, and the bot deletes the key once it has the answer (or the
user said /forget), so no copy of a photo outlives its answer. A worker that finds the key gone skips
the order: the bot is done with it (a copy Redis handed out again, a photo given up).

A rolling upgrade runs a bot and workers of two releases side by side, so each message is written
in the oldest format that can say it. A worker of the release before reads only orders with their
bytes inside (formats 3 to 5), so the bot sends those while any live worker's heartbeat does not say
it reads claim checks (:func:`heartbeat_key`), and claim checks once every one does. A worker reads
every format from :data:`OLDEST_READ` on, an older one's missing fields taking the values they stood
for. What only a newer format can say (an HD, to the release before HD) is refused by an older
worker; the bot sends it again a few times and then says so to its user (bot/drawing/celery/resend.py).
"""
from __future__ import annotations

import copy
import hmac
import json
import re
from dataclasses import dataclass
from typing import NamedTuple, cast, get_args

import redis

from bot.service.config import LOCAL_API_MB
from storage.errors import AnimebotError
from inference.clip_settings import ClipSettings
from inference.drawer import Operation, WorkFailed, WorkOrder
from inference.pipeline import Converted, ConvertSettings
from storage.codec import decode, encode

TASK_NAME = "animebot.draw"
HEARTBEAT_PREFIX = "animebot:worker:"
PHOTO_PREFIX = "animebot:photo:"  # a key per order sent as a claim check, holding its photo's bytes
# Orders and results carry their format's version; a bot and a worker of releases too far apart refuse each
# other's messages with a sentence that says so, rather than misreading a field. tests/scale_out/
# test_wire_formats.py holds each format's fields: a change to them fails it until it has a version here.
WIRE_VERSION = 6  # 2: clips (an order's clip settings, a result's clip facts); 3: stickers and cut-outs
# (settings.cut); 4: HD (an order's hd); 5: a failure's numbers (WorkFailed.values); 6: claim checks (an
# order names the key of its photo's bytes, and says its operation instead of hd)
CLAIMED_SINCE = 6  # the first format whose orders are claim checks; those before carry the bytes
OLDEST_READ = 3  # the oldest format read, and written where it can say the message (the release before HD)
# What each format from OLDEST_READ to CLAIMED_SINCE added, by the message that carries it, with what a message
# of an older format means by its absence. A drawing's result has not changed since 3.
ADDED: dict[str, dict[int, dict[str, object]]] = {"order": {4: {"hd": False}}, "failed": {5: {"values": {}}}}
# A Celery header on each order: the newest format its bot reads results in. A worker answers in it, leaving
# out what that format lacks (a failure's numbers); an order without it is from a bot before the header,
# which reads OLDEST_READ.
READS_HEADER = "animebot_reads"
# The state a worker stores for a clip being drawn, with its frames so far ({"done": n, "total": m}) as the
# state's meta: a state of our own, which Celery's tools show as it is.
PROGRESS = "PROGRESS"
# No photo is bigger than the most ANIMEBOT_MAX_FILE_MB allows: what a Bot API server in local mode hands out.
# (The bot keeps to its own, smaller limit; this one only refuses what no bot sends.)
MAX_PHOTO_BYTES = LOCAL_API_MB << 20


@dataclass(frozen=True)
class InlineOrder:
    """An order of formats 3 to 5, which a worker of the release before reads: the bytes inside it."""

    job_id: str
    data: bytes
    style: str
    settings: ConvertSettings
    clip: ClipSettings | None = None
    hd: bool = False  # a doubling (since format 4), the one operation besides drawing those formats can say


@dataclass(frozen=True)
class ClaimedOrder:
    """An order of format 6 on: the key its bytes wait in, and its operation."""

    job_id: str
    photo: str  # the key (PHOTO_PREFIX and its task id)
    style: str
    settings: ConvertSettings
    clip: ClipSettings | None
    operation: str  # one of inference/drawer.py's Operation


class Ordered(NamedTuple):
    """An order as read: its bytes are empty while they wait in ``photo_key`` (None: they came inside it)."""

    order: WorkOrder
    photo_key: str | None


class BadMessage(AnimebotError):
    """A message from the broker that is not exactly what this release sends; nothing acts on it."""

    code = "bad_message"


class BadOrder(BadMessage):
    code = "bad_order"


def order_to_message(order: WorkOrder, photo_key: str | None = None) -> dict[str, object]:
    """``order`` as a claim check naming ``photo_key`` (where the bot put its bytes, :func:`put_photo`), or
    without one with its bytes inside, in the oldest format that can say it (for a worker of a release before)."""
    if photo_key is not None:
        claimed = ClaimedOrder(order.job_id, photo_key, order.style, order.settings, order.clip, order.operation)
        return {"v": WIRE_VERSION, **encode(claimed)}
    inline = InlineOrder(order.job_id, order.data, order.style, order.settings, order.clip,
                         hd=order.operation == "double")
    return _in_oldest_format(encode(inline), ADDED["order"], CLAIMED_SINCE - 1)


def order_from_message(msg: object) -> Ordered:
    """The order in ``msg``, or BadOrder if it is not exactly one (fields, types, photo size, key)."""
    body, version = _versioned(msg, "order", BadOrder)
    if version >= CLAIMED_SINCE:
        claimed = decode(body, ClaimedOrder, "order", BadOrder)
        if claimed.operation not in get_args(Operation):
            raise BadOrder(f"the order's operation must be one of {', '.join(get_args(Operation))}, "
                           f"got {claimed.operation!r}")
        if not claimed.photo.startswith(PHOTO_PREFIX):
            raise BadOrder(f"the order's photo must be a key starting {PHOTO_PREFIX}, got {claimed.photo[:80]!r}")
        return Ordered(WorkOrder(claimed.job_id, b"", claimed.style, claimed.settings, claimed.clip,
                                 cast(Operation, claimed.operation)), claimed.photo)
    inline = decode(_as_now(body, version, ADDED["order"], "order", BadOrder), InlineOrder, "order", BadOrder)
    _check_size(len(inline.data))
    return Ordered(WorkOrder(inline.job_id, inline.data, inline.style, inline.settings, inline.clip,
                             "double" if inline.hd else "draw"), None)


def photo_key(task_id: str) -> str:
    return f"{PHOTO_PREFIX}{task_id}"


def photo_key_of(msg: object) -> str | None:
    """The key a claim check's photo waits in, read from the message without checking the rest; None for
    anything else (an order with its bytes inside, or no order)."""
    found = msg.get("photo") if isinstance(msg, dict) else None
    return found if isinstance(found, str) and found.startswith(PHOTO_PREFIX) else None


def put_photo(client: redis.Redis, key: str, data: bytes, ttl_s: float) -> None:
    """The photo's bytes under ``key`` for ``ttl_s`` at most: long enough for any order to be taken and drawn,
    short enough that a bot killed before it could delete them leaves them in Redis for minutes, not for ever."""
    client.set(key, data, ex=max(1, int(ttl_s)))


def fetch_photo(client: redis.Redis, key: str) -> bytes | None:
    """The photo a claim check names; None once the bot deleted it (it is done with the order); BadOrder
    if it is bigger than any photo Telegram lets the bot download."""
    data = client.get(key)
    if data is None:
        return None
    if not isinstance(data, bytes):
        raise BadOrder(f"the key {key} holds {type(data).__name__}, not a photo's bytes")
    _check_size(len(data))
    return data


def _check_size(size: int) -> None:
    if size > MAX_PHOTO_BYTES:
        raise BadOrder(f"the order's photo is {size:,} bytes, over the {MAX_PHOTO_BYTES:,} "
                       f"({MAX_PHOTO_BYTES >> 20} MiB) an order may carry")


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
    # A clip's frames drawn so far, of how many: from workers of the release before claim checks; this
    # release's push them as Celery's PROGRESS state (bot/drawing/celery/task.py) and leave it None.
    progress: tuple[int, int] | None = None


CANCEL_PREFIX = "animebot:cancel:"  # a key per task the bot wants stopped (a clip whose Cancel was pressed)


def cancel_key(task_id: str) -> str:
    return f"{CANCEL_PREFIX}{task_id}"


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
    kind = "clip" if order.clip is not None else "photo" if order.operation == "draw" else f"{order.operation} of a drawing"
    return f"(job {order.job_id}, {order.style}, {kind} of {len(order.data):,} bytes)"


def result_summary(reply: Converted | WorkFailed) -> str:
    """What Celery's tools show of a result in place of the drawing: its size and faces, or why it
    failed, never the drawing's bytes."""
    if isinstance(reply, WorkFailed):
        return f"(failed: {reply.code})"
    kind = "clip" if reply.clip is not None else "picture"
    w, h = reply.output_size
    return f"({reply.style} {kind} {w}x{h}, {reply.face_passes} face(s) redrawn, {len(reply.data):,} bytes)"


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


class Heard(NamedTuple):
    """One worker process's heartbeat, and the newest order format it reads."""

    info: WorkerInfo
    reads: int


# The newest order format a process reads is in its heartbeat's key, not its value: a bot of the release
# before reads the value field by field and would skip a heartbeat with a field it does not know.
_READS = re.compile(r":reads(\d+)$")


def heartbeat_key(info: WorkerInfo) -> str:
    return f"{HEARTBEAT_PREFIX}{info.name}:{info.pid}:reads{WIRE_VERSION}"


def write_heartbeat(client: redis.Redis, info: WorkerInfo, ttl_s: float) -> None:
    """Say that ``info``'s process is alive; Redis forgets it ``ttl_s`` after the last heartbeat."""
    client.set(heartbeat_key(info), json.dumps(encode(info)), px=int(ttl_s * 1000))


def read_workers(client: redis.Redis) -> list[WorkerInfo]:
    """Every worker process whose heartbeat is fresh, sorted by name and pid; unreadable entries are skipped."""
    return [heard.info for heard in read_heartbeats(client)]


def read_heartbeats(client: redis.Redis) -> list[Heard]:
    """Every fresh heartbeat, as :func:`read_workers` reads them, with what its process reads. A heartbeat
    whose key says no format is of a release before claim checks (it reads up to 5)."""
    keys = list(client.scan_iter(match=f"{HEARTBEAT_PREFIX}*", count=100))
    heard = []
    for key, raw in zip(keys, client.mget(keys) if keys else []):
        if raw is None:  # expired since the SCAN
            continue
        try:
            info = decode(json.loads(raw), WorkerInfo, "heartbeat", BadMessage)
        except (ValueError, BadMessage):  # not JSON, or not a heartbeat of this release
            continue
        reads = _READS.search(key.decode() if isinstance(key, bytes) else str(key))
        heard.append(Heard(info, int(reads.group(1)) if reads else CLAIMED_SINCE - 1))
    return sorted(heard, key=lambda h: (h.info.name, h.info.pid))


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
