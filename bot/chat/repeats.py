"""A button pressed again: answered once, whether the first press is still being answered or was just now.

A double tap reaches the bot as two updates. While the first is answered, the second is told it is on its
way; once the first was answered (from the cache that takes milliseconds, quicker than a finger's second
tap), a press of the same button in the same chat within :data:`REPEAT_S` is told it was just sent, instead
of sending a second copy. Later presses are answered again: someone who wants the file twice can have it.
"""
from __future__ import annotations

import time

REPEAT_S = 5.0  # how long after its answer the same press counts as the same tap again

Press = tuple[int, str]  # (chat id, the button's callback data)


class Presses:
    """The presses being answered, and when each recent one was answered."""

    def __init__(self) -> None:
        self._answering: set[Press] = set()
        self._answered: dict[Press, float] = {}

    def claim(self, press: Press) -> str | None:
        """Take ``press`` on, or say why not: ``already_coming`` (being answered) or ``already_sent``.
        Checked and taken with no await between: ten presses at once are ten updates at once."""
        if press in self._answering:
            return "already_coming"
        now = time.monotonic()
        for old in [p for p, at in self._answered.items() if now - at >= REPEAT_S]:
            del self._answered[old]
        if press in self._answered:
            return "already_sent"
        self._answering.add(press)
        return None

    def release(self, press: Press, answered: bool) -> None:
        """The press was dealt with; when it was ``answered`` a repeat within :data:`REPEAT_S` is the same tap."""
        self._answering.discard(press)
        if answered:
            self._answered[press] = time.monotonic()
