"""Every sentence the bot and its Mini App's page say, read from gettext catalogues with Babel.

The sentences are written in English in ``locales/animebot.pot``; each other language is
``locales/<lang>/LC_MESSAGES/animebot.po``, made from that template and kept in step with it by
Babel's ``pybabel init`` and ``pybabel update`` (docs/architecture.md, "Sentences"), so that a
translator works in a format and with tools they know. An entry's msgctxt is the key the code asks
for, and its msgid the English. The files are read as they are, once, at import: there is no
compile step and no ``.mo`` file.

A language's code is its folder's name as Telegram writes tags (``pt_BR`` is ``pt-br``). A user's
language is what they chose with /lang, else what their Telegram client reports (``language_code``),
else English. A sentence a language lacks, or has marked fuzzy, is said in English.

In a language written right to left, each value put into a sentence (a style's name, a number, a file's
name) is wrapped in Unicode's first-strong isolate (FSI ... PDI): Telegram lays a message out by its
first strong letter, and an isolated Latin name neither sets that direction nor reorders the words
around it. Image errors are looked up by their stable code, so the engine's English text is only a
fallback.
"""
from __future__ import annotations

import gettext
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from string import Formatter
from typing import Any

from babel.lists import format_list
from babel.messages.pofile import read_po

LOCALES = Path(__file__).with_name("locales")
DOMAIN = "animebot"
SOURCE = "en"  # the language of the template, in which every sentence is written first
PAGE = "page_"  # the start of the keys of what the Mini App's page says
IMAGE_ERROR_CODES = ("empty", "not_image", "corrupt", "format", "too_large", "too_small", "aspect", "bad_clip")


FSI, PDI = "\u2068", "\u2069"  # first-strong isolate, and its end
RLM = "\u200f"  # a right-to-left mark: a strong letter of no script, for a sentence made only of values
_LETTER_OUTSIDE_VALUES = re.compile(r"[^\W\d_](?![^{]*})")  # a letter that is not inside a {placeholder}


@dataclass(frozen=True)
class Language:
    """One language's sentences, by key: each one form, or one per plural form; which form a count takes;
    and whether it is written right to left."""

    sentences: dict[str, tuple[str, ...]]
    plural: Callable[[int], int]
    locale: str
    rtl: bool = False


class _Isolating(Formatter):
    """Fills a right-to-left sentence in, each one-line value isolated once formatted (so ``{size:.1f}``
    still works); a block of lines is left as it is, since an isolate ends at a line's end anyway."""

    def format_field(self, value: Any, format_spec: str) -> str:
        text = super().format_field(value, format_spec)
        return text if "\n" in text else f"{FSI}{text}{PDI}"


_ISOLATING = _Isolating()


def _read(path: Path, source: bool) -> Language:
    """The template's msgids (``source``), or a translation's msgstrs but those not translated, or marked fuzzy."""
    with path.open("rb") as file:
        catalog = read_po(file, domain=DOMAIN, abort_invalid=True)
    sentences: dict[str, tuple[str, ...]] = {}
    for message in catalog:
        if message.context is None:  # the header
            continue
        text = message.id if source else message.string
        forms = (text,) if isinstance(text, str) else tuple(text or ())
        if forms and all(forms) and (source or not message.fuzzy):
            sentences[message.context] = forms
    locale = catalog.locale  # None for the template: English
    rtl = locale is not None and locale.text_direction == "rtl"
    return Language(sentences, gettext.c2py(catalog.plural_expr), str(locale or SOURCE), rtl)


def code_of(folder: str) -> str:
    """A catalogue folder's name (``pt_BR``, gettext's way) as Telegram writes the tag (``pt-br``)."""
    return folder.lower().replace("_", "-")


def _load() -> dict[str, Language]:
    """English first (the /lang keyboard's order), then every language with a catalogue, by code."""
    languages = {SOURCE: _read(LOCALES / f"{DOMAIN}.pot", source=True)}
    for path in sorted(LOCALES.glob(f"*/LC_MESSAGES/{DOMAIN}.po")):
        languages[code_of(path.parents[1].name)] = _read(path, source=False)
    return languages


LANGUAGES = _load()
ENGLISH = LANGUAGES[SOURCE]
LANGS = tuple(LANGUAGES)


def known(key: str) -> bool:
    return key in ENGLISH.sentences


def _forms(lang: str, key: str) -> tuple[Language, tuple[str, ...]]:
    """``key``'s forms in ``lang``, else in English (a KeyError where no language has it: a typo in the code)."""
    language = LANGUAGES.get(lang, ENGLISH)
    if key not in language.sentences:
        language = ENGLISH
    return language, language.sentences[key]


def t(lang: str, key: str, **values: object) -> str:
    """The sentence ``key`` in ``lang``, its ``{names}`` filled in from ``values``. A sentence with plural
    forms takes the one its ``count`` calls for in that language."""
    language, forms = _forms(lang, key)
    if len(forms) == 1:
        form = forms[0]
    else:
        count = values.get("count")
        if not isinstance(count, int):
            raise TypeError(f"{key!r} has plural forms: its count is needed to pick one")
        form = forms[language.plural(count)]
    if not language.rtl:
        return form.format(**values)
    said = _ISOLATING.vformat(form, (), values)
    # Only values ("{number}. {name}: {about}"): isolated, they leave no strong letter to set the direction.
    return said if _LETTER_OUTSIDE_VALUES.search(form) else RLM + said


def listing(lang: str, items: list[str]) -> str:
    """``items`` listed as ``lang`` lists them ("A, B and C", "A، B و C", "A、B和C"), by CLDR's patterns."""
    return format_list(items, style="standard", locale=LANGUAGES.get(lang, ENGLISH).locale) if items else ""


def rtl(lang: str) -> bool:
    """True for a language written right to left (Arabic, Persian): the page turns its layout round."""
    return LANGUAGES.get(lang, ENGLISH).rtl


def profile_code(lang: str) -> str | None:
    """The code Telegram's profile calls take for ``lang``: two letters (``pt`` for ``pt-br``); None for
    English, the default every other client sees."""
    return None if lang == SOURCE else lang.split("-")[0]


LANG_NAMES = {lang: t(lang, "lang_name") for lang in LANGS}  # each in its own words, for /lang


def page_words() -> Mapping[str, Mapping[str, str]]:
    """What the Mini App's page says, in every language, by its own keys (without ``page_``), with the
    ``{names}`` left for the page to fill in, and ``$dir`` (no key has a ``$``): ``rtl`` or ``ltr``, the
    way the page lays itself out. The bot hands it to the page (bot/webapp/api.py)."""
    keys = [key for key in ENGLISH.sentences if key.startswith(PAGE)]
    return {lang: {"$dir": "rtl" if rtl(lang) else "ltr", **{key[len(PAGE):]: _forms(lang, key)[1][0] for key in keys}}
            for lang in LANGS}


def pick_lang(chosen: str | None, language_code: str | None) -> str:
    """The user's /lang choice, else their client's language if we speak it, else English.

    Telegram reports an IETF tag (``zh-hans``, ``pt-br``, ``fa-ir``, ``uz-latn``): the whole tag when we
    have it, else its first part, else the one language we have of that first part (``pt`` is served
    ``pt-br``).
    """
    if chosen in LANGS:
        return chosen
    tag = (language_code or "").lower().replace("_", "-")
    first = tag.split("-")[0]
    if tag in LANGS or first in LANGS:
        return tag if tag in LANGS else first
    return next((lang for lang in LANGS if lang.split("-")[0] == first), SOURCE) if first else SOURCE


def error_text(lang: str, code: str, engine_message: str) -> str:
    """The user-facing sentence for an error code; never an internal detail.

    The engine's own image messages are written for users and name the
    actual sizes, so English uses them; other languages use the catalogue,
    whose sentences of sizes are said with their numbers (``Failed.values``)
    before they come here: one that needs numbers it was not given (a
    worker of an older release sends none) is said in the engine's English.
    """
    if code in IMAGE_ERROR_CODES:
        if lang == SOURCE:
            return engine_message
        try:
            return t(lang, code)
        except KeyError:
            return engine_message
    return t(lang, code) if known(code) else t(lang, "internal")
