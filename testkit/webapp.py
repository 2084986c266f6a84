"""Playing the Mini App's side: Telegram's signed initData, and calls to the bot's /app over real HTTP.

The signature is made here from Telegram's documentation, apart from the bot's
own check (bot/webapp/auth.py), so that a mistake in one is not repeated in the
other: every field but ``hash``, sorted, ``name=value`` a line, HMAC-SHA256 under
the HMAC-SHA256 of the token keyed with ``WebAppData``, in hex.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode


def init_data(user_id: int, token: str, auth_date: float | None = None, lang: str = "en",
              drop: tuple[str, ...] = ()) -> str:
    """initData as Telegram hands it to a page opened by ``user_id``, signed for ``token``'s bot, without the
    fields in ``drop`` (they are left out before signing: a string Telegram never made, but correctly signed)."""
    fields = {
        "query_id": "AAHdF6IQAAAAAN0XohDhrOrc",
        "user": json.dumps({"id": user_id, "first_name": f"User{user_id}", "language_code": lang,
                            "allows_write_to_pm": True}, separators=(",", ":")),
        "auth_date": str(int(auth_date if auth_date is not None else time.time())),
    }
    fields = {k: v for k, v in fields.items() if k not in drop}
    check = "\n".join(f"{k}={fields[k]}" for k in sorted(fields))
    key = hmac.new(b"WebAppData", token.encode(), hashlib.sha256).digest()
    return urlencode({**fields, "hash": hmac.new(key, check.encode(), hashlib.sha256).hexdigest()})


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


def call(base: str, path: str, auth: str | None = None, body: Any = None, raw: bytes | None = None) -> Answer:
    """``GET`` (or ``POST`` with ``body`` as JSON, or ``raw`` bytes) ``base + path``, with ``Authorization: tma
    <auth>`` when given; any status comes back as an Answer, none raises."""
    data = raw if raw is not None else json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method="POST" if data is not None else "GET")
    if auth is not None:
        request.add_header("Authorization", f"tma {auth}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return Answer(response.status, response.read(), dict(response.headers))
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read(), dict(exc.headers))
