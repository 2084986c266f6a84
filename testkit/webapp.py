"""Playing the Mini App's side: Telegram's signed initData, and calls to the bot's /app over real HTTP.

The signature is made here from Telegram's documentation, apart from the bot's
own check (bot/webapp/auth.py), so that a mistake in one is not repeated in the
other: every field but ``hash``, sorted, ``name=value`` a line, HMAC-SHA256 under
the HMAC-SHA256 of the token keyed with ``WebAppData``, in hex.
"""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from PIL import Image

from testkit.bot_harness import private_chat
from testkit.bot_in_process import InProcessBot
from testkit.fake_telegram import TOKEN, Call, FakeTelegram
from testkit.pictures import synthetic_photo
from testkit.replies import first_answer
from testkit.wait import wait_for

# The Mini App's address and the daily quota of the bot the Mini App's tests serve (tests/conftest.py, ``app``).
URL = "https://anime.example/app"
QUOTA = 8


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


def unsigned(address: str) -> str:
    """The picture a signed address names, whatever hour signed it (its expiry and MAC left off): an address
    is signed anew each hour (bot/webapp/links.py), so two read a moment apart across the hour differ."""
    return address.rsplit("/", 2)[0]


def signed_as(address: str) -> re.Pattern[str]:
    """Any signed address of the picture ``address`` names: for an attribute the page sets."""
    return re.compile(re.escape(unsigned(address)) + r"/\d+/[\w-]+$")


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


class App:
    """The bot's HTTP server, as the page calls it."""

    def __init__(self, bot: InProcessBot, fake: FakeTelegram, port: int) -> None:
        self.bot, self.fake, self.base = bot, fake, f"http://127.0.0.1:{port}"

    def get(self, path: str, uid: int | None = None, auth: str | None = None) -> Answer:
        return call(self.base, path, auth if auth is not None else init_data(uid, TOKEN) if uid else None)

    def post(self, path: str, uid: int, body: Any = None, raw: bytes | None = None) -> Answer:
        return call(self.base, path, init_data(uid, TOKEN), body=body if body is not None else {}, raw=raw)

    def results(self, uid: int) -> list[dict[str, Any]]:
        answer = self.get("/app/api/results", uid)
        assert answer.status == 200, answer
        return list(answer.json()["results"])

    def finished(self, job: str, uid: int) -> dict[str, Any]:
        """Poll the job as the page does, until it is done or failed: twice a second, within the API's rate
        (bot/webapp/limits.py) however long the job (an HD takes seconds)."""
        def ended() -> dict[str, Any] | None:
            state: dict[str, Any] = self.get(f"/app/api/jobs/{job}", uid).json()
            return state if state["state"] in ("done", "failed") else None
        return wait_for(ended, 120, f"the end of job {job}", interval=0.5)

    def picture(self, url: str) -> Image.Image:
        answer = call(self.base, url)
        assert answer.status == 200 and answer.headers["Content-Type"] == "image/jpeg", answer.status
        return Image.open(io.BytesIO(answer.body)).convert("RGB")


def drawn_photo(app: App, uid: int, seed: int, chat: dict[str, Any] | None = None) -> tuple[bytes, Call]:
    """A user sends a photo (in their private chat, or in ``chat``) and gets it back drawn."""
    user = private_chat(uid)[1]
    data = synthetic_photo(384, 288, seed=seed)
    message = app.fake.photo_message(chat or private_chat(uid)[0], user, data,
                                     caption="/anime" if chat is not None else None)
    return data, first_answer(app.fake, message, "sendPhoto", timeout=120)
