"""Celery's Flower as an operator starts it, ``celery --broker URL flower``, on a free loopback port.

Flower is Celery's, not ours: it is given the broker URL and nothing else (no app of ours, no
settings), so what it shows is what any operator's Flower shows of the workers.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.bot_harness import RunningProcess
from testkit.redis_server import free_port


@dataclass
class RunningFlower(RunningProcess):
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, timeout: float = 30) -> str:
        """The body of ``GET path``, as text."""
        with urllib.request.urlopen(self.url + path, timeout=timeout) as reply:
            return str(reply.read().decode())

    def get_json(self, path: str, timeout: float = 30) -> Any:
        return json.loads(self.get(path, timeout))


def start_flower(folder: Path, broker_url: str, *args: str, timeout: float = 120) -> RunningFlower:
    """``python -m celery --broker URL flower --port=P --address=127.0.0.1 ARGS`` in ``folder``
    (its cwd and its log, ``flower.log``); returns once its HTTP server answers ``/healthcheck``.

    Flower 2 serves its JSON API (``/api/...``) only to a logged-in user, or to anyone with
    ``FLOWER_UNAUTHENTICATED_API`` set, as here; its pages need neither."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "FLOWER_UNAUTHENTICATED_API": "true"}
    log_path = folder / "flower.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "celery", "--broker", broker_url, "flower", f"--port={port}",
                                    "--address=127.0.0.1", *args], cwd=folder, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    flower = RunningFlower(process, log_path, port)
    flower.wait_until_serving(flower.url + "/healthcheck", "OK", timeout)
    return flower
