"""Whether a process is running, by its id: what the health check asks of the bot's heartbeat
(bot/root/life.py), and what clearing a dead drawing process's clip folders asks of its name
(inference/scratch.py)."""
from __future__ import annotations

import os


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's
        return True
    return True
