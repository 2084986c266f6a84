"""An earlier release of this repository, beside this one: what a rolling upgrade runs for a while.

Its tree is unpacked from git (``git archive``) and run with this checkout's virtualenv, as the bot's and
the workers' images of two releases share their dependencies; the harnesses' ``code=`` runs it.
"""
from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from testkit.bot_harness import REPO

# The release before HD: its orders and results are format 3, and it reads nothing else.
BEFORE_HD = "075b66a"
# The release before claim checks: its orders carry their photo (formats 3 to 5), and it reads up to 5.
BEFORE_CLAIMS = "6df318f"


def release_tree(commit: str, dest: Path) -> Path:
    """The repository's files at ``commit``, unpacked into ``dest`` (made if need be); skips, saying why,
    where this checkout has no git history that holds it (a copy of the tree without .git)."""
    made = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"release {commit} is not in this checkout's git history: {made.stderr.decode().strip()}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(made.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest
