"""All styles: one photo drawn in every other style, answered as an album named by style."""
from collections.abc import Sequence

from bot.flow.answering import Shape
from bot.flow.kinds.base import Kind


class AllStyles(Kind):
    name = "styles"
    shape = Shape.STYLES
    lite = False  # the user asked to compare the styles themselves
    in_styles = True

    def aim(self, style: str, album: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
        """Every other style, as an album: the first is the request's own style."""
        return (album[0] if album else None), tuple(album)
