"""Fast mode: while photos wait, a style with a lite version is drawn with it, and the reply says so."""
from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import ConfigError, load_config
from inference.engine import build_animeganv2
from inference.prune import prune, save_lite
from tests.bot_harness import private_chat, start_bot
from tests.conftest import synthetic_photo
from tests.fake_telegram import FakeTelegram
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_fast_mode_pairs_are_parsed_and_checked() -> None:
    cfg = load_config({"TELEGRAM_BOT_TOKEN": "1:x", "ANIMEBOT_FAST_MODE": "hayao=hayao-lite, cute=cute-lite"},
                      dotenv=None)
    assert cfg.fast_styles == (("hayao", "hayao-lite"), ("cute", "cute-lite"))
    with pytest.raises(ConfigError, match="must look like hayao=hayao-lite"):
        load_config({"TELEGRAM_BOT_TOKEN": "1:x", "ANIMEBOT_FAST_MODE": "hayao"}, dotenv=None)


def test_a_long_queue_switches_to_the_lite_style(hayao_file: Path, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "home")
    base = store.import_file(hayao_file)
    save_lite(store, base, "hayao-lite", prune(build_animeganv2(base, store.path(base)), 0.6), 0.6)
    with FakeTelegram() as fake:
        # a queue depth of 0 counts as long, so every photo is drawn in fast mode
        bot = start_bot(fake, tmp_path / "bot", store.home, ANIMEBOT_FAST_MODE="hayao=hayao-lite",
                        ANIMEBOT_FAST_QUEUE="0")
        try:
            chat, user = private_chat(501)
            msg = fake.photo_message(chat, user, synthetic_photo(512, 512))
            reply = fake.wait_for(lambda: [c for c in fake.replies_to(msg) if c.method == "sendPhoto"], 180)[0]
            assert "fast mode, with the lighter" in reply.params["caption"]
            data = [b["callback_data"] for row in reply.params["reply_markup"]["inline_keyboard"] for b in row]
            assert any(d.startswith("f:") for d in data) and any(d.startswith("r:hayao:") for d in data)
        finally:
            assert bot.stop() == 0, bot.log()


def test_fast_mode_can_map_a_style_to_a_cheaper_real_one(styles_store: ModelStore, tmp_path: Path) -> None:
    """No lite model needs training: Hayao (AnimeGANv2) falls back to Ghibli (AnimeGANv3, about half
    the cost per pixel), and the caption names the style the user got."""
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", styles_store.home, ANIMEBOT_FAST_MODE="hayao=hayao_v3",
                        ANIMEBOT_FAST_QUEUE="0")
        try:
            chat, user = private_chat(502)
            msg = fake.photo_message(chat, user, synthetic_photo(480, 360))
            reply = fake.wait_for(lambda: [c for c in fake.replies_to(msg) if c.method == "sendPhoto"], 180)[0]
            assert "fast mode, with the lighter Ghibli style" in reply.params["caption"]
            assert "job 1000: hayao_v3 480x360" in bot.log()
            data = [b["callback_data"] for row in reply.params["reply_markup"]["inline_keyboard"] for b in row]
            assert any(d.startswith("r:hayao:") for d in data)  # one tap asks for the style they chose
        finally:
            assert bot.stop() == 0, bot.log()
