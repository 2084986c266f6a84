"""Start real ``animebot worker`` processes (Celery over a real Redis) for the scale-out tests and benches."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis
from celery.states import READY_STATES

from bot.drawing.celery.app import make_celery
from bot.drawing.celery.wire import photo_key, read_workers
from testkit.bot_harness import REPO, RunningProcess
from testkit.redis_server import PASSWORD
from testkit.releases import command
from testkit.wait import WaitTimeout, wait_for

LET_GO_S = 0.02  # how long caught_drawing lets the drawing processes go on between two looks


@dataclass
class RunningWorker(RunningProcess):
    def drawing_pids(self) -> list[int]:
        """The pool processes that said they are ready (they draw; the main process only hands out)."""
        return [int(pid) for pid in re.findall(r"animebot worker ready: pid (\d+)", self.log())]

    def node(self) -> str:
        """The Celery node name this worker took, as its start line says (the name has a random part)."""
        found = re.search(r"animebot worker (animebot@\S+):", self.log())
        assert found, f"no start line in the worker's log:\n{self.log()}"
        return found.group(1)

    def wait_for_log(self, text: str | re.Pattern[str], timeout: float = 120) -> None:
        """Until ``text`` is in the log (or the pattern matches it); an error with the log if the worker exits
        or the time is up."""
        def seen() -> bool:
            log = self.log()
            if text.search(log) if isinstance(text, re.Pattern) else text in log:
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
                 code: Path = REPO, **env: str) -> RunningWorker:
    """``animebot worker`` with its own data dir, sharing installed models and exports by symlink
    (as testkit/bot_harness.py does for the bot); with ``ready``, returns once a pool process can draw;
    ``code``: what it runs, this tree, or an earlier release's tree or virtualenv (testkit/releases.py)."""
    home.mkdir(parents=True, exist_ok=True)
    for sub in ("models", "cache"):
        (shared_home / sub).mkdir(parents=True, exist_ok=True)
        if not (home / sub).exists():
            (home / sub).symlink_to(shared_home / sub)
    argv, full_env = command(code, "worker", {**os.environ, "ANIMEBOT_HOME": str(home),
                                              "ANIMEBOT_BROKER_URL": broker_url, "ANIMEBOT_THREADS": "1", **env})
    full_env.pop("TELEGRAM_BOT_TOKEN", None)  # a worker never has it
    log_path = home / log_name
    with log_path.open("ab") as log:
        process = subprocess.Popen(argv, cwd=home, env=full_env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    worker = RunningWorker(process, log_path)
    if ready:
        try:
            worker.wait_for_log("animebot worker ready: pid", 600)
        except BaseException:
            worker.kill9()
            raise
    return worker


@contextlib.contextmanager
def held(*pids: int) -> Iterator[None]:
    """The processes ``pids`` stopped (SIGSTOP) for the block, then let go on (SIGCONT): a worker that
    takes no order, or a drawing that does not start, however fast it would be."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # killed in the block
                os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def caught_drawing(workers: Sequence[RunningWorker], broker_url: str, timeout: float = 300,
                   claim_checks: bool = True) -> Iterator[RunningWorker]:
    """The worker of ``workers`` one of whose processes is in the middle of drawing a photo the bot
    waits for, held there (SIGSTOP) for the block; every drawing process goes on after it.

    A drawing can be over before anyone looking at Redis sees it (a small photo on a fast CPU), so the
    processes are not watched while they run: again and again they are all stopped, looked at, and let
    go on for :data:`LET_GO_S`. What is seen while they are stopped stays true: a process whose
    heartbeat names a task whose photo is still in Redis (the bot waits for it) and that has no result
    stored has not finished it. A
    drawing longer than one let-go is always caught, however fast the machine or busy its cores.

    ``claim_checks``: False for a bot whose orders carry their photo (the release before claim checks,
    testkit/releases.py), which leaves no photo key to look for: a task with no result stored is one it
    waits for."""
    pids = {pid: worker for worker in workers for pid in worker.drawing_pids() if Path(f"/proc/{pid}").exists()}
    client = redis.Redis.from_url(broker_url)
    backend = make_celery(broker_url, 60).backend
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with held(*pids):
                wait_for(lambda: all(_stopped(pid) for pid in pids), 60, "every drawing process stopped")
                caught = [pids[w.pid] for w in read_workers(client) if w.pid in pids and w.task is not None
                          and (not claim_checks or client.exists(photo_key(w.task)))
                          and backend.get_task_meta(w.task)["status"] not in READY_STATES]
                if caught:
                    yield caught[0]
                    return
            time.sleep(LET_GO_S)
        raise WaitTimeout(f"no drawing caught in {timeout:g} s")
    finally:
        client.close()


def _stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (or the process gone): nothing it does can change Redis
    until it goes on. A stop signal reaches the threads one by one."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            states.append(stat.read_text().rpartition(")")[2].split()[0])
    return all(state in ("T", "t", "Z", "X") for state in states)


def celery_cli(broker_url: str, *args: str) -> str:
    """``celery --broker URL ARGS --timeout 10`` as an operator types it, with Celery's defaults and
    nothing of ours; its output, which must not hold the broker's password."""
    done = subprocess.run([sys.executable, "-m", "celery", "--broker", broker_url, *args, "--timeout", "10"],
                          capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert PASSWORD not in said
    return done.stdout
