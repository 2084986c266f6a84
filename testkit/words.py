"""The sentences as a translator left them in bot/words/locales/, read with Babel apart from the bot's own
reader (bot/words/catalogue.py), so that a test compares what the bot says with the files themselves."""
from __future__ import annotations

from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po

LOCALES = Path(__file__).resolve().parents[1] / "bot" / "words" / "locales"
TEMPLATE = LOCALES / "animebot.pot"


def read(path: Path) -> Catalog:
    with path.open("rb") as file:
        return read_po(file, abort_invalid=True)


def sentences(lang: str) -> dict[str, object]:
    """Each key's sentence in ``lang`` ("en": the template's English), a tuple where it has plural forms."""
    english = lang == "en"
    folder = next((p.name for p in LOCALES.iterdir() if p.name.lower().replace("_", "-") == lang), lang)  # pt-br: pt_BR
    catalog = read(TEMPLATE if english else LOCALES / folder / "LC_MESSAGES" / "animebot.po")
    return {m.context: m.id if english else m.string for m in catalog if m.context}
