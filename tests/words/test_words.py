"""The sentences' catalogues (bot/words/locales/): read with Babel as a translator's tools read them, apart
from the bot's own reader, every sentence is in every language, translated from the English as it is now,
with the same placeholders; and every sentence the code asks for is there."""
from __future__ import annotations

import ast
from pathlib import Path
from string import Formatter

import pytest
from babel.messages.catalog import Catalog, Message

from bot.words.catalogue import t
from testkit.bot_harness import REPO
from testkit.words import LOCALES, TEMPLATE, read

TRANSLATIONS = sorted(LOCALES.glob("*/LC_MESSAGES/animebot.po"))


def by_key(catalog: Catalog) -> dict[str, Message]:
    messages = [m for m in catalog if m.id]
    keys = [m.context for m in messages]
    assert None not in keys and len(set(keys)) == len(keys), "each sentence has a key (msgctxt) of its own"
    return {m.context: m for m in messages if m.context}


def forms(text: str | tuple[str, ...] | list[str] | None) -> list[str]:
    return [text] if isinstance(text, str) else list(text or ())


def placeholders(text: str) -> set[tuple[str, str, str | None]]:
    return {(name, spec, conversion) for _, name, spec, conversion in Formatter().parse(text) if name is not None}


@pytest.mark.parametrize("path", TRANSLATIONS, ids=lambda path: path.parents[1].name)
def test_every_sentence_is_translated_from_the_english_as_it_is_with_the_same_placeholders(path: Path) -> None:
    template, translation = read(TEMPLATE), read(path)
    english, translated = by_key(template), by_key(translation)
    assert translated.keys() == english.keys()
    for key, source in english.items():
        message = translated[key]
        assert message.id == source.id, f"{key}: translated from English that has changed since"
        assert not message.fuzzy, f"{key}: marked fuzzy"
        said = forms(message.string)
        assert all(said) and len(said) == (translation.num_plurals if source.pluralizable else 1), key
        wanted = set().union(*(placeholders(text) for text in forms(source.id)))
        assert all(placeholders(text) == wanted for text in said), f"{key}: {said} has not {wanted}"


def test_a_count_picks_the_plural_form_each_language_has() -> None:
    assert [t("en", "days", count=n) for n in (1, 30)] == ["1 day", "30 days"]
    assert [t("zh", "days", count=n) for n in (1, 30)] == ["1 天", "30 天"]
    assert [t("en", "queued", count=n) for n in (1, 2)] == ["In queue: 1 photo before yours…",
                                                            "In queue: 2 photos before yours…"]


def test_every_sentence_the_code_names_is_in_the_catalogue() -> None:
    """The keys written out in ``t(lang, "key", ...)`` calls (either key of an ``a if b else c``) across bot/."""
    known = by_key(read(TEMPLATE)).keys()
    named = set()
    for source in (REPO / "bot").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text("utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "t" and node.args[1:]:
                key = node.args[1]
                options = (key.body, key.orelse) if isinstance(key, ast.IfExp) else (key,)
                named |= {(o.value, source.name) for o in options if isinstance(o, ast.Constant)}
    assert len(named) > 100  # the calls are found
    assert {(key, where) for key, where in named if key not in known} == set()
