"""Headless Chromium for the tests that look at a page: Debian's browser, driven by Playwright.

Playwright's own browser download cannot work without internet; the system's Chromium
(``apt-get install chromium``) is launched by its path instead. Without either, the tests
that need it skip, saying which is missing.
"""
from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from typing import Any

import pytest


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()
