"""What the Mini App's API reads, and asks of the rest of the bot: its own few parts, handed over by the
composition root (bot/root/life.py), so that the page depends on no other room's view of the bot."""
from __future__ import annotations

from dataclasses import dataclass

from bot.drawing.pool import Pool
from bot.flow.access import Access
from bot.flow.blocking import Blocking
from bot.flow.runner import JobRunner
from bot.styles import Styles
from inference.pipeline import ConvertSettings
from storage.buttons import ResultButtons
from storage.journal import Journal
from storage.stores import Stores


@dataclass(frozen=True)
class PageNeeds:
    runner: JobRunner  # the page's drawings and sendings go in as requests, like the chat's
    journal: Journal  # the jobs the page follows
    pool: Pool  # whether drawing goes on at all (a job "stalled")
    stores: Stores  # results, uploads, users' settings
    buttons: ResultButtons[ConvertSettings]  # which results a user was shown, and with what settings
    styles: Styles
    access: Access  # the allowlist and the rates the chat has too
    hd: bool  # HD is on and its model installed
    blocking: Blocking  # the admin view's blocked users, and its Unblock (bot/webapp/admin.py)
