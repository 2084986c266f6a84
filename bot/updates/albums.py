"""Collect the messages of an album (a media group) so it is answered as one.

Telegram delivers an album as separate messages that share a
``media_group_id`` and arrive within a moment of each other. We hold them
until none has arrived for ``wait_s`` and then hand over the whole group.

Each message's handler waits (``await collector.add(message)``) until its
album has been answered, so no album update is marked handled in the
journal while the album is only held in memory: a crash in that second
replays the updates, and the album is collected again.
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
        self._answered: dict[tuple[int, str], asyncio.Future[None]] = {}

    def add(self, message: Message) -> asyncio.Future[None]:
        """Add one album message; the album is flushed ``wait_s`` after its last message.

        The returned future is done once the whole album has been answered.
        """
        assert message.media_group_id is not None
        key = (message.chat_id, message.media_group_id)
        self._groups.setdefault(key, []).append(message)
        if timer := self._timers.get(key):
            timer.cancel()
        answered = self._answered.setdefault(key, asyncio.get_running_loop().create_future())
        self._timers[key] = asyncio.create_task(self._flush_later(key), name=f"album-{key[1]}")
        return asyncio.shield(answered)

    async def _flush_later(self, key: tuple[int, str]) -> None:
        await asyncio.sleep(self.wait_s)
        del self._timers[key]  # from here on, this flush can no longer be cancelled by add()
        messages = sorted(self._groups.pop(key), key=lambda m: m.message_id)
        answered = self._answered.pop(key)
        try:
            await self.on_album(messages)
        except asyncio.CancelledError:  # a stop: the album's updates stay unhandled, to be replayed
            answered.cancel()
            raise
        except Exception:  # a bug, and nobody awaits this task: say it here, with its traceback
            log.exception("album %s: failed unexpectedly", key[1])
        answered.set_result(None)
