"""Fast mode: while photos wait, a style with a lite version is drawn with it, and the reply says so."""
from __future__ import annotations

from pathlib import Path

import pytest

from bot.service.config import ConfigError, load_config
from inference.engine import build_animeganv2
from inference.prune import prune, save_lite
from testkit.bot_harness import private_chat, start_bot
from testkit.pictures import synthetic_photo
from testkit.fake_telegram import FakeTelegram
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
    caption, buttons, _ = fast_reply(store.home, "hayao=hayao-lite", tmp_path, 501, (512, 512))
    assert "fast mode, with the lighter" in caption
    assert any(d.startswith("f:") for d in buttons) and any(d.startswith("r:hayao:") for d in buttons)


def test_fast_mode_can_map_a_style_to_a_cheaper_real_one(styles_store: ModelStore, tmp_path: Path) -> None:
    """No lite model needs training: Hayao (AnimeGANv2) falls back to Ghibli (AnimeGANv3, about half
    the cost per pixel), and the caption names the style the user got."""
    caption, buttons, log = fast_reply(styles_store.home, "hayao=hayao_v3", tmp_path, 502, (480, 360))
    assert "fast mode, with the lighter Ghibli style" in caption
    assert "job 1000: hayao_v3 480x360" in log
    assert any(d.startswith("r:hayao:") for d in buttons)  # one tap asks for the style they chose


def fast_reply(home: Path, mapping: str, tmp_path: Path, user_id: int, size: tuple[int, int]
               ) -> tuple[str, list[str], str]:
    """One photo to a bot whose every photo is drawn in fast mode (a queue of 0 counts as long):
    the reply's caption, its buttons' data, and the bot's log."""
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", home, ANIMEBOT_FAST_MODE=mapping, ANIMEBOT_FAST_QUEUE="0")
        try:
            msg = fake.photo_message(*private_chat(user_id), synthetic_photo(*size))
            reply = fake.wait_for(lambda: [c for c in fake.replies_to(msg) if c.method == "sendPhoto"], 180)[0]
            buttons = [b["callback_data"] for row in reply.params["reply_markup"]["inline_keyboard"] for b in row]
            return str(reply.params["caption"]), buttons, bot.log()
        finally:
            assert bot.stop() == 0, bot.log()
