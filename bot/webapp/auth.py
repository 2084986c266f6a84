"""Who is asking: Telegram's ``initData``, checked as Telegram documents it for Mini Apps.

Telegram hands the page a query string (``query_id``, ``user``, ``auth_date``,
``hash``...) signed for this bot: ``hash`` is the hex HMAC-SHA256 of every other
field, sorted by name and written ``name=value`` one per line, under a key that
is itself the HMAC-SHA256 of the bot's token under the constant ``WebAppData``.
Only someone with the token can sign it, so a signed ``user`` is who they say.
``auth_date`` says when Telegram signed it; older than :data:`MAX_AGE_S` is
refused, so a copied string stops working within the hour.

The page sends it on every call as ``Authorization: tma <initData>``. Whatever is
wrong with it, the caller learns only that it was refused.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from urllib.parse import parse_qsl

MAX_AGE_S = 3600.0
MAX_SKEW_S = 60.0  # an auth_date this far ahead of our clock is a clock's difference, not a forgery
MAX_BYTES = 4096  # Telegram's initData is well under 1 KB; anything this long is not one
SCHEME = "tma "


class Unauthorized(Exception):
    """The initData was missing, malformed, forged or stale. The message is for our log, never the caller."""


@dataclass(frozen=True)
class WebAppUser:
    id: int
    language_code: str | None


def secret_key(token: str) -> bytes:
    return hmac.new(b"WebAppData", token.encode(), hashlib.sha256).digest()


def signature(fields: dict[str, str], token: str) -> str:
    """The ``hash`` Telegram puts beside ``fields`` (every field of initData but the hash itself)."""
    check = "\n".join(f"{name}={value}" for name, value in sorted(fields.items()))
    return hmac.new(secret_key(token), check.encode(), hashlib.sha256).hexdigest()


def check_init_data(init_data: str, token: str, now: float, max_age_s: float = MAX_AGE_S) -> WebAppUser:
    """The user ``init_data`` was signed for, if it was signed with ``token`` at most ``max_age_s`` ago."""
    if not init_data or len(init_data) > MAX_BYTES:
        raise Unauthorized("no initData, or too long")
    try:
        pairs = parse_qsl(init_data, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise Unauthorized("initData is not a query string") from None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise Unauthorized("a field given twice")
    given = fields.pop("hash", "")
    if not hmac.compare_digest(signature(fields, token), given):
        raise Unauthorized("the hash does not match")
    try:
        signed_at = int(fields["auth_date"])
        user = json.loads(fields["user"])
        user_id = int(user["id"])
    except (KeyError, ValueError, TypeError):
        raise Unauthorized("auth_date or user missing or malformed") from None
    if now - signed_at > max_age_s or signed_at - now > MAX_SKEW_S:
        raise Unauthorized(f"auth_date is {now - signed_at:.0f} s old")
    lang = user.get("language_code")
    return WebAppUser(user_id, lang if isinstance(lang, str) else None)


def from_header(header: str | None, token: str, now: float) -> WebAppUser:
    """The user of an ``Authorization: tma <initData>`` header."""
    if not header or not header.startswith(SCHEME):
        raise Unauthorized("no tma authorization")
    return check_init_data(header[len(SCHEME):].strip(), token, now)
