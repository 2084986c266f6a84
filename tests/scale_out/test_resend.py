"""What the bot does with a photo on a Celery worker at each look (bot/drawing/celery/resend.py), case
by case, without Redis: the cases the scale-out tests reach only by killing workers and Redis
(tests/scale_out/test_scale_out.py), each decided here the same way every time."""
from __future__ import annotations

from dataclasses import replace

import pytest

from bot.drawing.celery.resend import (LOST_AFTER_S, MAX_CRASHES, MAX_SENDS, REFUSED, RESEND_PAUSE_S, SENT_GRACE_S,
                                       UNREADABLE, Seen, Step, decide)

LIMIT_S = 120.0
# A photo sent a second ago, on a live worker's heartbeat: nothing to do but wait.
DRAWING = Seen(state="PENDING", failure="", stopped=False, claimed=True, since_sent=1.0, since_seen=1.0,
               limit_s=LIMIT_S, crashes=0, a_worker_idle=False)


def test_a_photo_being_drawn_is_waited_for_and_a_drawn_one_taken() -> None:
    assert decide(DRAWING) == Step("wait")
    assert decide(replace(DRAWING, state="STARTED")) == Step("wait")
    assert decide(replace(DRAWING, state="SUCCESS")) == Step("take")
    # Drawn after its user stopped waiting: still taken, so that the cache keeps it.
    assert decide(replace(DRAWING, state="SUCCESS", stopped=True)) == Step("take")


def test_a_photo_its_user_no_longer_waits_for_is_dropped_not_sent_again() -> None:
    assert decide(replace(DRAWING, stopped=True)) == Step("drop")
    assert decide(replace(DRAWING, stopped=True, claimed=True, since_seen=LOST_AFTER_S * 3)) == Step("drop")


def test_a_photo_whose_worker_died_is_sent_again_and_given_up_after_it_killed_three() -> None:
    silent = replace(DRAWING, since_sent=30.0, since_seen=LOST_AFTER_S + 0.5)
    assert decide(replace(silent, since_seen=LOST_AFTER_S - 0.5)) == Step("wait")  # a beat late is not death
    for crashes in range(MAX_CRASHES - 1):
        assert decide(replace(silent, crashes=crashes)) == Step("resend", "its worker stopped answering", crash=True)
    # The photo may be what kills them: the user gets an apology instead of a fourth worker dying.
    assert decide(replace(silent, crashes=MAX_CRASHES - 1)) == Step("give_up", "the worker crashed", crash=True)


def test_an_order_lost_on_the_way_is_sent_again_once_a_worker_is_free_without_counting_a_crash() -> None:
    unclaimed = replace(DRAWING, claimed=False, since_sent=SENT_GRACE_S + 1, since_seen=SENT_GRACE_S + 1)
    assert decide(unclaimed) == Step("wait")  # every worker busy: it may simply wait in Redis's queue
    lost = decide(replace(unclaimed, a_worker_idle=True))
    assert lost == Step("resend", "no worker took it") and not lost.crash
    # Within the grace a free worker may just not have taken it yet.
    assert decide(replace(unclaimed, a_worker_idle=True, since_sent=5.0, since_seen=5.0)) == Step("wait")
    # Lost many times over (Redis restarted empty again and again) is never a crash of the photo's.
    assert decide(replace(unclaimed, a_worker_idle=True, crashes=MAX_CRASHES - 1)) == Step("resend", "no worker took it")


@pytest.mark.parametrize("failure", ["TimeLimitExceeded", "SoftTimeLimitExceeded"])
def test_a_photo_over_its_time_limit_is_given_up_not_drawn_again(failure: str) -> None:
    assert decide(replace(DRAWING, state="FAILURE", failure=failure)) == Step("give_up", "the worker timed out")


def test_a_photo_nobody_answers_for_past_its_limit_is_given_up() -> None:
    assert decide(replace(DRAWING, since_sent=LIMIT_S + LOST_AFTER_S - 1)) == Step("wait")
    assert decide(replace(DRAWING, since_sent=LIMIT_S + LOST_AFTER_S + 1)) == Step("give_up", "the worker timed out")


def test_a_worker_s_failure_or_an_unreadable_result_is_sent_again_after_a_pause() -> None:
    paused = replace(DRAWING, since_sent=RESEND_PAUSE_S + 0.1)
    failed = decide(replace(paused, state="FAILURE", failure="OSError"))
    assert failed == Step("resend", "the worker failed it: OSError") and not failed.crash
    assert decide(replace(paused, state=UNREADABLE)) == Step("resend", "its result was unreadable")
    # A failure that comes back at once is not sent again at once: it would meet the same worker again.
    assert decide(replace(DRAWING, state="FAILURE", failure="OSError", since_sent=0.05)) == Step("wait")


def test_an_order_a_worker_refused_unread_is_sent_again_a_few_times_then_its_user_is_told() -> None:
    """A worker of another release, in a rolling upgrade: each refusal once restarted the clock and was
    sent again at once, 100 times a second, forever. Now every send again counts from the first."""
    refused = replace(DRAWING, state="FAILURE", failure=REFUSED, since_sent=RESEND_PAUSE_S + 0.1)
    assert decide(replace(refused, since_sent=0.01)) == Step("wait")
    for sends in range(1, MAX_SENDS):
        assert decide(replace(refused, sends=sends)) == Step("resend", "a worker refused to read it", refused=True)
    assert decide(replace(refused, sends=MAX_SENDS)) == Step("give_up", f"a worker refused to read it, {MAX_SENDS} times",
                                                             refused=True)


@pytest.mark.parametrize("seen", [
    replace(DRAWING, state="FAILURE", failure="OSError", since_sent=RESEND_PAUSE_S + 1),
    replace(DRAWING, state=UNREADABLE, since_sent=RESEND_PAUSE_S + 1),
    replace(DRAWING, claimed=False, a_worker_idle=True, since_sent=SENT_GRACE_S + 1, since_seen=SENT_GRACE_S + 1),
    replace(DRAWING, since_sent=30.0, since_seen=LOST_AFTER_S + 0.5),  # its worker died
])
def test_no_reason_sends_a_photo_more_than_the_bound(seen: Seen) -> None:
    assert decide(replace(seen, sends=MAX_SENDS - 1)).action == "resend"
    assert decide(replace(seen, sends=MAX_SENDS)).action == "give_up"


def test_a_photo_whose_drawing_process_died_is_sent_again_as_a_crash_and_given_up_after_three() -> None:
    """A pool process killed while its worker lives on: Celery stores WorkerLostError and acknowledges the
    order, and the bot sends it again, counted as its worker dying, as for a worker gone altogether."""
    died = replace(DRAWING, state="FAILURE", failure="WorkerLostError")
    for crashes in range(MAX_CRASHES - 1):
        assert decide(replace(died, crashes=crashes)) == Step("resend", "its drawing process died", crash=True)
    assert decide(replace(died, crashes=MAX_CRASHES - 1)) == Step("give_up", "the worker crashed", crash=True)


def test_a_photo_an_operator_revoked_is_given_up_with_an_apology() -> None:
    assert decide(replace(DRAWING, state="REVOKED", claimed=False)) == Step("give_up", "an operator revoked it")
