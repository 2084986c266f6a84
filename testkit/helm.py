"""Real Helm (helm-python-sdk's embedded Helm v4) for the tests, run in a process of its own.

The SDK loads Helm as a Go shared library into the process that imports it, and a Go runtime inside a
pytest worker outlived the test: that worker later died mid-suite ("node down: Not properly
terminated") twice in two full runs. So the library is only ever loaded into one spawned child,
which renders, lints and parses ``--set`` strings for the tests and goes with the session.
"""
from __future__ import annotations

import atexit
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

_pool: ProcessPoolExecutor | None = None


def _helper() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        atexit.register(_pool.shutdown, cancel_futures=True)
    return _pool


def unavailable() -> str | None:
    """Why Helm cannot run here (the SDK not installed, or its library not loading), or None."""
    return _helper().submit(_unavailable).result()


def render(chart: Path, values: dict[str, Any], name: str, namespace: str) -> tuple[dict[str, str], str | None]:
    """The chart's rendered files by path, or Helm's refusal (with no files): values.schema.json's or a
    template's."""
    return _helper().submit(_render, chart, values, name, namespace).result()


def lint(chart: Path, values: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Helm's strict lint report."""
    return _helper().submit(_lint, chart, values, namespace).result()


def parse_set_string(expression: str) -> dict[str, Any]:
    """One ``--set`` expression as the values it stands for, as Helm parses it."""
    return _helper().submit(_parse_set, expression).result()


# --- in the child ---------------------------------------------------------------------------

def _unavailable() -> str | None:
    try:
        import helm_python  # noqa: F401
    except ImportError:
        return ("helm-python-sdk is not installed (pip install -e '.[test]'; it has wheels for Linux x86_64, "
                "macOS arm64 and Windows): it renders and lints the chart with real Helm")
    except Exception as unloadable:  # installed, but its Helm library does not load on this machine
        if type(unloadable).__name__ != "HelmLibraryError":
            raise
        return f"helm-python-sdk cannot load its Helm library here: {unloadable}"
    return None


def _render(chart: Path, values: dict[str, Any], name: str, namespace: str) -> tuple[dict[str, str], str | None]:
    import helm_python as helm

    try:
        with helm.Chart.load(chart) as loaded:
            return dict(loaded.render(values=values, name=name, namespace=namespace)), None
    except (helm.HelmValuesError, helm.HelmRenderError) as refused:
        return {}, str(refused)


def _lint(chart: Path, values: dict[str, Any], namespace: str) -> dict[str, Any]:
    import helm_python as helm

    return dict(helm.lint(chart, values, strict=True, namespace=namespace))


def _parse_set(expression: str) -> dict[str, Any]:
    import helm_python as helm

    return dict(helm.parse_set_string(expression))
