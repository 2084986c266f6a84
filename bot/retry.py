"""Retrying Bot API calls through network trouble, with backoff.

Flood control (``RetryAfter``) is python-telegram-bot's AIORateLimiter's job;
this covers the network: a timeout or a dropped connection while fetching a
photo or uploading a result. Telegram's refusals (``BadRequest``,
``Forbidden``) are answers, not trouble, and are never retried. A retried
upload whose first try timed out after Telegram got it can, rarely, arrive
twice; we accept that over losing the photo.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from telegram.error import BadRequest, NetworkError

log = logging.getLogger("animebot.retry")

T = TypeVar("T")

ATTEMPTS = 4
FIRST_DELAY_S = 1.0


async def retrying(what: str, call: Callable[[], Awaitable[T]], attempts: int = ATTEMPTS,
                   first_delay_s: float = FIRST_DELAY_S) -> T:
    """``await call()``, again after 1, 2, 4... s while it fails with a network error."""
    delay = first_delay_s
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except BadRequest:  # a subclass of NetworkError in python-telegram-bot, but a refusal
            raise
        except NetworkError as exc:
            if attempt == attempts:
                raise
            log.warning("%s: %s: %s; try %d of %d in %.0f s", what, exc.__class__.__name__, exc.message,
                        attempt + 1, attempts, delay)
            await asyncio.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")
