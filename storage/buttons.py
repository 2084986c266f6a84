"""What the buttons under a result act on, kept server-side.

Callback data is at most 64 bytes and comes back from the client, so it must
not be trusted to say which photo, style and settings a button means. Each
result shown in a chat gets a short random id here, with the photo's hash,
the style and the settings it was drawn with; the buttons carry only that
id. A press is honoured only in the chat the result was shown in, so a
forged or copied id reaches nobody else's photo.

The settings are whatever dataclass the bot draws with (inference's
``ConvertSettings``), kept through the one codec (storage/codec.py): storage/
is a floor below inference/ and names none of its types (docs/architecture.md,
"Floors"), so the bot says which type they are when it opens the table.
"""
from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Generic, TypeVar

from storage.codec import decode, encode
from storage.database import Database

ID_BYTES = 9  # 12 characters of base64: unguessable, and short enough for callback data
S = TypeVar("S")  # the settings a result was drawn with


@dataclass(frozen=True)
class ShownResult(Generic[S]):
    """A result as its buttons see it: the photo, how it was drawn, and where it was shown."""

    chat_id: int
    content_sha256: str
    style: str
    settings: S
    spoiler: bool = False  # the photo came with a spoiler: every answer about it carries one
    shown_at: float = 0.0  # when it was first shown in that chat, as read back (0: one being shown now)


class ResultButtons(Generic[S]):
    """Lives in the bot's database (storage/database.py); ``settings`` is the dataclass that results'
    settings are."""

    def __init__(self, db: Database, settings: type[S]) -> None:
        self._db = db
        self._settings = settings

    def _to_json(self, settings: S) -> str:
        """The stored form, also part of the row's identity: the same settings are always the same text."""
        return json.dumps(encode(settings), sort_keys=True)

    def _from_json(self, text: str) -> S:
        """Leniently, as the journal reads: a row from before a setting existed gets its default."""
        return decode(json.loads(text), self._settings, "a result's stored settings", lenient=True)

    async def id_for(self, shown: ShownResult[S]) -> str:
        """The id for this result in this chat; the same one every time it is shown there. Once shown
        with a spoiler, it keeps the spoiler: the photo was sent as one in this chat."""
        settings = self._to_json(shown.settings)
        await self._db.execute(
            "INSERT INTO buttons (id, chat_id, content_sha256, style, settings, created_at, spoiler)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (chat_id, content_sha256, style, settings)"
            " DO UPDATE SET spoiler = MAX(spoiler, excluded.spoiler)",
            (secrets.token_urlsafe(ID_BYTES), shown.chat_id, shown.content_sha256, shown.style, settings, time.time(),
             int(shown.spoiler)),
        )
        row = await self._db.fetchone(
            "SELECT id FROM buttons WHERE chat_id = ? AND content_sha256 = ? AND style = ? AND settings = ?",
            (shown.chat_id, shown.content_sha256, shown.style, settings),
        )
        assert row is not None  # inserted above, or there already
        return str(row[0])

    async def shown_in(self, chat_id: int, limit: int) -> list[tuple[str, ShownResult[S]]]:
        """The results shown in ``chat_id`` (their id, and what they are), newest first: in a private chat, the
        user's own results, as the Mini App lists them."""
        rows = await self._db.fetchall(
            "SELECT id, content_sha256, style, settings, spoiler, created_at FROM buttons WHERE chat_id = ?"
            " ORDER BY created_at DESC, id LIMIT ?", (chat_id, limit),
        )
        return [(row[0], ShownResult(chat_id, row[1], row[2], self._from_json(row[3]), bool(row[4]), row[5]))
                for row in rows]

    async def find(self, button_id: str, chat_id: int) -> ShownResult[S] | None:
        """The result a button names, if it was shown in ``chat_id``; None for anything else."""
        row = await self._db.fetchone(
            "SELECT content_sha256, style, settings, spoiler, created_at FROM buttons WHERE id = ? AND chat_id = ?",
            (button_id, chat_id),
        )
        if row is None:
            return None
        return ShownResult(chat_id, row[0], row[1], self._from_json(row[2]), bool(row[3]), row[4])
