"""`animebot` run as a person runs it: a separate process on a data dir, this checkout's code."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testkit.bot_harness import REPO


def animebot(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("animebot")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "bot"]
    env = {**os.environ, "ANIMEBOT_HOME": str(home), "PYTHONPATH": str(REPO)}  # this checkout's code, not the venv's
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
