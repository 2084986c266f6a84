"""One drawing of a request, got: the words the flow, the kinds of job and every way of answering share."""
from __future__ import annotations

from dataclasses import dataclass

from bot.flow.requests import Source
from storage.cache import CachedResult


@dataclass(frozen=True)
class Drawn:
    """One source's result in one style, and how it was got."""

    source: Source
    sha256: str
    style: str
    result: CachedResult
    from_cache: bool
    animated: bool = False  # only the first frame of an animated picture was drawn
    units: int = 1  # photos of the quota it counts as (a clip: one per second)
    notes: tuple[str, ...] = ()  # a clip's: "trimmed" (cut to the longest drawn), "silent" (its sound was lost)

    @classmethod
    def of(cls, source: Source, sha256: str, style: str, result: CachedResult, from_cache: bool = True,
           units: int = 1) -> Drawn:
        """``result``, with what its drawing said beside it (kept with it in the cache): a repeat of an
        animation, or of a clip cut short, is told so as its first answer was."""
        return cls(source, sha256, style, result, from_cache, animated="animated" in result.notes, units=units,
                   notes=tuple(note for note in result.notes if note != "animated"))

    @property
    def kind(self) -> str:
        return self.source.kind
