"""Blocked users (storage/blocked.py): a real file, read again after a reopen as after a restart."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from storage.blocked import Block
from storage.database import Database
from storage.stores import Stores


def test_block_unblock_and_list_survive_reopening(tmp_path: Path) -> None:
    async def scenario() -> None:
        db = await Database.open(tmp_path / "bot.db")
        blocked = Stores.on(db, tmp_path / "results").blocked
        await blocked.load()
        assert not blocked.is_blocked(7) and await blocked.listed() == []
        assert await blocked.block(7, by=1, now=100.0)
        assert not await blocked.block(7, by=2, now=200.0)  # already: the first block stays
        assert await blocked.block(8, by=1, now=150.0)
        assert blocked.is_blocked(7) and blocked.is_blocked(8)
        await db.close()

        again_db = await Database.open(tmp_path / "bot.db")
        again = Stores.on(again_db, tmp_path / "results").blocked
        await again.load()
        assert again.is_blocked(7) and again.is_blocked(8) and not again.is_blocked(9)
        assert await again.listed() == [Block(7, 1, 100.0), Block(8, 1, 150.0)]
        assert await again.unblock(7) and not again.is_blocked(7)
        assert not await again.unblock(7)
        assert await again.listed() == [Block(8, 1, 150.0)]
        await again_db.close()

    asyncio.run(scenario())


def test_asking_before_loading_is_a_bug_not_a_no(tmp_path: Path) -> None:
    async def scenario() -> None:
        db = await Database.open(tmp_path / "bot.db")
        try:
            with pytest.raises(RuntimeError):
                Stores.on(db, tmp_path / "results").blocked.is_blocked(7)
        finally:
            await db.close()

    asyncio.run(scenario())
