"""The errors of drawing that a user is shown as they are: a photo we cannot read, a model we
cannot load (each an :class:`~base.errors.AnimebotError`, with its message and ``code``)."""
from __future__ import annotations

from storage.errors import AnimebotError


class ImageError(AnimebotError):
    """The input is not an image we can convert (corrupt, too big, too small...)."""

    code = "bad_image"


class ModelError(AnimebotError):
    """A model file is missing, corrupt, or not the architecture we expect."""

    code = "bad_model"
