"""The bot's small pure parts: configuration, log redaction, buttons, commands, languages."""
from __future__ import annotations

import datetime as dt
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from telegram import Chat, Document, Message
from telegram.ext import CallbackQueryHandler

from bot.root.app import build_application
from bot.service.config import ConfigError, broker_password, load_config
from bot.chat.photos import anime_command, source_of
from bot.words.catalogue import LANGUAGES, error_text, pick_lang, t
from bot.chat.keyboards import (REDRAW, album_keyboard, cancel_keyboard, forget_keyboard, lang_keyboard, result_keyboard,
                                settings_keyboard, style_keyboard)
from bot.service.logs import RedactingFormatter
from bot.styles import Styles
from inference.pipeline import ConvertSettings
from weights.registry import builtin_entries
from testkit.bot_harness import REPO
from weights.store import ModelStore

TOKEN = "987654:SECRET-token_value"


def test_config_needs_a_token_and_reads_everything_else(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN is not set"):
        load_config({}, dotenv=None)
    cfg = load_config({"TELEGRAM_BOT_TOKEN": TOKEN, "ANIMEBOT_HOME": str(tmp_path), "ANIMEBOT_WORKERS": "3",
                       "ANIMEBOT_ADMINS": "1, 2", "TELEGRAM_API_BASE_URL": "http://127.0.0.1:9/bot"}, dotenv=None)
    assert (cfg.workers, cfg.admins, cfg.home, cfg.base_url) == (3, {1, 2}, tmp_path, "http://127.0.0.1:9/bot")
    assert TOKEN not in repr(cfg) and TOKEN not in str(cfg)
    with pytest.raises(ConfigError, match="ANIMEBOT_WORKERS must be a whole number"):
        load_config({"TELEGRAM_BOT_TOKEN": TOKEN, "ANIMEBOT_WORKERS": "two"}, dotenv=None)
    with pytest.raises(ConfigError, match="ANIMEBOT_QUEUE_SIZE must be between"):
        load_config({"TELEGRAM_BOT_TOKEN": TOKEN, "ANIMEBOT_QUEUE_SIZE": "0"}, dotenv=None)
    with pytest.raises(ConfigError, match="^ANIMEBOT_BACKEND must be one of openvino, .*, got 'cuda'$"):
        load_config({"TELEGRAM_BOT_TOKEN": TOKEN, "ANIMEBOT_BACKEND": "cuda"}, dotenv=None)
    with pytest.raises(ConfigError, match="^ANIMEBOT_ALLOWLIST must be Telegram ids"):
        load_config({"TELEGRAM_BOT_TOKEN": TOKEN, "ANIMEBOT_ALLOWLIST": "1, two"}, dotenv=None)
    tuned = load_config({"TELEGRAM_BOT_TOKEN": TOKEN, "ANIMEBOT_ALBUM_WAIT": "2.5", "ANIMEBOT_HD": "off",
                         "ANIMEBOT_WEBHOOK_SECRET": "s3cret-value", "ANIMEBOT_CACHE_MB": "10"}, dotenv=None)
    assert (tuned.album_wait_s, tuned.hd, tuned.cache_bytes) == (2.5, False, 10 << 20)
    assert "s3cret-value" not in repr(tuned) and TOKEN not in f"{tuned!s} {tuned!r}"


def test_a_local_bot_api_lifts_telegrams_file_limits_to_the_operators(tmp_path: Path) -> None:
    """Telegram's own Bot API caps what the bot fetches at 20 MB whatever ANIMEBOT_MAX_FILE_MB says; a server
    of the operator's own in local mode caps it at ANIMEBOT_MAX_FILE_MB, and takes uploads past 50 MB."""
    base = {"TELEGRAM_BOT_TOKEN": TOKEN, "ANIMEBOT_HOME": str(tmp_path), "ANIMEBOT_MAX_FILE_MB": "300"}
    cloud = load_config(base, dotenv=None)
    assert (cloud.api_local, cloud.download_bytes, cloud.upload_bytes) == (False, 20 << 20, 50 << 20)
    local = load_config({**base, "TELEGRAM_API_LOCAL": "true", "TELEGRAM_API_BASE_URL": "http://api:8081/bot"},
                        dotenv=None)
    assert (local.api_local, local.download_bytes, local.upload_bytes) == (True, 300 << 20, 2000 << 20)
    assert load_config({**base, "ANIMEBOT_MAX_FILE_MB": "8"}, dotenv=None).download_bytes == 8 << 20
    with pytest.raises(ConfigError, match="^TELEGRAM_API_LOCAL=true needs TELEGRAM_API_BASE_URL set to your own"):
        load_config({**base, "TELEGRAM_API_LOCAL": "true"}, dotenv=None)
    with pytest.raises(ConfigError, match="^TELEGRAM_API_LOCAL must be true or false, got 'local'$"):
        load_config({**base, "TELEGRAM_API_LOCAL": "local"}, dotenv=None)
    with pytest.raises(ConfigError, match="^ANIMEBOT_MAX_FILE_MB must be between 1 and 2000, got 5000$"):
        load_config({**base, "ANIMEBOT_MAX_FILE_MB": "5000"}, dotenv=None)


def test_a_broker_url_picks_the_celery_pool_and_its_password_stays_out_of_repr(tmp_path: Path) -> None:
    base = {"TELEGRAM_BOT_TOKEN": TOKEN, "ANIMEBOT_HOME": str(tmp_path)}
    assert load_config(base, dotenv=None).broker_url is None  # embedded: no Redis, no new setting
    url = "redis://:hunter2-pass@redis:6379/0"
    cfg = load_config({**base, "ANIMEBOT_BROKER_URL": url}, dotenv=None)
    assert cfg.broker_url == url and broker_password(url) == "hunter2-pass" and "hunter2" not in repr(cfg)
    with pytest.raises(ConfigError, match="must be a Redis URL"):
        load_config({**base, "ANIMEBOT_BROKER_URL": "amqp://guest@rabbit//"}, dotenv=None)
    assert load_config({**base, "ANIMEBOT_PER_USER_LIMIT": "5"}, dotenv=None).per_user_limit == 5


def test_dotenv_fills_gaps_but_the_environment_wins(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(f"TELEGRAM_BOT_TOKEN={TOKEN}\nANIMEBOT_MAX_SIDE=512\nANIMEBOT_WORKERS=4\n")
    cfg = load_config({"ANIMEBOT_WORKERS": "1"}, dotenv=env_file)
    assert (cfg.token.get_secret_value(), cfg.max_side, cfg.workers) == (TOKEN, 512, 1)


@pytest.mark.slow  # a bot process, though it stops at once
def test_run_without_a_token_exits_with_one_line(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "ANIMEBOT_HOME": str(tmp_path)}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-m", "bot", "run"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "animebot: TELEGRAM_BOT_TOKEN is not set; get one from @BotFather and put it in the environment or .env"]


def test_the_token_never_reaches_a_log_line_even_in_a_traceback() -> None:
    formatter = RedactingFormatter("%(message)s", [TOKEN])
    try:
        raise RuntimeError(f"POST https://api.telegram.org/bot{TOKEN}/getUpdates failed")
    except RuntimeError:
        record = logging.LogRecord("httpx", logging.ERROR, __file__, 1, "HTTP Request: %s", (f"/bot{TOKEN}/x",),
                                   sys.exc_info())
    text = formatter.format(record)
    assert TOKEN not in text and text.count("<token>") == 2


def routes(store: ModelStore) -> list[re.Pattern[str]]:
    """Every callback-data pattern the bot's application routes to a handler of its own (the
    catch-all, which answers "expired", has none): read from the app, so a new route is here too."""
    app, _ = build_application(load_config({"TELEGRAM_BOT_TOKEN": TOKEN, "ANIMEBOT_HOME": str(store.home)}, dotenv=None))
    handlers = [h for group in app.handlers.values() for h in group if isinstance(h, CallbackQueryHandler)]
    assert any(h.pattern is None for h in handlers), "no catch-all for presses that match no route"
    return [h.pattern for h in handlers if isinstance(h.pattern, re.Pattern)]


def genuine_buttons() -> list[str]:
    """The callback data of every keyboard the bot builds, as a user would press them."""
    styles = Styles(tuple(e for e in builtin_entries() if e.kind == "style"), "hayao", ConvertSettings())
    markups = [result_keyboard(styles, "hayao", "Ab-_0123456x", "en", hd=True), album_keyboard(["Ab-_0123456y"] * 2, "en"),
               style_keyboard(styles, "hayao", 4242, "en", own_photo=True), lang_keyboard(4242),
               settings_keyboard(ConvertSettings(), "en", 4242), cancel_keyboard("1234", "en"),
               forget_keyboard(4242, "en")]
    return [str(b.callback_data) for m in markups for row in m.inline_keyboard for b in row]


def forgeries(data: str) -> list[str]:
    """Data no button carries, made from a genuine one: an unknown kind, a field emptied, a field
    with a space in it, a field too many."""
    kind, *fields = data.split(":")
    out = ["z" + data[1:], kind + ":" + ":".join(fields[:-1]), data + ":1", data + "x:1"]
    for i in range(len(fields)):
        for bad in ("", "a b", "../" + fields[i]):
            out.append(":".join([kind, *fields[:i], bad, *fields[i + 1:]]))
    return out


def test_buttons_carry_only_a_result_id_and_forged_data_matches_no_route(tiny_store: ModelStore) -> None:
    styles = Styles(tuple(e for e in builtin_entries() if e.kind == "style"), "hayao", ConvertSettings())
    markup = result_keyboard(styles, "hayao", "Ab-_0123456x", "en")
    datas = [b.callback_data for row in markup.inline_keyboard for b in row]
    assert all(len(str(d).encode()) <= 64 for d in datas)
    assert "f:Ab-_0123456x" in datas and not any(str(d).startswith("r:hayao:") for d in datas)
    redraw = REDRAW.match(str(datas[0]))
    assert redraw is not None and redraw.group(2) == "Ab-_0123456x"

    known = routes(tiny_store)
    genuine = genuine_buttons()
    assert all(len(d.encode()) <= 64 for d in genuine)
    # Each button the bot makes goes to exactly one route, and each route has a button, so forging
    # from the buttons below reaches every route (a new route needs its keyboard in genuine_buttons).
    for data in genuine:
        assert sum(1 for route in known if route.match(data)) == 1, data
    unreached = [route.pattern for route in known if not any(route.match(d) for d in genuine)]
    assert not unreached, f"routes no genuine button reaches (add its keyboard to genuine_buttons): {unreached}"
    forged = [f for data in genuine for f in forgeries(data)]
    forged += ["", "x", "r:hayao", "r:hayao:short", "f:" + "a" * 16, "f:hayao:" + "a" * 16, "q:1", "s:", "s:hayao",
               "l:en", "o:faces", "o:nope:1", "r" * 65, "a:" + "a" * 11, "a:" + "a" * 13, "p:", "p:-1", "x:",
               "x:" + "9" * 21, "o:strength:1000", "s:" + "a" * 33 + ":1", "l:e:1", "l:" + "e" * 9 + ":1"]
    for data in forged:
        assert not any(route.match(data) for route in known), (data, [r.pattern for r in known if r.match(data)])


def test_forged_data_with_a_trailing_newline_matches_no_route(tiny_store: ModelStore) -> None:
    known = routes(tiny_store)
    for data in genuine_buttons():
        assert not any(route.match(data + "\n") for route in known), repr(data + "\n")


def test_anime_command_is_ours_only_when_addressed_to_us() -> None:
    assert anime_command("/anime", "AnimeBot") == (True, None)
    assert anime_command("/anime cute", "AnimeBot") == (True, "cute")
    assert anime_command("/anime@animebot hayao", "AnimeBot") == (True, "hayao")
    assert anime_command("/anime@OtherBot", "AnimeBot") == (False, None)
    assert anime_command("/animes", "AnimeBot") == (False, None)
    assert anime_command("nice /anime", "AnimeBot") == (False, None)
    assert anime_command(None, "AnimeBot") == (False, None)


@pytest.mark.parametrize("mime, name", [
    ("image/heic", "IMG_4032.HEIC"), ("image/heif", "IMG_4032.HEIF"), ("image/avif", "photo.avif"),
    # what an upload from cloud storage says of a file it does not know: its name tells
    ("binary/octet-stream", "IMG_4032.HEIF"), ("binary/octet-stream", "IMG_4032.hif"),
    ("binary/octet-stream", "photo.avif"),
])
def test_a_phone_s_photo_sent_as_a_file_is_taken_on_as_a_picture(mime: str, name: str) -> None:
    document = Document("F1", "U1", file_name=name, mime_type=mime, file_size=2_000_000)
    message = Message(1, dt.datetime.now(dt.timezone.utc), Chat(5, "private"), document=document)
    src = source_of(message)
    assert src is not None and src.file_id == "F1" and src.kind == "photo"


def test_languages_are_complete_and_picked_sensibly() -> None:
    assert LANGUAGES["en"].sentences.keys() == LANGUAGES["zh"].sentences.keys()
    assert pick_lang(None, "zh-hans") == "zh" and pick_lang(None, "de") == "en" and pick_lang("en", "zh") == "en"
    strip = {"width": 3000, "height": 100, "ratio": 20.0}
    assert "3000×100" in t("zh", "aspect", **strip) and "20:1" in t("zh", "aspect", **strip)
    assert t("en", "aspect", **strip) == "This image is too long and thin (3000×100); the aspect ratio may be at most 20:1."
    assert error_text("en", "too_small", "This image is too small (10×10).") == "This image is too small (10×10)."
    # A worker of an older release sends no numbers: its English says them, rather than a sentence without.
    assert error_text("zh", "too_small", "This image is too small (10×10).") == "This image is too small (10×10)."
    assert error_text("en", "internal", "RuntimeError: tensor size mismatch") == t("en", "internal")
