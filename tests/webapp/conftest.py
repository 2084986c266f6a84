"""The Mini App's bots, shared by the API's tests (test_webapp.py) and the page's (test_webapp_page.py)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.bot_in_process import serving
from testkit.redis_server import free_port
from testkit.webapp import QUOTA, URL, App
from weights.store import ModelStore


def _app(home: Path, models: Path, style: str, **env: str) -> Iterator[App]:
    """A bot with its HTTP server on the metrics port, as the page calls it."""
    port = free_port()
    with serving(home, models, ANIMEBOT_STYLE=style, ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_DAILY_QUOTA=str(QUOTA),
                 ANIMEBOT_METRICS_PORT=str(port), ANIMEBOT_WEBAPP_URL=URL, **env) as (bot, fake):
        yield App(bot, fake, port)


@pytest.fixture(scope="module")
def app(tiny_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """The bot (the tiny style, a real worker; no HD, its model not installed); one a module."""
    yield from _app(tmp_path_factory.mktemp("webapp"), tiny_store.home, "tiny", ANIMEBOT_BACKEND="onnxruntime")


@pytest.fixture(scope="module")
def hd_app(hd_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """A bot with HD: the real Hayao style and Real-CUGAN (from ../shared), a real worker; one a module."""
    yield from _app(tmp_path_factory.mktemp("webapp-hd"), hd_store.home, "hayao")
