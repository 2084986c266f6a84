"""Which styles this bot offers, and what version of a result each one makes.

Read from the model store once at start: a style appears in keyboards and
commands only if its weights are installed. The cache key's version names
everything that changes a result's bytes (the model file, the size, the
format and quality), so changing any of them never serves a stale result.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from inference.engine import face_style_for
from inference.pipeline import ConvertSettings
from weights.registry import ModelEntry
from weights.store import ModelStore, WeightsError, default_style

PIPELINE_REVISION = 2  # bump when the pipeline's code changes its output (2: panoramas kept tall)


@dataclass(frozen=True)
class Styles:
    entries: tuple[ModelEntry, ...]
    default: str
    settings: ConvertSettings
    faces_by: dict[str, str] = field(default_factory=dict)  # style -> the installed style that draws its faces

    @classmethod
    def from_store(cls, store: ModelStore, preferred: str | None, settings: ConvertSettings) -> "Styles":
        default = default_style(store)  # refuses a store with no style at all
        installed = tuple(store.installed("style"))
        names = [e.name for e in installed]
        if preferred and preferred not in names:
            raise WeightsError(f"ANIMEBOT_STYLE={preferred!r} is not installed; installed: {', '.join(names)}")
        return cls(installed, preferred or default, settings, {n: face_style_for(store, n) for n in names})

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def label(self, name: str) -> str:
        return next((e.label for e in self.entries if e.name == name), name)

    def resolve(self, name: str | None) -> str | None:
        """The installed style called ``name`` (any case), the default for None, else None."""
        if name is None:
            return self.default
        wanted = name.strip().lower()
        return next((n for n in self.names if n.lower() == wanted), None)

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
        options = f"f{int(s.faces)}s{s.strength}k{int(s.keep_colours)}"
        return f"r{PIPELINE_REVISION}-{model}-{s.max_side}-{s.fmt}{s.jpeg_quality}-{options}"

    def _digest(self, name: str) -> str:
        entry = self.entry(name)
        return (entry.sha256 or entry.git_sha1 or "local")[:12]
