"""The bot against a Bot API that has only the core methods, and with a token Telegram refuses."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from testkit.bot_harness import REPO, private_chat, start_bot
from tests.conftest import synthetic_photo
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
