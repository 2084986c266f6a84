"""Errors a caller can show to a person as they are.

Each carries a short, plain message and a stable ``code`` so that the CLI,
the bot and the logs can all react to the kind of failure without parsing
text or printing a traceback. The base class is on the ground floor,
storage/ (docs/architecture.md, "Floors"), with the atomic file writes:
weights/, inference/ and bot/ each raise their own kinds of it, and the bot
catches them all as one.
"""
from __future__ import annotations


class AnimebotError(Exception):
    """Base of every error this project reports to a user."""

    code = "error"

    def __init__(self, message: str, code: str | None = None, values: dict[str, int | float] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        # The numbers in the message (an image's size, a limit), so that every language can say them too.
        self.values = values or {}
