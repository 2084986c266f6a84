"""A pickle as an attacker would plant it on the broker, for the tests that show none is ever read."""
from __future__ import annotations

from pathlib import Path


class Opens:
    """Unpickled, it creates ``path``: what a pickle planted on the broker would run on a worker that accepted it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, ...]:
        return open, (str(self.path), "w")
