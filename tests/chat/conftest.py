"""What the chat's test modules share: a fake Bot API for the module's bot."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.fake_telegram import FakeTelegram


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server
