"""The stores of what the bot knows of photos, results and users, made together on one database.

Each store has one job and one or two tables (storage/cache.py, holdings.py,
uploads.py, users.py, counters.py, blocked.py). The flow, the chat and the Mini App take
this bundle rather than five arguments, and each call reaches for the one
store it needs; :meth:`Stores.on` is the one place they are made.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage.blocked import Blocked
from storage.cache import ResultCache
from storage.counters import Counters
from storage.database import Database
from storage.holdings import Holdings
from storage.uploads import Uploads
from storage.users import UserSettings


@dataclass(frozen=True)
class Stores:
    results: ResultCache  # drawn results, their files and Telegram's ids of them
    holdings: Holdings  # who asked for which photo and result
    uploads: Uploads  # which photo each Telegram file holds
    users: UserSettings  # each user's and chat's choices, and their last photo
    counters: Counters  # /stats' counts
    blocked: Blocked  # the users an admin blocked (/block); Blocked.load() reads them at start

    @classmethod
    def on(cls, db: Database, results_dir: Path, max_bytes: int = 2 << 30) -> Stores:
        """Every store on ``db``, with the result files under ``results_dir``, capped at ``max_bytes``."""
        uploads = Uploads(db)
        return cls(ResultCache(db, results_dir, max_bytes), Holdings(db), uploads, UserSettings(db, uploads),
                   Counters(db), Blocked(db))
