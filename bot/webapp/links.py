"""The addresses of the Mini App's pictures: signed, so an ``<img>`` needs no Authorization header.

An image element cannot send ``Authorization: tma …``, so each picture's
address carries its own proof instead: the user it was made for, the result
(by its unguessable id), which picture of it, an expiry, and an HMAC of all
four under a key of this database's own (from its ``secrets`` table). The
server checks the HMAC and the expiry, then that the result is still that
user's. Expiry is rounded to the hour, so the same picture keeps one address
(and the browser's cache) for a while.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import time

PREFIX = "/app/img"
VALID_S = 3600  # at least this long; at most twice


class Links:
    def __init__(self, key: bytes) -> None:
        self._key = hmac.new(key, b"animebot webapp images", hashlib.sha256).digest()

    def _mac(self, user_id: int, result_id: str, variant: str, expires: int) -> str:
        message = f"{user_id}/{result_id}/{variant}/{expires}".encode()
        return base64.urlsafe_b64encode(hmac.new(self._key, message, hashlib.sha256).digest()[:18]).decode()

    def image(self, user_id: int, result_id: str, variant: str, now: float | None = None) -> str:
        expires = (int(now if now is not None else time.time()) // VALID_S + 2) * VALID_S
        return f"{PREFIX}/{user_id}/{result_id}/{variant}/{expires}/{self._mac(user_id, result_id, variant, expires)}"

    def valid(self, user_id: int, result_id: str, variant: str, expires: int, mac: str, now: float | None = None
              ) -> bool:
        """Whether this address was made here, for this user and picture, and has not expired."""
        if (now if now is not None else time.time()) > expires:
            return False
        return hmac.compare_digest(self._mac(user_id, result_id, variant, expires), mac)
