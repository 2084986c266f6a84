"""How a drawing process lives and dies with the process that started it.

Both kinds of worker need it: the bot's own worker processes (their parent
is the bot) and the pool processes of ``animebot worker`` (their parent is
Celery's main process).
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux), instead of leaving it to
    finish a photo nobody will send and to write into the next run's log; exit now if the parent
    (``parent_pid``) is already gone."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before prctl took effect
        os._exit(0)
