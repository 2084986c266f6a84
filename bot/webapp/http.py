"""How the Mini App's API answers: JSON that no cache keeps, and errors the page shows as they are."""
from __future__ import annotations

import json
from typing import Any

from aiohttp import web


def as_json(data: dict[str, Any]) -> web.Response:
    return web.json_response(data, headers={"Cache-Control": "no-store"})


def error(kind: type[web.HTTPException], sentence: str, headers: dict[str, str] | None = None) -> web.HTTPException:
    """An error the page shows as it is: one sentence in the user's language."""
    return kind(text=json.dumps({"error": sentence}), content_type="application/json", headers=headers)
