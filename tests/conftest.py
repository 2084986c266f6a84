"""Shared fixtures: the real models and photos from ../shared, a tiny random generator for the
logic that must be tested even without them, and synthetic photos where which photo it is does
not matter.

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
from testkit.models import CUTE_FILE, DET_FILE, HAYAO_FILE, MODELS, SELFIE_FILE, STYLE_NAMES, TINY_WIDTHS
from testkit.pictures import PHOTOS, photo_paths
from testkit.redis_server import RedisServer, free_port, have_redis_server
from testkit.webapp import QUOTA, URL, App
from weights.store import ModelStore

# Fixtures that read ../shared. ``detector`` and ``face_store`` are tests/test_faces.py's, which
# load the real face detector; they are named here so those tests are marked like the rest.
SHARED_FIXTURES = frozenset({"hayao_file", "real_store", "photos", "shared_photo", "detector", "face_store",
                             "styles_store", "selfie_file"})
# A test that can start the bot (a process, or in this one): its module imports a starter, and it has a model to give
# the bot (no bot starts without a style). Each start costs seconds.
BOT_STARTERS = (start_bot, serving, bot_in_process)
MODEL_FIXTURES = SHARED_FIXTURES | {"tiny_store"}
# Modules whose every test runs for long though it needs neither: each starts processes, runs a
# codec or compiles a model for about a second (pytest --durations=0 -m "not slow" finds them).
LONG_MODULES = frozenset({
    "test_clips.py",  # encodes and decodes real video and sound with PyAV
    "test_pipeline.py",  # traces and exports generators to TorchScript and ONNX
    "test_pool.py",  # starts and kills worker processes
    "test_celery_pool.py",  # runs Redis and Celery worker processes
    "test_openvino.py",  # compiles OpenVINO models
    "test_prune.py",  # distils a lite generator
    "test_quantize.py",  # quantizes and compiles a generator
    "test_webapp_page.py",  # Chromium on a bot that test_webapp.py's fixture starts
})
# Single tests like them elsewhere, as file::name.
LONG_TESTS = frozenset({
    "test_bench.py::test_speed_bench_prints_its_table_on_a_tiny_generator",  # four backends, in a subprocess
    "test_bot_units.py::test_run_without_a_token_exits_with_one_line",  # a bot process, though it stops at once
    "test_speed.py::test_batched_faces_give_the_pixels_drawn_one_at_a_time",
    "test_faces.py::test_keep_colours_holds_the_photos_mean_chroma",
    "test_faces.py::test_strength_zero_is_the_photo_and_full_is_the_style",
    "test_imageio.py::test_a_phone_sized_jpeg_is_decoded_at_a_reduced_scale_for_a_small_result",
})


# The modules that take longest with ../shared, longest first, as measured with -n 4 (wall s):
# scale_out 142, bot_gallery 113, bot_clips 98, bench 58, then 40-52 each. They are collected
# before the rest, and pyproject's --no-loadscope-reorder makes the test processes take modules in
# that order (xdist would otherwise go by the number of tests in a module), so that no long module
# is started last while the other processes have run out of work.
LONGEST_FIRST = ("test_scale_out.py", "test_bot_gallery.py", "test_bot_clips.py", "test_bench.py",
                 "test_styles.py", "test_bot_stops.py", "test_bot_e2e.py", "test_cli.py", "test_clips.py",
                 "test_faces.py", "test_bot_durable.py", "test_pipeline.py", "test_quantize.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by what it uses, so that a new test is marked without anyone remembering:

    - ``real_model``: it needs ../shared (and is skipped where that is absent);
    - ``slow``: it needs ../shared (a real model loads and draws real photos for seconds), starts
      the bot process, or is in LONG_MODULES or LONG_TESTS. ``pytest -m "not slow"`` runs the rest.

    Then put LONGEST_FIRST's modules first; the order within a module stays.
    """
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # a stable sort
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))  # every fixture the test needs, directly or not
        module = getattr(item, "module", None)
        imported = vars(module).values() if module is not None else ()
        starts_bot = bool(uses & MODEL_FIXTURES) and any(v is s for v in imported for s in BOT_STARTERS)
        if uses & SHARED_FIXTURES:
            item.add_marker(pytest.mark.real_model)
        name = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        if uses & SHARED_FIXTURES or starts_bot or name in LONG_TESTS or item.path.name in LONG_MODULES:
            item.add_marker(pytest.mark.slow)


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


@pytest.fixture(scope="module")
def app(tiny_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """The Mini App's bot (the tiny style, a real worker) and its HTTP server, as the page calls it."""
    port = free_port()
    env = {"ANIMEBOT_STYLE": "tiny", "ANIMEBOT_BACKEND": "onnxruntime", "ANIMEBOT_RATE_PER_MINUTE": "0",
           "ANIMEBOT_DAILY_QUOTA": str(QUOTA), "ANIMEBOT_METRICS_PORT": str(port), "ANIMEBOT_WEBAPP_URL": URL}
    with serving(tmp_path_factory.mktemp("webapp"), tiny_store.home, **env) as (bot, fake):
        yield App(bot, fake, port)
