"""Full size: a result sent again as a file, uncompressed (Telegram recompresses photos)."""
from bot.flow.answering import Shape
from bot.flow.kinds.base import Kind


class File(Kind):
    name = "file"
    shape = Shape.FILES
    lite = False  # a file is asked for its detail
