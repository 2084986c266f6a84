"""The sentences' catalogues (bot/words/locales/): read with Babel as a translator's tools read them, apart
from the bot's own reader, every sentence is in every language, translated from the English as it is now,
with the same placeholders; and every sentence the code asks for is there."""
from __future__ import annotations

import ast
import re
import unicodedata
from pathlib import Path
from string import Formatter

import pytest
from babel.messages.catalog import Catalog, Message

from bot.words.catalogue import FSI, LANG_NAMES, LANGS, PDI, RLM, page_words, pick_lang, rtl, t
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


# Sentences a translation may leave as the English, and why: names, and a label that is the same word.
SAME_AS_ENGLISH = {
    "caption_style": "only the style's name",
    "hd_button": "HD is a name",
    "style_name_realcugan_up2x": "HD is a name",
    "page_anime": "the word anime, the same in many languages",
    "webapp_menu": "Studio, the same word in some languages",
    "page_admin": "Admin, the same word in some languages (pt-br, id)",
    **{f"style_name_{name}": "a proper name" for name in ("hayao", "paprika", "hayao_v3", "shinkai", "celeba_distill")},
}
# Telegram's limits on the bot's profile (setMyDescription, setMyShortDescription) and command menus.
LIMITS = {"profile_description": (1, 512), "profile_short_description": (1, 120)}
COMMAND_LIMITS = (3, 256)


def test_eleven_languages_each_offered_in_its_own_name() -> None:
    assert set(LANGS) == {"en", "zh", "ru", "es", "pt-br", "id", "fa", "ar", "uk", "uz", "tr"}
    names = [LANG_NAMES[lang] for lang in LANGS]
    assert len(set(names)) == len(names) and LANG_NAMES["ru"] == "Русский" and LANG_NAMES["fa"] == "فارسی"


@pytest.mark.parametrize("path", TRANSLATIONS, ids=lambda path: path.parents[1].name)
def test_each_language_has_the_plural_forms_cldr_gives_it_and_translates_all_but_names(path: Path) -> None:
    translation, folder = read(path), path.parents[1].name
    cldr = Catalog(locale=folder)
    assert (translation.num_plurals, translation.plural_expr) == (cldr.num_plurals, cldr.plural_expr)
    english = by_key(read(TEMPLATE))
    same = {key for key, message in by_key(translation).items()
            if set(forms(message.string)) & set(forms(english[key].id))}
    assert same <= SAME_AS_ENGLISH.keys(), f"left in English: {sorted(same - SAME_AS_ENGLISH.keys())}"


@pytest.mark.parametrize("lang", LANGS)
def test_the_profile_and_menus_fit_telegram_s_limits(lang: str) -> None:
    for key, (low, high) in LIMITS.items():
        assert low <= len(t(lang, key)) <= high, (lang, key, len(t(lang, key)))
    menus = [key for key in by_key(read(TEMPLATE)) if key.startswith(("command_", "group_command_"))]
    assert len(menus) == 16
    for key in menus:
        assert COMMAND_LIMITS[0] <= len(t(lang, key)) <= COMMAND_LIMITS[1], (lang, key, t(lang, key))


def test_a_right_to_left_sentence_isolates_each_value_and_a_left_to_right_one_is_left_as_it_is() -> None:
    said = t("fa", "style_set", style="Hayao")
    assert f"{FSI}Hayao{PDI}" in said and said.count(FSI) == said.count(PDI) == 1
    assert not said.startswith(FSI)  # the sentence's own (Persian) letters come first: Telegram lays it out RTL
    arabic = t("ar", "queued", count=12)
    assert f"{FSI}12{PDI}" in arabic
    assert t("ar", "queued", count=2) != t("ar", "queued", count=3) != arabic  # two, few and many differ
    english = t("en", "style_set", style="Hayao")
    assert FSI not in english and PDI not in english and "Hayao" in english
    assert t("ar", "days", count=30).count(FSI) == 1
    assert rtl("ar") and rtl("fa") and not rtl("ru") and not rtl("en")
    only_values = t("fa", "style_line", number=1, name="Hayao", about="x")  # no letter of its own to set the way
    assert only_values.startswith(RLM + FSI) and not t("en", "style_line", number=1, name="Hayao", about="x").startswith(RLM)


@pytest.mark.parametrize(("chosen", "reported", "picked"), [
    (None, "ru", "ru"), (None, "pt-br", "pt-br"), (None, "pt", "pt-br"), (None, "pt-PT", "pt-br"),
    (None, "fa-IR", "fa"), (None, "uz-latn", "uz"), (None, "zh-hans", "zh"), (None, "ar", "ar"),
    (None, "de", "en"), (None, "", "en"), (None, None, "en"), ("uk", "ru", "uk"), ("xx", "tr", "tr"),
])
def test_a_language_is_the_users_choice_else_their_clients_else_english(chosen: str | None, reported: str | None,
                                                                        picked: str) -> None:
    assert pick_lang(chosen, reported) == picked


def test_the_page_gets_every_language_its_words_and_its_direction() -> None:
    words = page_words()
    assert set(words) == set(LANGS)
    keys = {key for key in words["en"]}
    assert all(set(words[lang]) == keys for lang in LANGS)
    assert {lang for lang in LANGS if words[lang]["$dir"] == "rtl"} == {"ar", "fa"}
    assert all(words[lang]["title"] != words["en"]["title"] for lang in LANGS if lang != "en")


def first_strong_is_latin(line: str) -> bool:
    """Whether the first letter of ``line`` outside its {placeholders} (which the bot isolates) is Latin."""
    letters = [ch for ch in re.sub(r"\{[^}]*\}", "", line) if ch.isalpha()]
    return bool(letters) and unicodedata.name(letters[0]).startswith("LATIN")


@pytest.mark.parametrize("lang", ["ar", "fa"])
def test_no_line_of_a_right_to_left_sentence_starts_with_a_latin_word(lang: str) -> None:
    """A client that sets each line's direction by its first letter would lay such a line out left to right."""
    latin = {(key, line) for key, forms_ in ((k, forms(m.string)) for k, m in by_key(read(LOCALES / lang / "LC_MESSAGES"
                                                                                          / "animebot.po")).items())
             for text in forms_ for line in text.split("\n") if first_strong_is_latin(line)}
    names = {"hd_button", "style_name_celeba_distill", "style_name_realcugan_up2x", "style_name_realcugan_param"}
    assert {key for key, _ in latin} <= names, sorted(latin)
