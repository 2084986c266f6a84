"""Users of each language, as Telegram reports it, talk to the real bot (a real model, the fake Bot API):
everything said to them (messages, edits, captions, buttons) is in their language, read by a language
detector, with no English sentence; the bot's profile is set in every language, and only once.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from string import Formatter
from typing import Any

import pytest

from bot.root.profile import GROUP_COMMANDS, PRIVATE_COMMANDS
from bot.words.catalogue import LANGS, profile_code, t
from testkit.bot_harness import private_chat, start_bot
from testkit.bot_in_process import InProcessBot, bot_in_process
from testkit.fake_telegram import Call, FakeTelegram
from testkit.words import TEMPLATE, read
from weights.store import ModelStore

# Each language as a client reports it (a region or script tag where clients send one), and what the
# detector calls it: it knows every language here but Uzbek, which is held to "no English" alone.
CLIENTS = {"ru": ("ru", "ru"), "es": ("es", "es"), "pt-br": ("pt-br", "pt"), "id": ("id", "id"),
           "fa": ("fa-IR", "fa"), "ar": ("ar", "ar"), "uk": ("uk", "uk"), "uz": ("uz-latn", None), "tr": ("tr", "tr")}
DETECTED_AMONG = ["en", "zh", "ru", "es", "pt", "id", "fa", "ar", "uk", "tr"]
WORD = re.compile(r"[^\W\d_]+")


@pytest.fixture(scope="module")
def bot(fake: FakeTelegram, real_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBot]:
    with bot_in_process(fake, tmp_path_factory.mktemp("bot"), real_store.home, ANIMEBOT_MAX_SIDE="384") as running:
        yield running


def english_phrases() -> set[str]:
    """The English of every sentence, cut at its placeholders into runs of three words or more of lower-case
    English (so that format names, "Telegram" or a style's name, which stay in every language, are not)."""
    phrases = set()
    for message in read(TEMPLATE):
        for text in [message.id] if isinstance(message.id, str) else list(message.id):
            for literal, *_ in Formatter().parse(text):
                for run in re.findall(r"(?:\b[a-z]{2,}\b[ ,']*){3,}", literal):
                    phrases.add(run.strip(" ,'"))
    return phrases


def said_to(fake: FakeTelegram, chat_id: int) -> list[str]:
    """Every text the bot put before this chat: messages, edits, captions, and the labels of buttons."""
    texts: list[str] = []
    for call in list(fake.calls):
        if str(call.params.get("chat_id")) != str(chat_id):
            continue
        texts += [str(call.params[k]) for k in ("text", "caption") if call.params.get(k)]
        markup = call.params.get("reply_markup") or {}
        texts += [b["text"] for row in markup.get("inline_keyboard", []) for b in row]
    return texts


def detected(text: str) -> str:
    """The language langid.py's model reads ``text`` as, of the ones this bot speaks."""
    from py3langid import langid  # type: ignore[import-untyped]

    identifier = langid.LanguageIdentifier.from_modelpath(langid.MODEL_DIR / langid.MODEL_FILE)
    identifier.set_languages(DETECTED_AMONG)
    return str(identifier.classify(text)[0])


@pytest.mark.parametrize("lang", CLIENTS)
def test_a_new_user_is_answered_in_their_own_language(bot: InProcessBot, fake: FakeTelegram, lang: str,
                                                      shared_photo: Any) -> None:
    pytest.importorskip("py3langid", reason="the language detector is a test dependency (pip install -e '.[test]')")
    reported, detector_code = CLIENTS[lang]
    chat, user = private_chat(8100 + list(CLIENTS).index(lang), lang=reported)
    fake.text_message(chat, user, "/start")
    fake.wait_for(lambda: fake.messages_to(chat["id"]), 30)
    fake.text_message(chat, user, "/help")
    fake.wait_for(lambda: fake.messages_to(chat["id"])[1:], 30)
    fake.photo_message(chat, user, shared_photo("portrait_900x1200.jpg"))
    drawn: list[Call] = fake.wait_for(lambda: fake.calls_to("sendPhoto", chat["id"]), 300)
    assert drawn[0].params.get("reply_markup"), "the result comes with its buttons"

    texts = said_to(fake, chat["id"])
    assert texts[0] == t(lang, "start")  # the client's tag picked the language
    english = english_phrases()
    leaked = {(phrase, text) for text in texts for phrase in english if phrase in text}
    assert not leaked, f"English said to a {lang} user: {sorted(leaked)[:5]}"
    if detector_code is not None:
        for text in texts:
            if len(WORD.findall(text)) >= 6:  # a sentence, not a button's label: long enough to judge
                assert detected(text) == detector_code, (lang, text)


PROFILE_SETS = ("setMyCommands", "setMyDescription", "setMyShortDescription")


def test_the_profile_is_set_in_every_language_and_a_restart_sets_nothing(tiny_store: ModelStore, tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        start_bot(fake, tmp_path / "bot", tiny_store.home).stop()
        for lang in LANGS:
            code = profile_code(lang) or ""
            assert fake.profile["description", "", code] == t(lang, "profile_description")
            assert fake.profile["short_description", "", code] == t(lang, "profile_short_description")
            assert [c["command"] for c in fake.profile["commands", "all_private_chats", code]] == list(PRIVATE_COMMANDS)
            assert [c["description"] for c in fake.profile["commands", "all_group_chats", code]] == \
                [t(lang, f"group_command_{name}") for name in GROUP_COMMANDS]
        assert {code for _, _, code in fake.profile} == {"", "zh", "ru", "es", "pt", "id", "fa", "ar", "uk", "uz", "tr"}
        first = {method: len(fake.calls_to(method)) for method in PROFILE_SETS}
        assert first == {"setMyCommands": 2 * len(LANGS), "setMyDescription": len(LANGS),
                         "setMyShortDescription": len(LANGS)}

        asked = len(fake.calls_to("getMyDescription"))
        start_bot(fake, tmp_path / "bot", tiny_store.home).stop()
        assert len(fake.calls_to("getMyDescription")) == asked + len(LANGS)  # it looked again...
        assert {method: len(fake.calls_to(method)) for method in PROFILE_SETS} == first  # ...and changed nothing

        fake.profile["description", "", "fa"] = "something an operator typed into BotFather"
        start_bot(fake, tmp_path / "bot", tiny_store.home).stop()
        assert fake.profile["description", "", "fa"] == t("fa", "profile_description")
        assert len(fake.calls_to("setMyDescription")) == first["setMyDescription"] + 1


def test_a_style_is_asked_for_by_its_name_in_the_users_language(bot: InProcessBot, fake: FakeTelegram,
                                                                 shared_photo: Any) -> None:
    chat, user = private_chat(8190, lang="fa-IR")
    cute = t("fa", "style_name_cute")
    fake.photo_message(chat, user, shared_photo("portrait_900x1200.jpg"), caption=f"/anime {cute}")
    drawn = fake.wait_for(lambda: fake.calls_to("sendPhoto", chat["id"]), 300)[0]
    labels = [b["text"] for row in drawn.params["reply_markup"]["inline_keyboard"] for b in row]
    assert t("fa", "style_name_hayao") in labels and cute not in labels  # drawn in the style named: redraw offers the other
    fake.photo_message(chat, user, shared_photo("portrait_900x1200.jpg"), caption="/anime ناشناخته")
    refusal = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "ناشناخته" in c.params["text"]], 60)[0]
    text = refusal.params["text"]
    assert "«\u2068ناشناخته\u2069»" in text and "\\u" not in text and "'" not in text  # no Python repr
    assert f"{t('fa', 'style_name_hayao')} (hayao) و " in text  # listed the Persian way
