"""What the flow works with, opened at start (bot/root/state.py) and handed to the runner as one.

The runner and the parts it makes (the results and their orders, the recovery) each use some of
these; one bundle keeps their constructors to the few things that differ between them.
"""
from __future__ import annotations

from dataclasses import dataclass

from telegram import Bot

from bot.drawing.pool import Pool
from bot.flow.fetching import Downloads
from bot.styles import Styles
from storage.journal import Journal
from storage.stores import Stores


@dataclass(frozen=True)
class Equipment:
    """Telegram, the workers, the stores, the journal and the installed styles."""

    bot: Bot  # the Bot API: photos downloaded, a button's spinner stopped, a recovered job's apology
    pool: Pool  # the workers (bot/drawing/pool.py)
    stores: Stores  # results, holdings, uploads, users' settings, counters (storage/stores.py)
    journal: Journal  # updates and jobs (storage/journal.py)
    styles: Styles  # the installed styles, and the version of each one's results
    downloads: Downloads  # users' files, from Telegram, within the operator's size limit
