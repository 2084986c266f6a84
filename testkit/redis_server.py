"""A real ``redis-server`` on a free loopback port, for the tests and benches of scaling out over Celery.

Tests get one from the ``redis_server`` fixture (tests/conftest.py), which skips, with the way to
install it, where redis-server is absent (:func:`have_redis_server`).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
from collections import Counter
from collections.abc import Collection, Iterator
from pathlib import Path

import redis

from testkit.wait import WaitTimeout, wait_for

PASSWORD = "s3cret-broker-pass"  # distinctive, so a test can search a log for it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server in ``folder`` (its log, and its dump when persisting); the port stays the same
    across restarts, so clients and workers find it again."""

    def __init__(self, folder: Path, password: str | None = PASSWORD) -> None:
        self.folder = folder
        self.password = password
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, password: str | None = None, db: int = 0) -> str:
        """The URL with ``password`` (default: the server's own)."""
        secret = password if password is not None else self.password
        return f"redis://{f':{secret}@' if secret else ''}127.0.0.1:{self.port}/{db}"

    def start(self, persist: bool = False, timeout: float = 10) -> RedisServer:
        """Start, and return once it answers PING."""
        self.folder.mkdir(parents=True, exist_ok=True)
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
                "--logfile", str(self.folder / "redis.log")]
        args += ["--appendonly", "yes"] if persist else ["--save", "", "--appendonly", "no"]
        if self.password:
            args += ["--requirepass", self.password]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        process = self.process
        client = self.client()

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                if process.poll() is not None:
                    raise WaitTimeout("redis-server exited") from None
                return False

        try:
            wait_for(answers, timeout, "PING answered")
        except WaitTimeout as exc:
            log = (self.folder / "redis.log").read_text(errors="replace")[-2000:]
            self.kill()
            raise RuntimeError(f"redis-server did not start on port {self.port} ({exc}):\n{log}") from None
        finally:
            client.close()
        return self

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=5,
                           socket_connect_timeout=5)

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM (redis saves first when persisting), and wait for it to exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def kill(self) -> None:
        """SIGKILL: Redis gone at once, as when its machine dies."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None


def have_redis_server() -> bool:
    return shutil.which("redis-server") is not None


@contextlib.contextmanager
def turned_away(port: int, pids: Collection[int]) -> Iterator[Counter[int]]:
    """Redis down, in a way a test can watch: for the block, ``port`` takes each connection and closes it
    at once, so every client fails to reach Redis there, and the connections each of ``pids`` made are
    counted. A test that must show a client trying again (and what it did not log meanwhile) waits on the
    count instead of sleeping for as long as the tries should take."""
    counts: Counter[int] = Counter()
    done = threading.Event()
    with socket.create_server(("127.0.0.1", port)) as listener:
        listener.settimeout(0.05)

        def serve() -> None:
            while not done.is_set():
                try:
                    conn, (_, peer) = listener.accept()
                except TimeoutError:
                    continue
                with conn:  # the client waits for Redis's answer meanwhile, so its socket is still there
                    owner = _owner(peer, pids)
                if owner is not None:
                    counts[owner] += 1

        thread = threading.Thread(target=serve, name="turned-away", daemon=True)
        thread.start()
        try:
            yield counts
        finally:
            done.set()
            thread.join()


def _owner(port: int, pids: Collection[int]) -> int | None:
    """Which of ``pids`` holds the loopback TCP socket whose own port is ``port``, as /proc shows it."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rpartition(":")[2], 16) == port:
            inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        with contextlib.suppress(OSError):  # the process ended meanwhile
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):  # a descriptor closed meanwhile
                    if os.readlink(fd) in inodes:
                        return pid
    return None
