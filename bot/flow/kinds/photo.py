"""A photo, an album's photos, or a clip, drawn in one style and shown as itself: the plain kind.

A clip is a photo's kind too: whether a file moves is known only once its bytes
are in (a GIF sent as a file), so its source says so, not its request.
"""
from bot.flow.kinds.base import Kind


class Photo(Kind):
    name = "photo"
