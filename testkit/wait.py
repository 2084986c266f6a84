"""The one way tests and benches wait: for something they can observe, never for a while.

A wait polls a condition the test can see (a recorded call, a log line, a heartbeat in Redis,
a job's state in the journal) and returns its first truthy value. The timeout is a safety net
against a hang, not a measurement: a slow machine makes the wait longer, never the test red,
until it is so long that something is surely wrong.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """What was waited for did not happen in the time given."""


def _failure(what: str, timeout: float, context: Callable[[], str] | None) -> WaitTimeout:
    return WaitTimeout(f"no {what} after {timeout:g} s" + (f"; {context()}" if context is not None else ""))


def wait_for(condition: Callable[[], T], timeout: float = 120, what: str = "sign of the condition",
             context: Callable[[], str] | None = None, interval: float = 0.05,
             pause: Callable[[float], object] = time.sleep) -> T:
    """Call ``condition()`` until it returns something truthy, and return that.

    ``what`` names it in the failure ("no {what} after {timeout} s"), followed by ``context()``
    when given (a log, the calls so far). ``pause`` waits between looks: a caller with something
    to be woken by (a condition variable) can wait on that instead of sleeping.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise _failure(what, timeout, context)
        pause(min(interval, left))


async def until(condition: Callable[[], T], timeout: float = 120, what: str = "sign of the condition",
                context: Callable[[], str] | None = None, interval: float = 0.02) -> T:
    """:func:`wait_for` on an event loop: the loop runs on between looks."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise _failure(what, timeout, context)
        await asyncio.sleep(min(interval, left))


async def within(step: Awaitable[T], timeout: float = 120) -> T:
    """``step``, or a clear failure instead of a test that hangs (a safety net, not a measurement)."""
    return await asyncio.wait_for(step, timeout)
