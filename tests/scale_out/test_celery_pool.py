"""The scaled-out pool in-process: the bot's real :class:`CeleryPool`, a real Redis and a real
``animebot worker`` with two processes, drawing two tiny styles (so no ../shared is needed).

What is looked at is what a user or an operator would notice: each style's drawing comes back
as that style, an order the bot has answered is not drawn again when Redis hands it out a second
time, and Celery's view of a running task shows no photo bytes.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import io
import json
import logging
import pickle
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import redis
import torch
from PIL import Image

from bot.drawing.celery.app import QUEUE, make_celery
from bot.drawing.celery.wire import (TASK_NAME, WorkerInfo, heartbeat_key, order_to_message, photo_key, read_workers,
                                     task_id_for, write_heartbeat)
from bot.drawing.celery.pool import CeleryPool
from bot.drawing.fairqueue import Ticket
from inference.drawer import Drawer, DrawerSpec, WorkOrder
from inference.engine import exported_onnx
from inference.generator import Generator
from inference.pipeline import ConvertSettings, Converted
from inference.prune import save_lite
from storage.cache import result_key
from testkit.models import TINY_WIDTHS
from testkit.pictures import grainy_png, noisy_jpeg, synthetic_photo
from testkit.pickles import Opens
from testkit.privacy import Footprint, footprints
from testkit.wait import until, wait_for, within
from testkit.redis_server import RedisServer
from testkit.worker_harness import RunningWorker, held, start_worker
from weights.store import ModelStore


# Every test here runs Redis and Celery worker processes.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
STYLES = ("tiny", "tinier")  # two randomly initialised generators: they draw the same photo differently
SETTINGS = ConvertSettings(max_side=96, faces=False)
DB = 3  # a Redis database of this module's own
SECRET = b"the bot database's own key"  # keys the task ids (bot/drawing/celery/wire.py)


@pytest.fixture(scope="module")
def two_styles(tmp_path_factory: pytest.TempPathFactory) -> ModelStore:
    """A data dir with two tiny lite styles, each with its ONNX export made in advance."""
    store = ModelStore(tmp_path_factory.mktemp("two-styles"))
    for seed, name in enumerate(STYLES):
        torch.manual_seed(seed)
        entry = save_lite(store, store.entry("hayao"), name, Generator(TINY_WIDTHS).eval(), 0.05)
        exported_onnx(store, entry, store.path(entry))
    return ModelStore(store.home)


@pytest.fixture(scope="module")
def worker(redis_server: RedisServer, two_styles: ModelStore,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWorker]:
    """One ``animebot worker`` with two drawing processes: two orders of one job are drawn at once."""
    running = start_worker(tmp_path_factory.mktemp("worker"), two_styles.home, redis_server.url(db=DB),
                           ANIMEBOT_BACKEND="onnxruntime", ANIMEBOT_STYLE="tiny", ANIMEBOT_WORKER_CONCURRENCY="2")
    try:
        running.wait_for_log("celery.apps.worker: animebot@")  # "... ready.": consuming
        while len(running.drawing_pids()) < 2:
            running.wait_for_log("animebot worker ready: pid")
        yield running
    finally:
        assert running.stop() == 0, running.log()


@pytest.fixture(autouse=True)
def nothing_left_on_the_worker(worker: RunningWorker, redis_server: RedisServer) -> None:
    """Each test starts with the worker idle. An earlier test may leave a copy of an order on it (one the
    bot sent again), and a drawing process stopped while its heartbeat still names that copy looks busy
    to the bot for as long as it is stopped: the bot would send it nothing. Idle is read off Redis: no
    order queued or held, then a heartbeat of each drawing process written after that, naming no task."""
    client = redis_server.client()
    client.select(DB)
    try:
        wait_for(lambda: client.llen(QUEUE) == 0 and client.hlen("unacked") == 0, 120, "every order acknowledged",
                 context=lambda: f"queued {client.llen(QUEUE)}, unacknowledged {client.hlen('unacked')}")
        since = time.time()

        def idle_beats() -> bool:
            beats = {w.pid: w for w in read_workers(client)}
            return all(pid in beats and beats[pid].task is None and beats[pid].seen >= since
                       for pid in worker.drawing_pids())
        wait_for(idle_beats, 120, "a heartbeat of each drawing process, drawing nothing")
    finally:
        client.close()


@contextlib.asynccontextmanager
async def celery_pool(url: str) -> AsyncIterator[CeleryPool]:
    """The bot's pool, started, once it sees both drawing processes of the worker."""
    pool = CeleryPool(url, queue_size=4, timeout_s=60, secret=SECRET)
    await pool.start()
    try:
        await until(lambda: pool.size == 2, 60)
        yield pool
    finally:
        await pool.close()


def drawn_alone(store: ModelStore, order: WorkOrder) -> np.ndarray:
    """What a worker process of the bot's own draws for ``order``, as pixels."""
    drawer = Drawer(DrawerSpec(store.home, "onnxruntime", 1, order.style))
    drawer.load()
    reply = drawer.draw(order)
    assert isinstance(reply, Converted), reply
    return pixels(reply.data)


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def one_photo_in_every_style(pool: CeleryPool, job_id: str, seed: int) -> tuple[list[WorkOrder], list[Ticket]]:
    """What "All styles" queues: one job, one photo, a drawing per style, each under its own cache key."""
    photo = synthetic_photo(160, 120, seed=seed)
    sha = hashlib.sha256(photo).hexdigest()
    orders = [WorkOrder(job_id, photo, style, SETTINGS) for style in STYLES]
    return orders, [pool.submit(o, 1, result_key(sha, o.style, "v1")) for o in orders]


def test_one_photo_drawn_in_two_styles_at_once_comes_back_in_each_style(
        worker: RunningWorker, redis_server: RedisServer, two_styles: ModelStore) -> None:
    async def go() -> list[Converted]:
        async with celery_pool(redis_server.url(db=DB)) as pool:
            # The worker's main process, which takes orders from Redis, is held while both are sent, so
            # both are out at once however fast the tiny styles draw (its drawing processes beat on).
            with held(worker.process.pid):
                _, tasks = one_photo_in_every_style(pool, "job-styles", seed=1)
                await until(lambda: pool.running == 2, 120, "both drawings sent")
            return list(await within(asyncio.gather(*(t.result for t in tasks)), 120))

    results = asyncio.run(go())
    assert [r.style for r in results] == list(STYLES)
    photo = synthetic_photo(160, 120, seed=1)
    for style, result in zip(STYLES, results):
        assert np.array_equal(pixels(result.data), drawn_alone(two_styles, WorkOrder("ref", photo, style, SETTINGS)))
    assert not np.array_equal(pixels(results[0].data), pixels(results[1].data))


def test_an_answered_order_that_redis_hands_out_again_is_not_drawn_again(
        worker: RunningWorker, redis_server: RedisServer) -> None:
    url = redis_server.url(db=DB)

    async def go() -> list[str]:
        async with celery_pool(url) as pool:
            orders, tasks = one_photo_in_every_style(pool, "job-again", seed=2)
            await within(asyncio.gather(*(t.result for t in tasks)), 120)
            ids = [task_id_for(o.job_id, t.key, SECRET) for o, t in zip(orders, tasks)]
            photos = redis.Redis.from_url(url)
            try:  # the pool's next look deletes their photos from Redis
                await until(lambda: not any(photos.exists(photo_key(i)) for i in ids), 120, "photos gone from Redis")
            finally:
                photos.close()
            return ids

    task_ids = asyncio.run(go())
    # The copy a killed worker leaves unacknowledged comes back, after Redis's visibility timeout,
    # under the same task id with the same order; here it is sent so at once.
    app = make_celery(url, 60)
    order = WorkOrder("job-again", synthetic_photo(160, 120, seed=2), STYLES[0], SETTINGS)
    app.send_task(TASK_NAME, args=[order_to_message(order, photo_key(task_ids[0]))], task_id=task_ids[0], queue=QUEUE)
    worker.wait_for_log(f"task {task_ids[0]} (job job-again): no longer wanted; not drawn")
    assert worker.log().count(f"task {task_ids[0]} (job job-again): {STYLES[0]} drawn in") == 1
    client = redis_server.client()
    client.select(DB)
    try:
        # Acknowledged, not left to come back: the worker's main process acks it just after the task
        # returns, which may be a moment after the task's own log line.
        wait_for(lambda: client.llen(QUEUE) == 0 and client.hlen("unacked") == 0, 120, "the copy acknowledged",
                 context=lambda: f"queued {client.llen(QUEUE)}, unacknowledged {client.hlen('unacked')}")
        assert client.get(f"celery-task-meta-{task_ids[0]}") is None  # no result stored for nobody
    finally:
        client.close()


def test_a_stored_result_that_is_not_ours_is_never_read_and_the_photo_is_drawn_again(
        worker: RunningWorker, redis_server: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Whoever can write to Redis plants a pickle where a photo's result goes: the bot neither unpickles
    it nor takes it for the drawing (kombu's decoding errors are not the broker's being away); it sends
    the photo again, and the user gets the real drawing."""
    url = redis_server.url(db=DB)
    planted = tmp_path / "unpickled"
    photo = synthetic_photo(160, 120, seed=3)
    order = WorkOrder("job-pickle", photo, STYLES[0], SETTINGS)
    key = result_key(hashlib.sha256(photo).hexdigest(), order.style, "v1")
    result_of_task = make_celery(url, 60).backend.get_key_for_task(task_id_for(order.job_id, key, SECRET))
    client = redis.Redis.from_url(url)

    async def go() -> Converted:
        async with celery_pool(url) as pool:
            with held(worker.process.pid):  # the order waits in Redis while the pickle takes its result's place
                ticket = pool.submit(order, 1, key)
                await until(lambda: pool.running == 1, 120, "the photo sent")
                # Stored and published, as Celery's Redis backend stores a result (and pushes it to the bot).
                planted_result = pickle.dumps({"status": "SUCCESS", "result": Opens(planted)})
                client.set(result_of_task, planted_result)
                client.publish(result_of_task, planted_result)
                await until(lambda: "(its result was unreadable); sending it again" in caplog.text, 120,
                            "the photo sent again")
            return await within(ticket.result, 120)

    try:
        with caplog.at_level(logging.WARNING, logger="animebot.pool"):
            drawn = asyncio.run(go())
    finally:
        client.close()
    assert isinstance(drawn, Converted) and drawn.output_size == (96, 72)
    assert not planted.exists()  # never unpickled
    assert "the broker is unreachable" not in caplog.text


def test_a_photo_waiting_for_its_worker_is_not_asked_after_but_comes_back_when_drawn(
        worker: RunningWorker, redis_server: RedisServer) -> None:
    """While a photo waits to be drawn, the bot does not ask Redis for its result over and over: Redis
    pushes the result to the bot when a worker stores it (bot/drawing/celery/results.py), and the bot
    reads it once, just after sending. Here the worker's main process is held, so the order waits in
    Redis while the bot takes three looks at the heartbeats (one a second), which Redis's MONITOR shows
    as SCANs; then it is let go, and the drawing comes back."""
    url = redis_server.url(db=DB)
    photo = synthetic_photo(160, 120, seed=6)
    order = WorkOrder("job-pushed", photo, STYLES[0], SETTINGS)
    key = result_key(hashlib.sha256(photo).hexdigest(), order.style, "v1")
    result_of_task = make_celery(url, 60).backend.get_key_for_task(task_id_for(order.job_id, key, SECRET)).decode()
    commands: list[str] = []
    waited: list[str] = []  # the commands up to the third look, while the photo waited
    watcher = redis.Redis.from_url(url)
    client = redis.Redis.from_url(url)

    def watch() -> None:
        with watcher.monitor() as monitor:
            for seen in monitor.listen():
                commands.append(seen["command"])
                if seen["command"] == "ECHO monitor-off":
                    return

    def scans_since(start: int) -> int:
        return sum(c.startswith("SCAN") for c in commands[start:])

    async def go() -> Converted:
        async with celery_pool(url) as pool:
            with held(worker.process.pid):
                ticket = pool.submit(order, 1, key)
                await until(lambda: pool.running == 1, 120, "the photo sent")
                sent = len(commands)
                await until(lambda: scans_since(sent) >= 3, 120, "three looks at the heartbeats")
                waited.extend(commands)
            return await within(ticket.result, 120)

    thread = threading.Thread(target=watch, name="monitor", daemon=True)
    thread.start()
    try:
        wait_for(lambda: client.echo("monitor-on") and "ECHO monitor-on" in commands, 30, "MONITOR on")
        drawn = asyncio.run(go())
        client.echo("monitor-off")
        thread.join(30)
    finally:
        client.close()
        watcher.close()
    assert isinstance(drawn, Converted) and drawn.output_size == (96, 72)
    # The worker reads the key too, once it is let go (Celery's backend looks before it stores a result).
    reads = [c for c in waited if c.startswith("GET") and result_of_task in c]
    assert len(reads) == 1, f"the result was read {len(reads)} times while the photo waited"


def test_celery_s_view_of_a_running_task_shows_no_photo_bytes(
        worker: RunningWorker, redis_server: RedisServer) -> None:
    """What ``celery inspect active`` and Flower show of a task is its argsrepr: here read off the
    message that a drawing process holds (Redis keeps it until the task is acknowledged)."""
    async def go() -> list[dict[str, Any]]:
        async with celery_pool(redis_server.url(db=DB)) as pool:
            client = redis_server.client()
            client.select(DB)
            try:
                with contextlib.ExitStack() as stopped:
                    # Both orders are sent while the drawing processes beat on (the bot sends only to a
                    # process it sees free) and the worker's main process is held; then the drawing
                    # processes stop, and the main process takes both orders and holds them for them.
                    with held(worker.process.pid):
                        _, tasks = one_photo_in_every_style(pool, "job-inspect", seed=3)
                        await until(lambda: pool.running == 2, 120, "both drawings sent")
                        stopped.enter_context(held(*worker.drawing_pids()))

                    def by_style() -> dict[str, Any]:
                        messages = (json.loads(raw)[0] for raw in client.hvals("unacked"))
                        return {m["headers"]["argsrepr"]: m for m in messages}
                    await until(lambda: len(by_style()) == 2, 120, "both orders held by the worker")
                    orders = list(by_style().values())
            finally:
                client.close()
            await within(asyncio.gather(*(t.result for t in tasks)), 120)
            return orders

    orders = asyncio.run(go())
    photo = synthetic_photo(160, 120, seed=3)
    assert sorted(m["headers"]["argsrepr"] for m in orders) == sorted(
        f"(job job-inspect, {style}, photo of {len(photo):,} bytes)" for style in STYLES)
    assert all(m["headers"]["kwargsrepr"] == "{}" for m in orders)
    body = msgpack.unpackb(base64.b64decode(orders[0]["body"]), raw=False)
    assert body[0][0]["photo"].startswith("animebot:photo:job-inspect:")  # the photo waits in its key, for the worker
    assert "data" not in body[0][0]


def test_a_process_drawing_something_else_gets_no_photo_sent_to_it(
        worker: RunningWorker, redis_server: RedisServer) -> None:
    """A worker process whose heartbeat names a task the bot is not waiting for (a photo whose job was
    stopped, an order of another bot on the same Redis) is busy: a photo sent to it would wait in
    Redis while its status said "Drawing…". Here the worker's main process is held, so the two photos
    the bot sends wait in Redis while its two real processes beat on, and a third process beats while
    drawing another bot's task."""
    client = redis_server.client()
    client.select(DB)
    other = WorkerInfo("animebot@elsewhere", 1, STYLES, "onnxruntime f32", "off: test", "another-bot:1", time.time())

    async def looked_at(pool: CeleryPool, beat: int) -> None:
        """Until ``pool`` has read a heartbeat of the third process's written now (its engine names ``beat``)."""
        engine = f"onnxruntime f32, beat {beat}"
        write_heartbeat(client, replace(other, engine=engine, seen=time.time()), 10)
        await until(lambda: any(w.engine == engine for w in pool.workers()), 120, f"the pool's look at beat {beat}")

    async def go() -> tuple[int, int]:
        async with celery_pool(redis_server.url(db=DB)) as pool:
            write_heartbeat(client, other, 10)
            await until(lambda: pool.size == 3, 120, "the third process seen")
            try:
                with held(worker.process.pid):
                    _, tasks = one_photo_in_every_style(pool, "job-busy", seed=4)
                    third = pool.submit(WorkOrder("job-busy-3", synthetic_photo(160, 120, seed=5), STYLES[0],
                                                  SETTINGS), 2, "busy-3")
                    await until(lambda: pool.running == 2, 120, "two photos sent")
                    # Two looks at the heartbeats after that: whatever the first let the pool send is sent by
                    # the second (the pool's sends and its reads of Redis take turns on one thread).
                    await looked_at(pool, 1)
                    await looked_at(pool, 2)
                    sent = pool.running, sum(t.started.is_set() for t in [*tasks, third])
            finally:
                client.delete(heartbeat_key(other))
            await within(asyncio.gather(*(t.result for t in [*tasks, third])), 120)
            return sent

    try:
        assert asyncio.run(go()) == (2, 2), "two photos on the two free processes, the third waits in the bot"
    finally:
        client.close()


def test_a_photo_past_telegrams_20_mb_from_a_local_bot_api_is_drawn_by_a_worker(
        worker: RunningWorker, redis_server: RedisServer) -> None:
    """With a Bot API server of one's own, files past 20 MB reach the bot (up to ANIMEBOT_MAX_FILE_MB): the
    claim check carries a 34 MB PNG to a worker, which draws it whole, and the key goes with the answer."""
    url = redis_server.url(db=DB)
    png = grainy_png(synthetic_photo(512, 384, seed=5), 34 << 20)
    source = Image.open(io.BytesIO(png)).size

    async def go() -> Converted:
        async with celery_pool(url) as pool:
            ticket = pool.submit(WorkOrder("job-big", png, STYLES[0], SETTINGS), 1, "big")
            drawn: Converted = await within(ticket.result, 120)
            task = task_id_for("job-big", "big", SECRET)
            photos = redis.Redis.from_url(url)
            try:
                await until(lambda: not photos.exists(photo_key(task)), 120, "the photo gone from Redis")
            finally:
                photos.close()
            return drawn

    drawn = asyncio.run(go())
    assert len(png) >= 34 << 20 and drawn.input_size == source
    assert max(pixels(drawn.data).shape[:2]) == SETTINGS.max_side


def test_a_photo_waits_in_a_key_with_a_lifetime_never_in_the_queue_and_goes_with_its_answer(
        worker: RunningWorker, redis_server: RedisServer) -> None:
    """The claim check (bot/drawing/celery/wire.py): a 1 MB photo's order is a few hundred bytes in Redis's
    queue while it waits, and in kombu's hash of orders being drawn while it is drawn; its bytes wait in a key
    with a lifetime; once the bot has the answer, nothing of 100 KB or more is left in Redis."""
    url = redis_server.url(db=DB)
    photo = noisy_jpeg(1 << 20)
    client = redis_server.client()
    client.select(DB)

    app = make_celery(url, 60)
    node = read_workers(client)[0].name

    async def go() -> tuple[list[Footprint], list[Footprint], list[Footprint]]:
        async with celery_pool(url) as pool:
            # The worker stops taking orders (Celery's own control), so the order waits in Redis's queue: a
            # worker held mid-wait would already have popped it, into its socket.
            app.control.cancel_consumer(QUEUE, destination=[node], reply=True)
            try:
                first = pool.submit(WorkOrder("job-claim", photo, STYLES[0], SETTINGS), 1, "claim-1")
                await until(lambda: client.llen(QUEUE) == 1, 60, "the order queued")
                waiting = footprints(client)
            finally:
                app.control.add_consumer(QUEUE, destination=[node], reply=True)
            await within(first.result, 120)
            await until(lambda: client.hlen("unacked") == 0, 60, "the first order acknowledged")
            with held(*worker.drawing_pids()):  # taken by the main process for a held drawing process
                second = pool.submit(WorkOrder("job-claim", photo, STYLES[1], SETTINGS), 1, "claim-2")
                await until(lambda: client.hlen("unacked") == 1, 60, "the order taken")
                drawing = footprints(client)
            await within(second.result, 120)
            ids = [task_id_for("job-claim", key, SECRET) for key in ("claim-1", "claim-2")]
            await until(lambda: not any(client.exists(photo_key(i)) for i in ids), 120, "the photos gone from Redis")
            return waiting, drawing, footprints(client)

    try:
        waiting, drawing, after = asyncio.run(go())
    finally:
        client.close()
    for seen in (waiting, drawing):
        queued = [f for f in seen if f.kind in ("list", "hash", "zset")]
        assert queued and all(f.largest < 64 << 10 for f in queued), queued
        big = [f for f in seen if f.size >= 100 << 10]
        assert len(big) == 1 and big[0].key.startswith("animebot:photo:job-claim:") and big[0].ttl > 0, big
    assert [f for f in after if f.size >= 100 << 10] == []
