"""An avatar: a square around the largest face, sent to look at and as the file to set."""
from bot.flow.answering import Shape
from bot.flow.kinds import presets
from bot.flow.kinds.base import Kind
from inference.pipeline import ConvertSettings


class Avatar(Kind):
    name = "avatar"
    shape = Shape.PICTURE_AND_FILE

    def settings(self, base: ConvertSettings) -> ConvertSettings:
        return presets.avatar(base)
