"""Scaled out, as its operators watch it (issue 26): a real Redis with a password, two real ``animebot
worker`` processes, Celery's Flower and the real bot with a metrics port, three photos answered. Then
Celery's own tools, with none of our settings, see the workers and the photos' tasks, and Prometheus's
``promtool`` accepts the bot's live ``/metrics``.

The workers draw a tiny generated style and the photos are synthetic, so nothing here needs ../shared.
Flower is started before the photos are sent, as an operator would have it running: it knows only
the tasks whose events it saw.
"""
from __future__ import annotations

import contextlib
import html
import json
import re
import shutil
import socket
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from bot.drawing.celery.app import make_celery
from bot.drawing.celery.wire import TASK_NAME, order_summary, order_to_message, result_from_message
from inference.drawer import WorkOrder
from inference.pipeline import ConvertSettings, Converted
from testkit.pictures import synthetic_photo
from testkit.bot_harness import REPO, RunningBot, private_chat, start_bot
from testkit.fake_telegram import TOKEN, FakeTelegram
from testkit.browser import chromium
from testkit.flower import RunningFlower, start_flower
from testkit.journal import journal_rows, settled
from testkit.prometheus import start_prometheus
from testkit.redis_server import PASSWORD, RedisServer, free_port
from testkit.replies import labels
from testkit.wait import wait_for
from testkit.worker_harness import RunningWorker, celery_cli, held, start_worker
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
STYLE = "tiny"  # tests/conftest.py's tiny_store: a randomly initialised generator, milliseconds a photo
WORKER_ENV = {"ANIMEBOT_BACKEND": "onnxruntime", "ANIMEBOT_STYLE": STYLE}
PHOTO_SIZES = ((640, 480), (480, 640), (512, 512))
# The most a task's arguments may take in Flower: a summary of the order, never the photo itself.
SUMMARY_MAX = 200


@dataclass
class Cluster:
    fake: FakeTelegram
    redis: RedisServer
    workers: list[RunningWorker]
    flower: RunningFlower
    bot: RunningBot
    metrics_port: int
    # What Celery's tools should show of each photo's task: its argsrepr, from the job id and the photo's size.
    summaries: list[str]

    def worker_names(self) -> set[str]:
        """The Celery node names the workers took: animebot@HOST-RANDOM-PID of each main process."""
        names = {w.node() for w in self.workers}
        assert all(n.startswith(f"animebot@{socket.gethostname()}-") for n in names), names
        assert {int(n.rsplit("-", 1)[1]) for n in names} == {w.process.pid for w in self.workers}
        return names


def job_of(home: Path, message: dict[str, Any]) -> str:
    """The id of the job the bot took on for the photo in ``message`` (named after its update)."""
    rows = journal_rows(home, "SELECT j.job_id FROM jobs j JOIN updates u ON j.job_id = CAST(u.update_id AS TEXT) "
                              "WHERE json_extract(u.payload, '$.message.message_id') = ? "
                              "AND json_extract(u.payload, '$.message.chat.id') = ?",
                        message["message_id"], message["chat"]["id"])
    assert len(rows) == 1, rows
    return str(rows[0][0])


def carries_bytes(shown: str) -> bool:
    """Whether text that Celery's tools show holds binary data: a bytes repr, or a long run of hex or base64."""
    return ("b'" in shown or "\\x" in shown or re.search(r"[0-9a-f]{64}", shown) is not None
            or re.search(r"[A-Za-z0-9+/]{120}", shown) is not None)


def task_page_fields(flower: RunningFlower, task_id: str) -> dict[str, str]:
    """What a task's own page in Flower (``/task/ID``, rendered by Flower itself) lists: each field's
    label and its text."""
    page = flower.get(f"/task/{task_id}")
    fields = re.findall(r"<dt>([^<]+)</dt>\s*<dd[^>]*>(.*?)</dd>", page, re.S)
    return {label.strip(): html.unescape(re.sub(r"<[^>]+>", "", value)).strip() for label, value in fields}


def flower_workers(flower: RunningFlower) -> dict[str, bool]:
    """What Flower's workers page lists (from the workers' events): each worker's name and whether it is online."""
    return {w["hostname"]: w["status"] for w in flower.get_json("/workers?json=1")["data"]}


@pytest.fixture(scope="module")
def cluster(redis_server: RedisServer, tiny_store: ModelStore,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Redis, two workers, Flower, the bot with a metrics port, and three photos answered, in that order.
    On the way out everything is stopped, and neither the token nor the Redis password is in any log."""
    tmp = tmp_path_factory.mktemp("operator")
    url = redis_server.url()
    workers: list[RunningWorker] = []
    flower: RunningFlower | None = None
    bot: RunningBot | None = None
    with FakeTelegram() as fake:
        try:
            for i in range(2):
                workers.append(start_worker(tmp / f"worker-{i}", tiny_store.home, url, **WORKER_ENV))
            for w in workers:
                w.wait_for_log("celery.apps.worker: animebot@")  # "... ready.": consuming and answering control messages
            flower = start_flower(tmp / "flower", url)
            metrics_port = free_port()
            bot = start_bot(fake, tmp / "bot", tiny_store.home, ANIMEBOT_BROKER_URL=url, ANIMEBOT_STYLE=STYLE,
                            ANIMEBOT_METRICS_PORT=str(metrics_port), ANIMEBOT_RATE_PER_MINUTE="0")
            c = Cluster(fake, redis_server, workers, flower, bot, metrics_port, [])
            # Flower listens to the workers' events: once it lists both, it will see every task's.
            names = c.worker_names()
            wait_for(lambda: flower_workers(flower) == dict.fromkeys(names, True), 60, "both workers online in Flower",
                     context=lambda: str(flower_workers(flower)))
            photos = [synthetic_photo(w, h, seed=i) for i, (w, h) in enumerate(PHOTO_SIZES)]
            sent = [fake.photo_message(*private_chat(7001 + i), photo) for i, photo in enumerate(photos)]
            fake.wait_for(lambda: all(labels(fake, m) for m in sent) and settled(bot.home, fake), 300,
                          "answer to every photo, with the journal settled")
            assert [labels(fake, m) for m in sent] == [["photo"]] * 3
            c.summaries = [f"(job {job_of(bot.home, m)}, {STYLE}, photo of {len(p):,} bytes)"
                           for m, p in zip(sent, photos)]
            yield c
        finally:
            started = [p for p in (bot, flower) if p is not None] + workers
            for process in started:
                with contextlib.suppress(subprocess.TimeoutExpired):  # stop() has killed it then
                    process.stop()
            logs = "".join(p.log() for p in started)
            assert TOKEN not in logs and PASSWORD not in logs


def test_a_default_celery_client_gets_a_pong_from_both_workers(cluster: Cluster) -> None:
    app = Celery(broker=cluster.redis.url(), set_as_current=False)  # Celery's defaults: nothing of ours
    try:
        replies = app.control.ping(timeout=30, limit=2)  # returns once both answered
    finally:
        app.close()
    assert {name: answer for reply in replies for name, answer in reply.items()} == \
        dict.fromkeys(cluster.worker_names(), {"ok": "pong"})


def test_flower_s_api_lists_both_workers_and_the_three_photos_succeeded(cluster: Cluster) -> None:
    flower, names = cluster.flower, cluster.worker_names()
    assert flower.get_json("/api/workers?status=1") == dict.fromkeys(names, True)
    inspected = flower.get("/api/workers?refresh=1")  # Flower asks every worker (inspect stats, conf, ...)
    assert PASSWORD not in inspected
    workers = json.loads(inspected)
    assert set(workers) == names
    for name in names:
        assert workers[name]["stats"]["pool"]["max-concurrency"] == 1, workers[name]
        assert TASK_NAME in workers[name]["registered"], workers[name]

    raw = flower.get("/api/tasks")
    assert PASSWORD not in raw
    tasks = json.loads(raw)
    assert sorted(t["args"] for t in tasks.values()) == sorted(cluster.summaries)
    for task_id, task in tasks.items():
        assert (task["name"], task["state"], task["worker"] in names) == (TASK_NAME, "SUCCESS", True), task
        assert task["runtime"] > 0, task
        assert task["kwargs"] == "{}", task
        # A summary of the order, never its photo: no bytes, no base64, nothing the size of a photo.
        assert len(task["args"]) < SUMMARY_MAX and not carries_bytes(task["args"]), task
        shown = task_page_fields(flower, task_id)  # the task's own page, as Flower renders it
        assert (shown["Arguments"], shown["Keyword arguments"]) == (task["args"], "{}"), shown
    counts = {w["hostname"]: w.get("task-succeeded", 0) for w in flower.get_json("/workers?json=1")["data"]}
    assert sum(counts.values()) == 3, counts


def test_flower_shows_each_photo_s_result_as_a_summary_not_the_drawing_s_bytes(cluster: Cluster) -> None:
    tasks = cluster.flower.get_json("/api/tasks")
    assert len(tasks) == 3
    for task_id, task in tasks.items():
        shown = task_page_fields(cluster.flower, task_id)
        assert shown["Arguments"] == task["args"], shown
        assert len(task["result"]) < SUMMARY_MAX and not carries_bytes(task["result"]), task["result"]
        # What was drawn, as the bot will send it: the style, the size, the faces and the file's size.
        assert re.fullmatch(rf"\({STYLE} picture \d+x\d+, 0 face\(s\) redrawn, [\d,]+ bytes\)", task["result"]), task
        assert shown["Result"] == task["result"], shown


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def test_flower_s_pages_show_both_workers_online_and_each_photo_s_task(cluster: Cluster, browser: Any) -> None:
    from playwright.sync_api import expect

    flower = cluster.flower
    tasks = flower.get_json("/api/tasks")
    page = browser.new_page()
    try:
        page.goto(flower.url + "/workers")
        rows = page.locator("#workers-table tbody tr")
        for name in cluster.worker_names():
            row = rows.filter(has_text=name)
            expect(row).to_have_count(1, timeout=30_000)
            expect(row).to_contain_text("Online", timeout=30_000)  # the status badge, drawn by the page's script
        expect(page.locator("#workers-online")).to_have_text("2")
        expect(page.locator("#workers-succeeded")).to_have_text("3")
        shown = [page.content()]

        page.goto(flower.url + "/tasks")
        for task_id, task in tasks.items():
            row = page.locator(f'#tasks-table tbody tr[id="{task_id}"]')
            expect(row).to_contain_text("SUCCESS", timeout=30_000)
            cells = [cell.strip() for cell in row.locator("td").all_text_contents()]
            assert TASK_NAME in cells and task["worker"] in cells, cells
            assert any(re.fullmatch(r"\d+\.\d\d (ms|s)", cell) for cell in cells), cells  # its runtime
        expect(page.locator("#tasks-table tbody tr")).to_have_count(3)
        shown.append(page.content())

        for task_id, task in tasks.items():  # a task's own page: what it was given, as its summary
            page.goto(f"{flower.url}/task/{task_id}")
            expect(page.locator("body")).to_contain_text(task["args"])
            expect(page.locator("body")).to_contain_text("SUCCESS")
            shown.append(page.content())
        page.goto(flower.url + "/broker")
        expect(page.locator(".broker-url")).to_contain_text(f"127.0.0.1:{cluster.redis.port}")
        shown.append(page.content())
    finally:
        page.close()
    for content in shown:
        assert PASSWORD not in content


def test_promtool_accepts_the_bot_s_live_metrics(cluster: Cluster) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_port}/metrics", timeout=10) as reply:
        metrics = reply.read()
    assert re.search(rb"^# TYPE animebot_\w+ ", metrics, re.M), metrics  # the bot's own metrics, not an empty page
    checked = subprocess.run([promtool, "check", "metrics"], input=metrics, capture_output=True, timeout=60)
    said = (checked.stdout + checked.stderr).decode(errors="replace")
    assert (checked.returncode, said.strip()) == (0, ""), said


def test_prometheus_scrapes_the_bot_runs_every_dashboard_query_and_loads_the_alerts_quietly(
        cluster: Cluster, tmp_path: Path) -> None:
    """The Compose monitoring profile's Prometheus, sped up: it scrapes the live bot with deploy/'s alert
    rules loaded. Every Grafana query answers with data, the numbers are the cluster's, and no alert
    fires on a healthy cluster."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    deploy = REPO / "deploy"
    prometheus = start_prometheus(binary, tmp_path / "prometheus", f"127.0.0.1:{cluster.metrics_port}",
                                  sorted((deploy / "prometheus" / "rules").glob("*.yml")))
    try:
        # rate() needs two samples of a series: wait for a few scrapes.
        wait_for(lambda: prometheus.query("count_over_time(up[1m]) >= 3"), 60, "three scrapes of the bot",
                 context=prometheus.log)
        assert [s["value"][1] for s in prometheus.query('up{job="animebot"}')] == ["1"]

        def value(expr: str) -> float:
            (series,) = prometheus.query(expr)
            return float(series["value"][1])
        assert value("sum(animebot_workers_online)") == 2
        assert value('sum(animebot_jobs_total{outcome="done"})') == 3
        assert value("min(animebot_broker_up)") == 1
        assert value("min(animebot_healthy)") == 1
        assert value("min(animebot_database_writable)") == 1 and value("sum(animebot_database_write_failures_total)") == 0
        assert value("sum(animebot_photo_draw_seconds_count)") == 3
        board = json.loads((deploy / "grafana" / "dashboards" / "animebot.json").read_text())
        queries = [target["expr"] for panel in board["panels"] for target in panel.get("targets", ())]
        empty = [q for q in queries if not prometheus.query(q)]
        # The cache hit rate over a window with lookups in it answers; so does every other panel's query.
        assert empty == [], empty

        groups = prometheus.api("rules", type="alert")["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        assert len(rules) == 8 and {r["health"] for r in rules} == {"ok"}, rules
        assert [r["name"] for r in rules if r["state"] != "inactive"] == []
    finally:
        prometheus.stop()


def test_celery_inspect_lists_a_waiting_photo_by_its_summary_never_its_bytes(cluster: Cluster) -> None:
    """``celery inspect reserved`` and ``active`` list a task's real arguments unless asked to be safe;
    ours list the summary the bot sends (the last test here: it sends a photo of its own)."""
    url = cluster.redis.url()
    stats = json.loads(celery_cli(url, "inspect", "stats", "-j"))
    drawing = [pid for worker in stats.values() for pid in worker["pool"]["processes"]]
    order = WorkOrder("job-inspect", synthetic_photo(320, 240, seed=9), STYLE, ConvertSettings(max_side=160))
    app = make_celery(url, 60)
    with held(*drawing):  # the photo waits on a worker, reserved but not started
        task = app.send_task(TASK_NAME, args=[order_to_message(order)], task_id=str(uuid.uuid4()),
                             argsrepr=order_summary(order), kwargsrepr="{}")
        listed = wait_for(lambda: [t for ts in json.loads(celery_cli(url, "inspect", "reserved", "-j")).values()
                                   for t in ts], 60, "the photo reserved on a worker")
    assert [(t["id"], t["args"], t["kwargs"]) for t in listed] == [(task.id, order_summary(order), "{}")]
    assert isinstance(result_from_message(task.get(timeout=60)), Converted)  # drawn once let go
    active = celery_cli(url, "inspect", "active", "-j")
    assert not carries_bytes(active), active


