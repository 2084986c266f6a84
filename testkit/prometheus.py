"""A real Prometheus (Debian's ``prometheus``) on a free loopback port, scraping one target every
second with the repository's alert rules loaded: what the Compose monitoring profile runs, sped up.
"""
from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testkit.bot_harness import RunningProcess
from testkit.redis_server import free_port


@dataclass
class RunningPrometheus(RunningProcess):
    port: int

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of a successful answer from Prometheus's HTTP API (anything else raises)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=30) as reply:
            answer = json.loads(reply.read())
        if answer.get("status") != "success":
            raise AssertionError(f"{path} {params}: {answer}")
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result: its series, each with its labels (``metric``) and ``value``."""
        return list(self.api("query", query=expr)["result"])


def start_prometheus(binary: str, folder: Path, target: str, rule_files: list[Path],
                     timeout: float = 60) -> RunningPrometheus:
    """Prometheus (``binary``) in ``folder`` (its config, data and log ``prometheus.log``), scraping
    ``target`` (host:port) as job ``animebot``; returns once it answers."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": [str(p) for p in rule_files],
              "scrape_configs": [{"job_name": "animebot", "static_configs": [{"targets": [target]}]}]}
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log_path = folder / "prometheus.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen([binary, f"--config.file={folder / 'prometheus.yml'}",
                                    f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                                   cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    running = RunningPrometheus(process, log_path, port)
    running.wait_until_serving(f"http://127.0.0.1:{port}/-/ready", "Prometheus Server is Ready.", timeout)
    return running
