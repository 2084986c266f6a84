"""A sticker: the photo's person drawn and cut out, into the user's own set (bot/chat/stickers.py)."""
from bot.flow.answering import Shape
from bot.flow.kinds import presets
from bot.flow.kinds.base import Kind
from inference.pipeline import ConvertSettings


class Sticker(Kind):
    name = "sticker"
    shape = Shape.STICKER

    def settings(self, base: ConvertSettings) -> ConvertSettings:
        return presets.sticker(base)
