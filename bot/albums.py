"""Collect the messages of an album (a media group) so it is answered as one.

Telegram delivers an album as separate messages that share a
``media_group_id`` and arrive within a moment of each other. We hold them
until none has arrived for ``wait_s`` and then hand over the whole group.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from telegram import Message

log = logging.getLogger("animebot.albums")

AlbumHandler = Callable[[list[Message]], Awaitable[None]]


class AlbumCollector:
    def __init__(self, wait_s: float, on_album: AlbumHandler) -> None:
        self.wait_s = wait_s
        self.on_album = on_album
        self._groups: dict[tuple[int, str], list[Message]] = {}
        self._timers: dict[tuple[int, str], asyncio.Task[None]] = {}

    def add(self, message: Message) -> None:
        """Add one album message; the album is flushed ``wait_s`` after its last message."""
        assert message.media_group_id is not None
        key = (message.chat_id, message.media_group_id)
        self._groups.setdefault(key, []).append(message)
        if timer := self._timers.get(key):
            timer.cancel()
        self._timers[key] = asyncio.create_task(self._flush_later(key), name=f"album-{key[1]}")

    async def _flush_later(self, key: tuple[int, str]) -> None:
        await asyncio.sleep(self.wait_s)
        del self._timers[key]  # from here on, this flush can no longer be cancelled by add()
        messages = sorted(self._groups.pop(key), key=lambda m: m.message_id)
        try:
            await self.on_album(messages)
        except Exception as exc:  # nobody awaits this task, so say it here
            log.error("album %s: %s: %s", key[1], exc.__class__.__name__, exc)
