"""What the buttons under a result act on, kept server-side.

Callback data is at most 64 bytes and comes back from the client, so it must
not be trusted to say which photo, style and settings a button means. Each
result shown in a chat gets a short random id here, with the photo's hash,
the style and the settings it was drawn with; the buttons carry only that
id. A press is honoured only in the chat the result was shown in, so a
forged or copied id reaches nobody else's photo.
"""
from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass

from storage.database import Database

from inference.imageio import ImageLimits
from inference.pipeline import ConvertSettings

ID_BYTES = 9  # 12 characters of base64: unguessable, and short enough for callback data


@dataclass(frozen=True)
class ShownResult:
    """A result as its buttons see it: the photo, how it was drawn, and where it was shown."""

    chat_id: int
    content_sha256: str
    style: str
    settings: ConvertSettings
    spoiler: bool = False  # the photo came with a spoiler: every answer about it carries one
    shown_at: float = 0.0  # when it was first shown in that chat, as read back (0: one being shown now)


def settings_to_json(settings: ConvertSettings) -> str:
    return json.dumps(asdict(settings), sort_keys=True)


def settings_from_json(text: str) -> ConvertSettings:
    raw = json.loads(text)
    raw["limits"] = ImageLimits(**raw["limits"])
    return ConvertSettings(**raw)


class ResultButtons:
    """Lives in the bot's database (storage/database.py)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def id_for(self, shown: ShownResult) -> str:
        """The id for this result in this chat; the same one every time it is shown there. Once shown
        with a spoiler, it keeps the spoiler: the photo was sent as one in this chat."""
        settings = settings_to_json(shown.settings)
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

    async def shown_in(self, chat_id: int, limit: int) -> list[tuple[str, ShownResult]]:
        """The results shown in ``chat_id`` (their id, and what they are), newest first: in a private chat, the
        user's own results, as the Mini App lists them."""
        rows = await self._db.fetchall(
            "SELECT id, content_sha256, style, settings, spoiler, created_at FROM buttons WHERE chat_id = ?"
            " ORDER BY created_at DESC, id LIMIT ?", (chat_id, limit),
        )
        return [(row[0], ShownResult(chat_id, row[1], row[2], settings_from_json(row[3]), bool(row[4]), row[5]))
                for row in rows]

    async def find(self, button_id: str, chat_id: int) -> ShownResult | None:
        """The result a button names, if it was shown in ``chat_id``; None for anything else."""
        row = await self._db.fetchone(
            "SELECT content_sha256, style, settings, spoiler, created_at FROM buttons WHERE id = ? AND chat_id = ?",
            (button_id, chat_id),
        )
        if row is None:
            return None
        return ShownResult(chat_id, row[0], row[1], settings_from_json(row[2]), bool(row[3]), row[4])
