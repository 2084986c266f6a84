"""What every room of tests/ shares: the real models and photos from ../shared, a tiny random
generator for the logic that must be tested even without them, Redis; and the marks and order of
every test. A fixture only one room uses is in that room's conftest.py (tests/webapp/); what tests
and benches share that is not a fixture is in testkit/.

A clone on its own (no ../shared beside it) must pass: everything that reads ../shared does so
in a fixture that skips with the reason, never at import. Tests are marked ``real_model`` and
``slow`` here, at collection (see :func:`pytest_collection_modifyitems`), so that
``pytest -m "not slow"`` is a quick development loop.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

# One drawing thread per test process (set before torch is imported, and inherited by every bot,
# worker and child started here). pytest runs four processes on our two cores (pyproject's -n 4);
# with two threads each, the engines' threads outnumber the cores and spin waiting for one
# another: the suite cost 834 CPU-s that way against 692 on one thread (docs/benchmarks.md, "The
# test suite"). A test that compares pixels across processes still sets its own count.
os.environ.setdefault("ANIMEBOT_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch

from bot.chat import repeats
from inference.backends import TorchStylizer
from inference.generator import Generator
from testkit.bot_harness import start_bot
from testkit.bot_in_process import bot_in_process, serving
from testkit.models import (CUGAN_BIN, CUGAN_PARAM, CUTE_FILE, DET_FILE, HAYAO_FILE, MODELS, SELFIE_FILE, STYLE_NAMES,
                            TINY_WIDTHS)
from testkit.pictures import PHOTOS, photo_paths
from testkit.redis_server import RedisServer, have_redis_server
from weights.store import ModelStore

# This file's fixtures that read ../shared (each skips with the reason where it is absent). A test that
# uses one, directly or through another fixture, needs ../shared.
SHARED_FIXTURES = frozenset({"hayao_file", "det_file", "selfie_file", "photos", "shared_photo", "real_store",
                             "styles_store"})
# A test that can start the bot (a process, or in this one): its module imports a starter, and it has a model to give
# the bot (no bot starts without a style). Each start costs seconds.
BOT_STARTERS = (start_bot, serving, bot_in_process)
MODEL_FIXTURES = SHARED_FIXTURES | {"tiny_store"}
# What a test costs, dearest first, as its marks and fixtures show it (see :func:`kind`).
KINDS = ("a bot on the real models", "the real models", "slow", "quick")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by what it uses, so that a new test is marked without anyone remembering, and
    without a list of modules to keep:

    - ``real_model``: it needs ../shared (and is skipped where that is absent);
    - ``slow``: it needs ../shared (a real model loads and draws real photos for seconds), or starts
      the bot. A module or test that is long for a reason no fixture shows (a codec, a compiler,
      processes of its own) says so itself, with ``pytest.mark.slow`` and the reason beside it.
      ``pytest -m "not slow"`` runs the rest.

    Then order the modules by their dearest kind of test (:data:`KINDS`), keeping the collection's
    order (folder by folder) within a kind and within a module. pyproject's --no-loadscope-reorder
    makes the test processes take modules in that order (xdist would otherwise go by the number of
    tests in a module), so that the long modules are all under way before the quick ones, and none
    is started last while the other processes have run out of work.
    """
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))  # every fixture the test needs, directly or not
        if uses & SHARED_FIXTURES:
            item.add_marker(pytest.mark.real_model)
        if uses & SHARED_FIXTURES or starts_bot(item, uses):
            item.add_marker(pytest.mark.slow)
    dearest: dict[Path, int] = {}
    for item in items:
        dearest[item.path] = min(dearest.get(item.path, len(KINDS)), kind(item))
    items.sort(key=lambda item: dearest[item.path])  # a stable sort


def starts_bot(item: pytest.Item, uses: set[str]) -> bool:
    """Whether ``item`` (using the fixtures ``uses``) can start the bot: see :data:`BOT_STARTERS`."""
    module = getattr(item, "module", None)
    imported = vars(module).values() if module is not None else ()
    return bool(uses & MODEL_FIXTURES) and any(v is s for v in imported for s in BOT_STARTERS)


def kind(item: pytest.Item) -> int:
    """The index in :data:`KINDS` of what ``item`` costs."""
    real = item.get_closest_marker("real_model") is not None
    if real and starts_bot(item, set(getattr(item, "fixturenames", ()))):
        return 0
    if real:
        return 1
    return 2 if item.get_closest_marker("slow") is not None else 3


@pytest.fixture(autouse=True)
def presses_on_purpose(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test presses a button again at machine speed, where a person pressing it again on purpose takes
    seconds: the bots served in this process answer every press that is not still being answered. The
    double-tap window (bot/chat/repeats.py) is tested on its own, and sets it back."""
    monkeypatch.setattr(repeats, "REPEAT_S", 0.0)


def _need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"real model file {path} is absent (it lives in ../shared/models on CI)")
    return path


@pytest.fixture(scope="session")
def hayao_file() -> Path:
    return _need(HAYAO_FILE)


@pytest.fixture(scope="session")
def selfie_file() -> Path:
    return _need(SELFIE_FILE)


@pytest.fixture(scope="session")
def det_file() -> Path:
    return _need(DET_FILE)


@pytest.fixture(scope="session")
def photos() -> list[Path]:
    found = photo_paths()
    if not found:
        pytest.skip(f"real photos are absent (expected in {PHOTOS})")
    return found


@pytest.fixture(scope="session")
def shared_photo(photos: list[Path]) -> Callable[[str], bytes]:
    """Reads one real photo by name: for tests where that photo (its faces, its size) is the point."""
    def read(name: str) -> bytes:
        return (PHOTOS / name).read_bytes()  # a missing name among present photos is a bug: no skip

    return read


@pytest.fixture(scope="session")
def real_store(tmp_path_factory: pytest.TempPathFactory, hayao_file: Path) -> ModelStore:
    """A data dir with Hayao (and the cute style and face detector, when present), shared by readers."""
    store = ModelStore(tmp_path_factory.mktemp("home"))
    store.import_file(hayao_file)
    for optional in (CUTE_FILE, DET_FILE):
        if optional.is_file():
            store.import_file(optional)
    return store


@pytest.fixture(scope="session")
def hd_store(tmp_path_factory: pytest.TempPathFactory, hayao_file: Path) -> ModelStore:
    """A data dir with Hayao to draw with and Real-CUGAN 2x to double the drawings (HD). Shared by readers."""
    for path in (CUGAN_PARAM, CUGAN_BIN):
        _need(path)
    store = ModelStore(tmp_path_factory.mktemp("hd-home"))
    for path in (hayao_file, CUGAN_PARAM, CUGAN_BIN):
        store.import_file(path)
    return store


@pytest.fixture(scope="session")
def styles_store(tmp_path_factory: pytest.TempPathFactory) -> ModelStore:
    """A data dir with every model in ../shared/models imported, as ``weights import`` a folder
    does: all seven styles, the detector. Shared by readers."""
    from weights.registry import builtin_entries

    wanted = [MODELS / e.filename for e in builtin_entries() if e.name in STYLE_NAMES]
    for path in wanted:
        _need(path)
    store = ModelStore(tmp_path_factory.mktemp("styles-home"))
    store.import_folder(MODELS)
    return store


@pytest.fixture
def tiny_model() -> TorchStylizer:
    """A randomly initialised, very narrow generator: real code path, milliseconds per image."""
    torch.manual_seed(0)
    net = Generator(TINY_WIDTHS).eval()
    return TorchStylizer("tiny", "eager", net)


@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> ModelStore:
    """A data dir whose only style is the tiny generator, installed as ``tiny`` the way
    ``animebot prune`` installs a lite style (``models/local.json``), with its ONNX export made
    in advance: worker processes load it in a fraction of a second, without ../shared.
    Shared by the session, so its users only read it."""
    from inference.engine import exported_onnx
    from inference.prune import save_lite

    store = ModelStore(tmp_path_factory.mktemp("tiny-home"))
    torch.manual_seed(0)
    entry = save_lite(store, store.entry("hayao"), "tiny", Generator(TINY_WIDTHS).eval(), 0.05)
    exported_onnx(store, entry, store.path(entry))
    return ModelStore(store.home)  # as a fresh process finds it


@pytest.fixture(scope="session")
def redis_installed() -> None:
    """For a test that runs redis-server itself: skipped, with the way to install it, where it is absent."""
    if not have_redis_server():
        pytest.skip("redis-server is not installed (apt-get install redis-server)")


@pytest.fixture(scope="module")
def redis_server(redis_installed: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A running, password-protected redis-server for the test module, stopped after it."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.kill()

