"""The one Celery task, ``animebot.draw``: one photo order in, one result out.

It is a module-level shared task, so every app made by bot/drawing/celery/app.py knows it, and
what it needs in a pool process (the models, the heartbeat) is set up once by
:func:`serve`, from Celery's ``worker_process_init`` (bot/drawing/celery/worker.py). The bot does
not import it: it sends orders by the task's name.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from celery import shared_task
from celery.exceptions import Ignore, Reject
from celery.worker.request import Request

from bot.drawing.celery.heartbeat import Heartbeat
from bot.drawing.celery.wire import (OLDEST_READ, READS_HEADER, TASK_NAME, BadOrder, Summarized, answered_key,
                                     order_from_message, result_summary, result_to_message)
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

    def info(self, safe: bool = False) -> dict[str, Any]:
        return dict(super().info(safe=True))


@shared_task(bind=True, name=TASK_NAME, Request=SummaryRequest)
def draw(task: Any, *args: object, **kwargs: object) -> Summarized:
    """Anything but exactly one order is refused unread: rejected, not requeued, never drawn. An order
    the bot is already done with (a copy Redis handed out again) is acknowledged and skipped."""
    task_id: str = task.request.id
    try:
        if len(args) != 1 or kwargs:
            raise BadOrder(f"a task carries one order, not {len(args)} argument(s) and {len(kwargs)} keyword(s)")
        order = order_from_message(args[0])
    except BadOrder as exc:
        log.warning("task %s refused: %s", task_id, exc.message)
        raise Reject(exc.message, requeue=False) from None
    if _drawing is None:  # the models did not load, and the worker is stopping: back to the queue
        raise Reject("this worker is stopping", requeue=True)
    beat = _drawing.heartbeat
    if beat.answered(task_id):
        log.info("task %s (job %s): already answered; not drawn again", task_id, order.job_id)
        raise Ignore()  # acknowledged, and no result stored for it
    started = time.perf_counter()
    beat.drawing(task_id)
    try:
        reply = _drawing.drawer.draw(order, beat.progress, lambda: beat.cancel_asked == task_id)
    finally:
        beat.drawing(None)
    if beat.answered(task_id):  # the bot stopped waiting meanwhile (a /forget, a stop): keep nothing of it
        log.info("task %s (job %s): no longer wanted; its result is not stored", task_id, order.job_id)
        raise Ignore()
    if isinstance(reply, WorkFailed):
        log.info("task %s (job %s) failed: %s: %s", task_id, order.job_id, reply.code, reply.message)
    else:
        log.info("task %s (job %s): %s in %.2f s", task_id, order.job_id,
                 "HD made" if order.hd else f"{order.style} drawn", time.perf_counter() - started)
    reads = task.request.get(READS_HEADER)  # what its bot reads: none said, a bot before the header
    return Summarized(result_to_message(reply, reads if type(reads) is int else OLDEST_READ), result_summary(reply))


def drop_unwanted(task_id: str, task: Any, **_: Any) -> None:
    """Connected to Celery's ``task_postrun``, which comes after the result is stored: a result the bot
    stopped waiting for in between the look in :func:`draw` and the store is deleted here. The bot marks
    a task answered before it deletes its result (bot/drawing/celery/pool.py), so either it deletes this
    result or this sees its mark: none waits in Redis for ``result_expires``."""
    if _drawing is not None and task.name == TASK_NAME and _drawing.heartbeat.answered(task_id):
        task.backend.forget(task_id)


def drop_revoked(sender: Any, request: Any, **_: Any) -> None:
    """Connected to Celery's ``task_revoked``, which comes after Celery stored the task's REVOKED state:
    for an order the bot had already given up (its user said /forget), that state is deleted too, so
    Redis keeps nothing of it. An operator's revoke of a photo the bot still waits for stays, for the bot
    to read and answer."""
    if sender.name == TASK_NAME and sender.backend.client.exists(answered_key(request.id)):
        sender.backend.forget(request.id)
