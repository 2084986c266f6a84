"""The one Celery task, ``animebot.draw``: one photo order in, one result out.

It is a module-level shared task, so every app made by bot/drawing/celery/app.py knows it, and
what it needs in a pool process (the models, the heartbeat) is set up once by
:func:`serve`, from Celery's ``worker_process_init`` (bot/drawing/celery/worker.py). The bot does
not import it: it sends orders by the task's name.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import redis

from celery import Task, shared_task
from celery.exceptions import Ignore, Reject
from celery.worker.request import Request

if TYPE_CHECKING:  # the stubs' (celery-types) shape of Request.info's answer
    from celery.worker.request import _InfoDict

from bot.drawing.celery.heartbeat import Heartbeat
from bot.drawing.celery.wire import (OLDEST_READ, PROGRESS, READS_HEADER, TASK_NAME, BadOrder, Summarized, fetch_photo,
                                     order_from_message, photo_key_of, result_summary, result_to_message)
from inference.drawer import Drawer, WorkFailed

log = logging.getLogger("animebot.worker")


@dataclass(frozen=True)
class Drawing:
    """What a pool process draws with, once its models are loaded."""

    drawer: Drawer
    heartbeat: Heartbeat


_drawing: Drawing | None = None  # this pool process's, once serve() ran


def serve(drawing: Drawing) -> None:
    """Draw with ``drawing`` in this process from now on."""
    global _drawing
    _drawing = drawing


class SummaryRequest(Request):
    """A photo's task as ``celery inspect active`` and ``reserved`` (and Flower's worker pages) list it:
    with the summary the bot sent as its arguments (bot/drawing/celery/wire.py, ``order_summary``),
    never the photo. Celery lists the real arguments unless asked for ``safe=True``; an operator's
    terminal is no place for a user's photo as base64."""

    def info(self, safe: bool = False) -> _InfoDict:
        return super().info(safe=True)


class DrawTask(Task):
    """The task's class: Celery's, with its requests listed as :class:`SummaryRequest` lists them."""

    Request = f"{__name__}:SummaryRequest"  # Celery takes the class by name, as its own default


@shared_task(bind=True, name=TASK_NAME, base=DrawTask)
def draw(task: DrawTask, *args: object, **kwargs: object) -> Summarized:
    """Anything but exactly one order is refused unread: rejected, not requeued, never drawn. A claim
    check whose photo is gone is one the bot is done with (a copy Redis handed out again, a photo given
    up): acknowledged and skipped."""
    task_id = str(task.request.id)  # always set for a task a worker runs
    try:
        if len(args) != 1 or kwargs:
            raise BadOrder(f"a task carries one order, not {len(args)} argument(s) and {len(kwargs)} keyword(s)")
        order, key = order_from_message(args[0])
        if _drawing is None:  # the models did not load, and the worker is stopping: back to the queue
            raise Reject("this worker is stopping", requeue=True)
        if key is not None:
            data = fetch_photo(_drawing.heartbeat.client, key)
            if data is None:
                log.info("task %s (job %s): no longer wanted; not drawn", task_id, order.job_id)
                raise Ignore()  # acknowledged, and no result stored for it
            order = replace(order, data=data)
    except BadOrder as exc:
        log.warning("task %s refused: %s", task_id, exc.message)
        raise Reject(exc.message, requeue=False) from None
    started = time.perf_counter()
    beat = _drawing.heartbeat
    beat.drawing(task_id)
    try:
        reply = _drawing.drawer.draw(order, _Progress(task), lambda: beat.cancel_asked == task_id)
    finally:
        beat.drawing(None)
    if key is not None and not _wanted(key):  # the bot stopped waiting meanwhile (a /forget, a stop)
        log.info("task %s (job %s): no longer wanted; its result is not stored", task_id, order.job_id)
        raise Ignore()
    if isinstance(reply, WorkFailed):
        log.info("task %s (job %s) failed: %s: %s", task_id, order.job_id, reply.code, reply.message)
    else:
        log.info("task %s (job %s): %s in %.2f s", task_id, order.job_id,
                 f"{order.style} drawn" if order.operation == "draw" else f"{order.operation} made",
                 time.perf_counter() - started)
    reads = task.request.get(READS_HEADER)  # what its bot reads: none said, a bot before the header
    return Summarized(result_to_message(reply, reads if type(reads) is int else OLDEST_READ), result_summary(reply))


@dataclass(frozen=True)
class _Progress:
    """A clip's frames so far, pushed to the bot as Celery's PROGRESS state of the task (the bot's result
    consumer hears it at once, bot/drawing/celery/results.py). Redis away: the frame count is skipped,
    never the drawing."""

    task: Any

    def __call__(self, done: int, total: int) -> None:
        try:
            self.task.update_state(state=PROGRESS, meta={"done": done, "total": total})
        except Exception as exc:  # kombu and redis-py wrap a lost Redis in several types
            log.debug("a clip's progress was not sent (%s: %s)", exc.__class__.__name__, exc)


def _wanted(key: str) -> bool:
    """Whether the bot still waits for the claim check whose photo is ``key`` (it deletes the key once it is
    done). Redis away: not known, so the result is kept for the bot to read."""
    assert _drawing is not None
    try:
        return bool(_drawing.heartbeat.client.exists(key))
    except redis.RedisError:
        return True


def drop_unwanted(task_id: str, task: Any, args: tuple[object, ...], **_: Any) -> None:
    """Connected to Celery's ``task_postrun``, which comes after the result is stored: a result the bot
    stopped waiting for between the look in :func:`draw` and the store is deleted here. The bot deletes
    a claim check's photo before its result (bot/drawing/celery/pool.py), so either it deletes this
    result or this finds the photo gone: none waits in Redis for ``result_expires``."""
    key = photo_key_of(args[0]) if task.name == TASK_NAME and len(args) == 1 else None
    if _drawing is not None and key is not None and not _wanted(key):
        task.backend.forget(task_id)
