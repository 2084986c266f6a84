"""Operator logging: one line per event, and the bot token never printed.

The token is part of every Bot API URL, and httpx, python-telegram-bot and
tracebacks can all mention URLs, so redaction happens on the finished line in
the formatter rather than at each call site.
"""
from __future__ import annotations

import logging
import sys

from aiohttp.http_exceptions import HttpProcessingError

LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    """Formats as usual, then replaces every occurrence of the secrets."""

    def __init__(self, fmt: str, secrets: list[str]) -> None:
        super().__init__(fmt)
        self._secrets = [s for s in secrets if s]

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        for secret in self._secrets:
            text = text.replace(secret, "<token>")
        return text


def setup_logging(*secrets: str | None, level: int = logging.INFO) -> None:
    """Log to stderr, one line an event, with ``secrets`` (the token, a webhook secret) redacted;
    quiet the per-request chatter of httpx and aiohttp."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(LINE_FORMAT, [s for s in secrets if s]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    quiet_libraries()


def quiet_libraries() -> None:
    """What the libraries under the bot log that an operator should not have to read."""
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # When the rate limiter stops waiting out flood control it logs a traceback
    # at ERROR and re-raises; bot/flow/retry.py then waits on, with one line naming
    # the job, so the limiter's own give-up is noise.
    logging.getLogger("telegram.ext.AIORateLimiter").addFilter(_below_error)  # once, however often called
    logging.getLogger("aiohttp.server").addFilter(_malformed_request)
    # An answer that is not JSON (a wrong TELEGRAM_API_BASE_URL) is logged with a traceback before it is
    # raised; the bot says what it means in one line (bot/root/app.py).
    logging.getLogger("telegram.request.BaseRequest").addFilter(_without_traceback)


def _malformed_request(record: logging.LogRecord) -> bool:
    """aiohttp logs a client's malformed request (a header over 8 KB, say) as an ERROR with a traceback
    and the bytes it got, which can hold a Mini App user's name: it is the client's fault, so one line,
    without them."""
    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, HttpProcessingError):
        record.msg, record.args = "refused a malformed HTTP request (%s)", (type(error).__name__,)
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
    return True


def _without_traceback(record: logging.LogRecord) -> bool:
    record.exc_info, record.exc_text = None, None
    return True


def _below_error(record: logging.LogRecord) -> bool:
    return record.levelno < logging.ERROR
