"""Retrying Bot API calls through network trouble and flood control.

Short bursts of flood control (``RetryAfter``) are waited out by
python-telegram-bot's AIORateLimiter, which holds every request meanwhile.
When it gives up, the call lands here and is tried again after Telegram's
``retry_after``, however many times Telegram asks: a photo is never lost
to flood control. A stop while waiting leaves its job open for the next
start. Network trouble (a timeout, a dropped connection) is retried with
backoff a few times. Telegram's refusals (``BadRequest``, ``Forbidden``) are
answers, not trouble, and are never retried. A retried upload whose first
try timed out after Telegram got it can, rarely, arrive twice; we accept
that over losing the photo.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from telegram.error import BadRequest, NetworkError, RetryAfter

log = logging.getLogger("animebot.retry")

T = TypeVar("T")

ATTEMPTS = 4
FIRST_DELAY_S = 1.0


async def retrying(what: str, call: Callable[[], Awaitable[T]], attempts: int = ATTEMPTS,
                   first_delay_s: float = FIRST_DELAY_S) -> T:
    """``await call()``: again after Telegram's wait under flood control, as often as it asks,
    and again after 1, 2, 4... s while it fails with a network error, ``attempts`` times."""
    delay = first_delay_s
    attempt = 1
    while True:
        try:
            return await call()
        except RetryAfter as exc:
            wait = seconds(exc.retry_after)
            log.warning("%s: flood control; waiting %.0f s as Telegram asks", what, wait)
            await asyncio.sleep(wait)
            continue
        except BadRequest:  # a subclass of NetworkError in python-telegram-bot, but a refusal
            raise
        except NetworkError as exc:
            if attempt == attempts:
                raise
            log.warning("%s: %s: %s; try %d of %d in %.0f s", what, exc.__class__.__name__, exc.message,
                        attempt + 1, attempts, delay)
            await asyncio.sleep(delay)
            delay *= 2
            attempt += 1


def seconds(value: int | timedelta) -> float:
    """A Bot API time period in seconds (python-telegram-bot gives an int or a timedelta)."""
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
