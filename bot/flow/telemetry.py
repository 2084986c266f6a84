"""What the results tell the operator: the metrics (bot/service/metrics.py), and a log line for each drawing.

The flow's results and orders (bot/flow/results.py, bot/flow/orders.py) say what happened, and this
observer alone knows the metrics' names and the log lines' words, so that their logic reads without
them. bench/load.py and the tests read these lines ("waited", "drawn in", a clip's frames): their words
stay as they are.
"""
from __future__ import annotations

import logging
import time

from bot.drawing.fairqueue import Ticket
from bot.service import metrics
from inference.drawer import WorkOrder
from inference.pipeline import Converted

log = logging.getLogger("animebot.jobs")


class Telemetry:
    """Hears of every cache lookup and every order's end, and counts and logs it; it changes nothing."""

    def cache_hit(self) -> None:
        """A result found: in the cache, or being drawn for another request."""
        metrics.CACHE_LOOKUPS.labels("hit").inc()

    def cache_miss(self) -> None:
        """A result not found at the last look (the first may not know the photo's hash): it is drawn now."""
        metrics.CACHE_LOOKUPS.labels("miss").inc()

    def failed(self, order: WorkOrder, code: str) -> None:
        """The worker gave up the order, for the reason ``code`` ("cancelled": Cancel pressed while it was drawn)."""
        if order.clip is not None:
            metrics.CLIPS.labels("cancelled" if code == "cancelled" else "failed").inc()

    def stopped(self, order: WorkOrder) -> None:
        """The order was stopped on its worker, its user's /forget stopping their jobs."""
        if order.clip is not None:
            metrics.CLIPS.labels("cancelled").inc()

    def drawn(self, ticket: Ticket, converted: Converted) -> None:
        """The worker finished the ticket's order: how long it waited and took, and what it made."""
        drawing_s = time.monotonic() - ticket.queued_at - ticket.waited_s
        metrics.WAITING_S.observe(ticket.waited_s)
        metrics.DRAWING_S.observe(drawing_s)
        order, (w, h), clip, timings = ticket.order, converted.output_size, converted.clip, converted.timings
        if clip is not None:
            metrics.CLIPS.labels("drawn").inc()
            metrics.CLIP_FRAMES.inc(clip.drawn)
            log.info("job %s: %s clip %dx%d -> %dx%d, %d frames (%d drawn) at %g fps, %.1f s%s, sound %s, waited "
                     "%.2f s, drawn in %.2f s (model %.2f s)", order.job_id, order.style, *converted.input_size, w, h,
                     converted.frames, clip.drawn, clip.fps, clip.seconds, " (cut)" if clip.trimmed else "",
                     clip.sound or "none", ticket.waited_s, drawing_s, timings["model_s"])
        elif order.operation != "draw":  # work on a drawing (a doubling): no model, no faces
            log.info("job %s: %s of %s %dx%d -> %dx%d, waited %.2f s, made in %.2f s (worker %.2f s: %s)", order.job_id,
                     order.operation, order.style, *converted.input_size, w, h, ticket.waited_s, drawing_s,
                     sum(timings.values()), ", ".join(f"{k} {v:.2f} s" for k, v in timings.items()))
        else:
            # "drawn in" is the round trip from leaving the queue to the result; "worker" is the part the worker
            # measured itself, so the difference is what the pool's transport costs (bench/scale_out.py).
            log.info("job %s: %s %dx%d -> %dx%d, waited %.2f s, drawn in %.2f s (worker %.2f s: model %.2f s, "
                     "%d face pass(es) %.2f s)", order.job_id, order.style, *converted.input_size, w, h,
                     ticket.waited_s, drawing_s, sum(timings.values()), timings.get("model_s", 0.0), converted.face_passes,
                     timings.get("faces_s", 0.0))
