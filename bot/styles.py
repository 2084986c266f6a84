"""Which styles this bot offers, and what version of a result each one makes.

Read from the model store once at start: a style appears in keyboards and
commands only if its weights are installed. The cache key's version names
everything that changes a result's bytes (the model file, the size, the
format and quality), so changing any of them never serves a stale result.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from bot.words.catalogue import LANGS, known, listing, t
from inference.engine import face_style_for
from inference.pipeline import ConvertSettings
from weights.registry import ModelEntry
from weights.store import ModelStore, WeightsError, default_style

# Bump when the pipeline's code changes its output (2: panoramas kept tall; 3: face crops;
# 4: face models' tight 384 px crops), so no result drawn before is served again; or when results
# stored before cannot be trusted (5: a scaled-out bot stored one style's drawing under another's key).
PIPELINE_REVISION = 5
# How menus order the styles: those that draw whole scenes first, then line art, then the face styles
# (made for aligned face crops: at their best on selfies only); registry order within each.
LOOK_ORDER = ("scene", "line_art", "face")


@dataclass(frozen=True)
class Styles:
    entries: tuple[ModelEntry, ...]
    default: str
    settings: ConvertSettings
    faces_by: dict[str, str] = field(default_factory=dict)  # style -> the installed style that draws its faces
    sample: Path | None = None  # the registry's sample photo, when installed: /style previews every style on it
    sample_sha256: str | None = None
    others: tuple[ModelEntry, ...] = ()  # the installed models that are no style (detector, HD, sample): /about credits them

    @classmethod
    def from_store(cls, store: ModelStore, preferred: str | None, settings: ConvertSettings) -> "Styles":
        default = default_style(store)  # refuses a store with no style at all
        installed = tuple(store.installed("style"))
        names = [e.name for e in installed]
        if preferred and preferred not in names:
            raise WeightsError(f"ANIMEBOT_STYLE={preferred!r} is not installed; installed: {', '.join(names)}")
        sample = next(iter(store.installed("sample")), None)
        return cls(installed, preferred or default, settings, {n: face_style_for(store, n) for n in names},
                   store.path(sample) if sample else None, sample.sha256 if sample else None,
                   tuple(e for e in store.installed() if e.kind not in ("style", "part")))

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    @property
    def ordered(self) -> list[str]:
        """The styles in the order menus, keyboards and preview sheets show them (:data:`LOOK_ORDER`)."""
        rank = {look: i for i, look in enumerate(LOOK_ORDER)}
        return [e.name for e in sorted(self.entries, key=lambda e: rank.get(e.look, len(rank)))]

    def display(self, name: str, lang: str) -> str:
        """A model's short name for users, in ``lang``: the catalogue's ``style_name_<name>``, else (a model
        of the operator's own manifest, which no catalogue names) the manifest's label."""
        if known(f"style_name_{name}"):
            return t(lang, f"style_name_{name}")
        return next((e.label for e in (*self.entries, *self.others) if e.name == name), name)

    def describe(self, name: str, lang: str) -> str:
        """A model's one line for users, in ``lang`` (``style_about_<name>``), else its label."""
        return t(lang, f"style_about_{name}") if known(f"style_about_{name}") else self.display(name, lang)

    def resolve(self, name: str | None) -> str | None:
        """The installed style called ``name``, the default for None, else None. A style is called by its id
        (``hayao``) or by its name in any language the bot speaks (``Хаяо``, ``هایائو``, ``Anime face``): the
        buttons show the name, so a user types the name. Case and runs of spaces do not matter."""
        if name is None:
            return self.default
        wanted = " ".join(name.split()).casefold()
        return next((n for n in self.names if wanted == n.casefold()), None) or next(
            (n for n in self.names if wanted in (" ".join(c.split()).casefold() for c in self.called(n))), None)

    def called(self, name: str) -> tuple[str, ...]:
        """Every name a style goes by: its id, then its name in each language the bot speaks."""
        return (name, *(self.display(name, lang) for lang in LANGS))

    def listed(self, lang: str) -> str:
        """Every style, in menu order, as ``name (id)`` in ``lang``, listed the way that language lists."""
        return listing(lang, [f"{self.display(n, lang)} ({n})" for n in self.ordered])

    def settings_for(self, prefs: dict[str, int]) -> ConvertSettings:
        """The bot's settings with a user's or group's /settings choices applied."""
        return replace(
            self.settings,
            faces=bool(prefs.get("faces", self.settings.faces)),
            strength=int(prefs.get("strength", self.settings.strength)),
            keep_colours=bool(prefs.get("keep_colours", self.settings.keep_colours)),
        )

    def entry(self, name: str) -> ModelEntry:
        return next(e for e in self.entries if e.name == name)

    def version(self, name: str, s: ConvertSettings) -> str:
        """Names everything that makes the result's bytes, down to the model that draws its faces:
        installing ``jp_face`` must not serve faces drawn before it."""
        model = self._digest(name)
        face_style = self.faces_by.get(name, name)
        if s.faces and face_style != name:
            model += "+" + self._digest(face_style)
        options = f"f{int(s.faces)}s{s.strength}k{int(s.keep_colours)}" + ("a" if s.avatar else "")
        if 0 < s.strength < 100:  # 2: a grey blended takes the other side's hue (inference/colour.py)
            options += "b2"
        if s.cut:  # which cut: the segmentation model's file, or the oval without it
            cutter = self.cutter
            options += f"c{s.cut}-" + ((cutter.sha256 or cutter.git_sha1 or "local")[:12] if cutter else "oval")
        return f"r{PIPELINE_REVISION}-{model}-{s.max_side}-{s.fmt}{s.jpeg_quality}-{options}"

    @property
    def cutter(self) -> ModelEntry | None:
        """The installed person segmentation stickers are cut with; None: they are cut as an oval."""
        return next((e for e in self.others if e.kind == "segmenter"), None)

    @property
    def upscaler(self) -> ModelEntry | None:
        """The HD model (Real-CUGAN 2x), if installed: without it there is no HD."""
        return next((e for e in self.others if e.kind == "upscaler"), None)

    def _digest(self, name: str) -> str:
        entry = self.entry(name)
        return (entry.sha256 or entry.git_sha1 or "local")[:12]
