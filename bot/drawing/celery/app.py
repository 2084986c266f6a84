"""The Celery app of the bot and of ``animebot worker``: all of Celery's configuration, in one place.

Both sides build it with :func:`make_celery`; :func:`for_bot` and :func:`for_worker` add the few
settings only one side needs. Celery's own tools (``celery --broker URL inspect``, Flower) work
against the workers as they come: task events and worker heartbeats are on, and control messages
are JSON, the tools' default, which carries no code. Orders and results are msgpack, and a result
is shown by the tools as a summary, not the drawing's bytes. Pickle is
refused everywhere, and every order is checked field by field before it is used
(bot/drawing/celery/wire.py), so whoever can write to the broker can neither run code on a worker
nor make it draw anything but a photo order.
"""
from __future__ import annotations

import msgpack
from celery import Celery
from kombu.serialization import register

from bot.drawing.celery.results import PushedRedisBackend
from bot.drawing.celery.wire import Summarized
from bot.drawing.pool import LONGEST_ALLOWANCE

QUEUE = "animebot"
# Short enough that a dead Redis fails a call within seconds instead of hanging it.
REDIS_TIMEOUT_S = 5.0
# How long Redis keeps a result nobody read, and the marker of a task the bot is done with.
RESULT_EXPIRES_S = 3600
# Results are msgpack, as kombu's own serializer writes it, plus one thing: a task's Summarized result
# is stored as its message, so that Celery's events (Flower) carry its summary and Redis its drawing.
RESULT_SERIALIZER = "animebot-msgpack"


def _plain(value: object) -> object:
    if isinstance(value, Summarized):
        return value.message
    raise TypeError(f"{type(value).__name__} is not something a result carries")


def _pack(value: object) -> bytes:
    return bytes(msgpack.packb(value, use_bin_type=True, default=_plain))


def _unpack(data: bytes) -> object:
    return msgpack.unpackb(data, raw=False)


# kombu takes bytes from a binary encoder (its own msgpack's does so); celery-types says str.
register(RESULT_SERIALIZER, _pack, _unpack,  # type: ignore[arg-type]
         content_type="application/x-animebot-msgpack", content_encoding="binary")


def visibility_timeout(job_timeout_s: float) -> float:
    """Past the longest time limit of any order (bot/drawing/pool.py, ``time_limit``), with a minute to spare."""
    return job_timeout_s * LONGEST_ALLOWANCE + 60


def make_celery(broker_url: str, job_timeout_s: float) -> Celery:
    """What the bot and its workers agree on, with Redis (``broker_url``) as broker and result store.

    This app sends orders as the bot does; the tests and benches use it as it is."""
    app = Celery("animebot", broker=broker_url, backend=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="msgpack",
        result_serializer=RESULT_SERIALIZER,
        # JSON for the control messages of Celery's tools. An order in JSON is still checked field by
        # field, and refused, since JSON cannot carry a photo's bytes.
        accept_content=["msgpack", "json"],
        result_accept_content=[RESULT_SERIALIZER],
        # A photo is acknowledged once drawn. If its pool process dies, the worker acknowledges it and
        # stores WorkerLostError, rather than queue it again itself: the bot sends it again, in one place
        # that counts the crashes of a photo and logs each resend with its job (bot/drawing/celery/resend.py),
        # and no copy is left in Redis. If the whole worker dies, its copy stays in Redis's unacknowledged
        # orders until the bot, having sent it again and answered, deletes it (bot/drawing/celery/copies.py).
        task_acks_late=True,
        task_reject_on_worker_lost=False,
        worker_prefetch_multiplier=1,
        task_default_queue=QUEUE,
        # Redis gives an unacknowledged order to another worker after this long (a fallback: the bot sends
        # again what a dead worker held): above the longest any order may take (a clip's), so a slow clip is
        # not drawn twice. It was the job timeout plus a minute, 180 s against a clip's 1200.
        broker_transport_options={"visibility_timeout": visibility_timeout(job_timeout_s),
                                  "socket_timeout": REDIS_TIMEOUT_S, "socket_connect_timeout": REDIS_TIMEOUT_S},
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
        # Task events, for Flower and ``celery events``: each photo's state and runtime.
        worker_send_task_events=True,
        task_send_sent_event=True,
    )
    # Control replies go out in the mailbox's serializer, which Celery takes from the tasks'
    # (msgpack); the tools read JSON only.
    app.control.mailbox.serializer = "json"  # type: ignore[attr-defined]  # Control.mailbox: not in celery-types
    return app


def for_bot(broker_url: str, job_timeout_s: float) -> Celery:
    """The bot's app: results pushed to it by Redis, through Celery's result consumer
    (bot/drawing/celery/results.py)."""
    app = make_celery(broker_url, job_timeout_s)
    app.conf.update(result_backend=f"{PushedRedisBackend.__module__}.{PushedRedisBackend.__name__}+{broker_url}")
    # A lost subscription is not tried again 20 times over 20 s with an ERROR line each: a send must fail
    # fast while Redis is away (the pool says so once), and the results' thread tries again every second.
    app.conf.result_backend_transport_options = {"retry_policy": {"max_retries": 0}}
    # One backend for every thread, not one each: the thread that sends a task subscribes to its result
    # on the consumer that the results' thread drains (redis-py's client is thread-safe, and Celery's
    # consumer locks its pub/sub connection).
    app.conf.result_backend_thread_safe = True
    return app


def for_worker(broker_url: str, job_timeout_s: float, concurrency: int) -> Celery:
    """A worker's app: ``concurrency`` prefork processes on the animebot queue, waiting Redis out."""
    app = make_celery(broker_url, job_timeout_s)
    app.conf.update(
        worker_pool="prefork",
        worker_concurrency=concurrency,
        # However long Redis is away, rather than exit after 100 tries.
        broker_connection_max_retries=None,
    )
    return app
