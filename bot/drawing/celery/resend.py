"""What the bot does with a photo on a Celery worker at each look: wait, take its result, send it
again, or give it up with an apology.

A pure function of what the bot saw, so that every case (a killed worker, an order lost on the way,
a result nobody can read, a photo that kills its workers) is decided the same way and can be
tested without Redis. bot/drawing/celery/pool.py gathers what it sees and carries the step out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LOST_AFTER_S = 6.0  # a task no live worker has claimed for this long is sent again
SENT_GRACE_S = 20.0  # a task sent to a free worker starts within this, or it was lost on the way
# A photo whose worker died while drawing it this many times is given up, with an apology (it may be what
# kills them). Sends again for any other reason (Redis lost it, a worker failed it while Redis was away)
# are not crashes: the broker's trouble alone does not cost a photo at the third.
MAX_CRASHES = 3
# Every loop has a bound: a photo is sent at most this many times in all, whatever the reasons, and a send
# again waits this long after the last (a refusal comes back at once, and so would the next: two releases
# side by side once spun at 100 resends a second, each resend restarting the clock that gives up). While
# Redis is unreachable nothing is sent, so an outage spends none of them.
MAX_SENDS = 6
RESEND_PAUSE_S = 2.0
# What Celery stores for an order a worker would not read (bot/drawing/celery/task.py rejects it): a
# worker of another release, during a rolling upgrade (bot/drawing/celery/wire.py).
REFUSED = "Reject"
TIME_LIMITS = ("TimeLimitExceeded", "SoftTimeLimitExceeded")
# What Celery stores when the pool process drawing a task dies (killed, out of memory) and its worker
# lives on: the worker acknowledges the order, so the bot is the one that sends it again
# (bot/drawing/celery/app.py).
PROCESS_DIED = "WorkerLostError"
UNREADABLE = "UNREADABLE"  # not a Celery state: the stored result could not be decoded (a pickle, say)


@dataclass(frozen=True)
class Seen:
    """One task in flight, as the bot saw it at one look."""

    state: str  # Celery's, from AsyncResult (PENDING: nothing stored yet), or UNREADABLE
    failure: str  # a FAILURE's exception class, "" otherwise
    stopped: bool  # its job no longer waits for it
    claimed: bool  # a live worker process's heartbeat has named it since it was (last) sent
    since_sent: float  # seconds
    since_seen: float  # seconds since a heartbeat last named it (or since it was sent)
    limit_s: float  # how long its worker may draw it
    crashes: int  # times its worker died while drawing it, so far
    a_worker_idle: bool  # some live worker process is drawing nothing
    sends: int = 1  # times its order was sent, the first included


Action = Literal["wait", "take", "drop", "give_up", "resend"]


@dataclass(frozen=True)
class Step:
    action: Action
    why: str = ""  # for the log, and for a give-up, the user's apology's cause
    crash: bool = False  # a resend because its worker died while drawing it
    refused: bool = False  # a worker would not read the order (of another release, during an upgrade)


def decide(seen: Seen) -> Step:
    """The next step for one task in flight."""
    if seen.state == UNREADABLE:
        return _again(seen, "its result was unreadable")
    if seen.state == "SUCCESS":
        return Step("take")
    if seen.state == "FAILURE":
        if seen.failure in TIME_LIMITS:
            return Step("give_up", "the worker timed out")
        if seen.failure == PROCESS_DIED:
            return _crashed(seen, "its drawing process died")
        if seen.failure == REFUSED:
            return _again(seen, "a worker refused to read it", refused=True)
        return _again(seen, f"the worker failed it: {seen.failure}")
    if seen.state == "REVOKED":  # an operator revoked it (Flower, ``celery control revoke``): not drawn
        return Step("give_up", "an operator revoked it")
    if seen.stopped:
        return Step("drop")
    if seen.since_sent > seen.limit_s + LOST_AFTER_S:
        return Step("give_up", "the worker timed out")
    if seen.claimed and seen.since_seen > LOST_AFTER_S:
        return _crashed(seen, "its worker stopped answering")
    if not seen.claimed and seen.since_seen > SENT_GRACE_S and seen.a_worker_idle:
        return _again(seen, "no worker took it")  # a worker is free, yet none took it: lost on the way
    return Step("wait")


def _again(seen: Seen, why: str, refused: bool = False) -> Step:
    """Sent again once the pause since the last send is over, unless it was sent too often already."""
    if seen.sends >= MAX_SENDS:
        return Step("give_up", f"{why}, {seen.sends} times", refused=refused)
    if seen.since_sent < RESEND_PAUSE_S:
        return Step("wait")
    return Step("resend", why, refused=refused)


def _crashed(seen: Seen, why: str) -> Step:
    """Its drawing process died with it: sent again, unless this is the crash too many (or the send)."""
    if seen.crashes + 1 >= MAX_CRASHES or seen.sends >= MAX_SENDS:
        return Step("give_up", "the worker crashed", crash=True)
    return Step("resend", why, crash=True)
