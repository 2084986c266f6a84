"""The bot against a Bot API that has only the core methods, and with a token Telegram refuses."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image

from testkit.bot_harness import REPO, private_chat, start_bot
from testkit.pictures import synthetic_photo
from testkit.fake_telegram import FakeTelegram
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
OPTIONAL = ("deleteWebhook", "setMyCommands", "sendChatAction", "editMessageText", "deleteMessage")


def test_without_the_optional_methods_photos_are_still_answered(real_store: ModelStore, tmp_path: Path) -> None:
    with FakeTelegram(missing=OPTIONAL) as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home)
        try:
            chat, user = private_chat(401)
            msg = fake.photo_message(chat, user, synthetic_photo(512, 512))
            reply = fake.wait_for(lambda: [c for c in fake.replies_to(msg) if c.method == "sendPhoto"], 180)[0]
            assert Image.open(io.BytesIO(fake.sent_file(reply, "photo"))).size == (512, 512)
        finally:
            assert bot.stop() == 0, bot.log()
        assert "deleteWebhook not done" in bot.log()


def test_a_refused_token_is_one_clear_line(real_store: ModelStore, tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        env = {**os.environ, "PYTHONPATH": str(REPO), "TELEGRAM_BOT_TOKEN": "1:wrong", "ANIMEBOT_HOME": str(real_store.home),
               "TELEGRAM_API_BASE_URL": fake.base_url, "TELEGRAM_API_FILE_URL": fake.file_url}
        done = subprocess.run([sys.executable, "-m", "bot", "run"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "animebot: Telegram refused the token; check TELEGRAM_BOT_TOKEN"
    assert "Traceback" not in done.stderr and "1:wrong" not in done.stderr


class _NotABotApi(BaseHTTPRequestHandler):
    """A web server at a wrong TELEGRAM_API_BASE_URL: every request gets ``status`` and an empty body."""

    status = 404

    def do_POST(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *_: object) -> None:
        pass


@pytest.mark.parametrize("status", [404, 200])
def test_an_api_base_that_is_not_a_bot_api_is_named_not_the_token(tiny_store: ModelStore, tmp_path: Path,
                                                                   status: int) -> None:
    handler = type("Answer", (_NotABotApi,), {"status": status})
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/bot"
        env = {**os.environ, "PYTHONPATH": str(REPO), "TELEGRAM_BOT_TOKEN": "1:right", "ANIMEBOT_HOME": str(tiny_store.home),
               "TELEGRAM_API_BASE_URL": base, "TELEGRAM_API_FILE_URL": f"{base}/file"}
        done = subprocess.run([sys.executable, "-m", "bot", "run"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        server.shutdown()
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"animebot: {base} is not a Bot API: it answered ") and \
        last.endswith(" without the Bot API's JSON; check TELEGRAM_API_BASE_URL"), last
    assert "Traceback" not in done.stderr and "1:right" not in done.stderr
