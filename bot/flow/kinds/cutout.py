"""A cut-out: the photo's person with no background, as a transparent PNG file."""
from bot.flow.answering import Shape
from bot.flow.kinds import presets
from bot.flow.kinds.base import Kind
from inference.pipeline import ConvertSettings


class Cutout(Kind):
    name = "cutout"
    shape = Shape.FILES
    lite = False  # a file is asked for its detail

    def settings(self, base: ConvertSettings) -> ConvertSettings:
        return presets.cutout(base)
