"""The temporary folders a drawing process writes a clip to, and clearing what a killed one left.

A drawn clip is encoded to a file (its index must be rewritten in place), with the user's sound
in it. The folder is removed when the clip is done, or fails; a process killed mid-clip (kill -9,
the OOM killer, a time limit) leaves it, so each folder is named after its process, and a drawing
process that starts removes those of processes that are gone.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from inference.processes import running

PREFIX = "animebot-clip-"  # then the process id, a dash, and tempfile's own letters


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    """A folder of this process's own, removed when cleaned up (or by :func:`sweep` once it is dead)."""
    return tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-")


def sweep() -> int:
    """Remove the folders of drawing processes that are no longer running; return how many."""
    swept = 0
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        pid = folder.name[len(PREFIX):].split("-", 1)[0]
        if folder.is_dir() and pid.isdigit() and not running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            swept += 1
    return swept
