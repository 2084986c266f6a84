"""All styles: one photo drawn in every other style, answered as an album named by style."""
from bot.flow.answering import STYLES
from bot.flow.kinds.base import Kind


class AllStyles(Kind):
    name = "styles"
    shape = STYLES
    lite = False  # the user asked to compare the styles themselves
