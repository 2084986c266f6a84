"""An earlier release of this repository, beside this one: what a rolling upgrade runs for a while.

Two ways to run one. :func:`release_tree` unpacks its files from git (``git archive``), to be run with this
checkout's interpreter and its tree on PYTHONPATH. :func:`installed_release` installs it, as a release is
installed, into a virtualenv of its own, whose ``animebot`` entry point the harnesses' ``code=`` then runs:
its own copy of ``bot``, ``inference``, ``storage`` and ``weights`` (and its registry, its page, its
sentences), never this tree's. Its third-party packages are this virtualenv's, reached through a ``.pth``
file, as the bot's and the workers' images of two releases share their dependencies: nothing is downloaded.
"""
from __future__ import annotations

import contextlib
import fcntl
import io
import os
import subprocess
import sys
import sysconfig
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The release before HD: its orders and results are format 3, and it reads nothing else.
BEFORE_HD = "075b66a"
# The release before claim checks: its orders carry their photo (formats 3 to 5), and it reads up to 5.
BEFORE_CLAIMS = "6df318f"
INSTALLED = "installed"  # the file a finished install leaves in its virtualenv, naming the commit


def release_tree(commit: str, dest: Path) -> Path:
    """The repository's files at ``commit``, unpacked into ``dest`` (made if need be); skips, saying why,
    where this checkout has no git history that holds it (a copy of the tree without .git)."""
    made = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"release {commit} is not in this checkout's git history (a copy without it, such as an "
                    f"unpacked tarball, cannot run an earlier release): {made.stderr.decode().strip()}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(made.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def installed_release(commit: str, cache: Path) -> Path:
    """A virtualenv under ``cache`` with the release at ``commit`` installed in it (``pip install``, not
    editable, from its own tree), made once and reused by whoever asks next (other test processes
    included: they wait for the one making it). Skips, saying why, where the commit is not in this
    checkout's history."""
    venv = cache / f"animebot-{commit}"
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f"animebot-{commit}.lock"):
        if (venv / INSTALLED).is_file():
            return venv
        tree = release_tree(commit, cache / f"animebot-{commit}-tree")
        subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              capture_output=True, text=True, check=True).stdout.strip()
        # A plain path, not this virtualenv's own .pth files: those would put this checkout's editable
        # install of animebot ahead of the release's.
        (Path(site) / "_this_checkout_s_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # --ignore-installed: pip would otherwise take this checkout's animebot 0.1.0, seen through the
        # .pth, for the release already installed.
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                               "--no-index", "--ignore-installed", "--disable-pip-version-check", str(tree)],
                              capture_output=True, text=True, env=env, cwd=cache)
        assert done.returncode == 0, f"installing release {commit} failed:\n{done.stdout}{done.stderr}"
        found = subprocess.run([str(python), "-c", "import bot; print(bot.__file__)"], capture_output=True, text=True,
                               env=env, cwd=cache).stdout
        assert found.startswith(site), f"release {commit}'s virtualenv imports bot from {found}, not its own"
        (venv / INSTALLED).write_text(commit + "\n")
    return venv


def is_virtualenv(code: Path) -> bool:
    """Whether ``code`` is a virtualenv (:func:`installed_release`'s) rather than a tree of source files."""
    return (code / "pyvenv.cfg").is_file()


def command(code: Path, sub: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run ``animebot SUB`` from ``code``: a virtualenv's own entry
    point, with no PYTHONPATH that could reach this tree; or a tree's ``python -m bot``, with it on PYTHONPATH."""
    if is_virtualenv(code):
        return [str(code / "bin" / "animebot"), sub], {k: v for k, v in env.items() if k != "PYTHONPATH"}
    return [sys.executable, "-m", "bot", sub], {**env, "PYTHONPATH": str(code)}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def session_release(tmp_path_factory: pytest.TempPathFactory, commit: str) -> Path:
    """:func:`installed_release` made once a test session, in the session's own temporary folder: the one
    every test process of ``pytest -n`` shares (each has a folder of its own inside it)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return installed_release(commit, root / "releases")
