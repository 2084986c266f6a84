"""Start animebot the way the Docker image does, from a virtualenv made by the image's install step.

    python -m testkit.docker_smoke --venv DIR [--dockerfile Dockerfile]

There is no Docker engine here, so this reads the image's ENV, ENTRYPOINT,
CMD and HEALTHCHECK from the Dockerfile and runs them: the bot starts with
the image's settings (models provisioned from ANIMEBOT_BAKED_MODELS, which
points at ../shared/models in place of models baked at build time), answers
a photo through the fake Bot API, reports healthy, and exits 0 on SIGTERM.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from testkit.fake_telegram import TOKEN, FakeTelegram
from testkit.redis_server import free_port
from testkit.wait import WaitTimeout, wait_for

REPO = Path(__file__).resolve().parents[1]
SHARED_MODELS = REPO.parent / "shared" / "models"
SAMPLE_PHOTO = REPO.parent / "shared" / "photos" / "group_3_faces.jpg"  # the registry's "sample", by hash


def baked_models(folder: Path) -> Path:
    """``folder`` holding what a build with BAKE_WEIGHTS would bake: the shared models and the sample photo."""
    for path in [*SHARED_MODELS.iterdir(), SAMPLE_PHOTO]:
        (folder / path.name).symlink_to(path)
    return folder


def image_settings(dockerfile: Path) -> tuple[dict[str, str], list[str], list[str]]:
    """(ENV, ENTRYPOINT + CMD, HEALTHCHECK command) of a Dockerfile; continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    env: dict[str, str] = {}
    entrypoint: list[str] = []
    cmd: list[str] = []
    health: list[str] = []
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "ENV":
            env.update(dict(item.split("=", 1) for item in shlex.split(rest)))
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
        elif word == "HEALTHCHECK":
            health = json.loads(rest.split(" CMD ", 1)[1])
    return env, entrypoint + cmd, health


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--venv", type=Path, required=True)
    ap.add_argument("--dockerfile", type=Path, default=REPO / "Dockerfile")
    args = ap.parse_args()
    image_env, command, health = image_settings(args.dockerfile)
    port = free_port()
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as baked, FakeTelegram() as fake:
        env = {key: value.replace("$PATH", os.environ["PATH"]) for key, value in image_env.items()}
        env.update({
            "PATH": f"{args.venv.resolve() / 'bin'}:{os.environ['PATH']}",
            "ANIMEBOT_HOME": data,  # the volume
            "ANIMEBOT_BAKED_MODELS": str(baked_models(Path(baked))),
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "TELEGRAM_API_BASE_URL": fake.base_url,
            "TELEGRAM_API_FILE_URL": fake.file_url,
            "HOME": data,
            # the Mini App's page, which must be in the installed package (package data), not only the checkout
            "ANIMEBOT_METRICS_PORT": str(port),
            "ANIMEBOT_WEBAPP_URL": "https://smoke.example/app",
        })
        print(f"image command: {' '.join(command)}; healthcheck: {' '.join(health)}")
        log = Path(data) / "bot.log"
        with log.open("wb") as out:
            bot = subprocess.Popen(command, env=env, cwd=data, stdout=out, stderr=subprocess.STDOUT)
        try:
            fake.wait_for(lambda: bot.poll() is not None or b"ready: styles" in log.read_bytes(), 600)
            if bot.poll() is not None:
                print(log.read_text(), file=sys.stderr)
                return 1
            chat = {"id": 42, "type": "private", "first_name": "Smoke"}
            user = {"id": 42, "is_bot": False, "first_name": "Smoke", "language_code": "en"}
            photo = (REPO.parent / "shared" / "photos" / "square_512.jpg").read_bytes()
            msg = fake.photo_message(chat, user, photo)
            fake.wait_for(lambda: [c for c in fake.replies_to(msg) if c.method == "sendPhoto"], 300)
            print("a photo was answered")
            for path in ("/app", "/app/static/app.js", "/app/static/app.css"):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as page:
                    if page.status != 200 or not page.read():
                        print(f"GET {path}: {page.status}", file=sys.stderr)
                        return 1
            print("the Mini App's page is served")
            try:
                wait_for(lambda: subprocess.run(health, env=env, capture_output=True).returncode == 0, 60,
                         "healthcheck passed", interval=2)
            except WaitTimeout:
                print("the healthcheck never passed", file=sys.stderr)
                return 1
            print("healthcheck passed")
        finally:
            bot.send_signal(signal.SIGTERM)
            code = bot.wait(120)
        text = log.read_text()
        if code != 0 or TOKEN in text:
            print(text, file=sys.stderr)
            print(f"exit code {code}; token in log: {TOKEN in text}", file=sys.stderr)
            return 1
        print("SIGTERM: exit 0")
        return 0


if __name__ == "__main__":
    sys.exit(main())
