"""Start real ``animebot worker`` processes (Celery over a real Redis) for the scale-out tests and benches."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from testkit.bot_harness import REPO, RunningProcess
from testkit.wait import wait_for


@dataclass
class RunningWorker(RunningProcess):
    def drawing_pids(self) -> list[int]:
        """The pool processes that said they are ready (they draw; the main process only hands out)."""
        return [int(pid) for pid in re.findall(r"animebot worker ready: pid (\d+)", self.log())]

    def wait_for_log(self, text: str, timeout: float = 120) -> None:
        """Until ``text`` is in the log; an error with the log if the worker exits or the time is up."""
        def seen() -> bool:
            if text in self.log():
                return True
            if self.process.poll() is not None:
                raise AssertionError(f"no {text!r} in the worker's log (exit {self.process.poll()}):\n{self.log()}")
            return False

        wait_for(seen, timeout, f"{text!r} in the worker's log", context=self.log)

    def kill_main(self) -> None:
        """SIGKILL to the main process only, as the OOM killer would; its pool processes must follow."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start_worker(home: Path, shared_home: Path, broker_url: str, log_name: str = "worker.log", ready: bool = True,
                 **env: str) -> RunningWorker:
    """``python -m bot worker`` with its own data dir, sharing installed models and exports by symlink
    (as testkit/bot_harness.py does for the bot); with ``ready``, returns once a pool process can draw."""
    home.mkdir(parents=True, exist_ok=True)
    for sub in ("models", "cache"):
        (shared_home / sub).mkdir(parents=True, exist_ok=True)
        if not (home / sub).exists():
            (home / sub).symlink_to(shared_home / sub)
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "ANIMEBOT_HOME": str(home), "ANIMEBOT_BROKER_URL": broker_url,
                "ANIMEBOT_THREADS": "1", **env}
    full_env.pop("TELEGRAM_BOT_TOKEN", None)  # a worker never has it
    log_path = home / log_name
    with log_path.open("ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "bot", "worker"], cwd=home, env=full_env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    worker = RunningWorker(process, log_path)
    if ready:
        try:
            worker.wait_for_log("animebot worker ready: pid", 600)
        except BaseException:
            worker.kill9()
            raise
    return worker
