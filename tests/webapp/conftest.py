"""The Mini App's bot, shared by the API's tests (test_webapp.py) and the page's (test_webapp_page.py)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.bot_in_process import serving
from testkit.redis_server import free_port
from testkit.webapp import QUOTA, URL, App
from weights.store import ModelStore


@pytest.fixture(scope="module")
def app(tiny_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """The bot (the tiny style, a real worker) with its HTTP server on the metrics port, as the page calls it;
    one a module."""
    port = free_port()
    env = {"ANIMEBOT_STYLE": "tiny", "ANIMEBOT_BACKEND": "onnxruntime", "ANIMEBOT_RATE_PER_MINUTE": "0",
           "ANIMEBOT_DAILY_QUOTA": str(QUOTA), "ANIMEBOT_METRICS_PORT": str(port), "ANIMEBOT_WEBAPP_URL": URL}
    with serving(tmp_path_factory.mktemp("webapp"), tiny_store.home, **env) as (bot, fake):
        yield App(bot, fake, port)
