"""``animebot worker`` as an operator runs it: a real redis-server with a password, the real worker
process on the real models, and orders sent the way the bot sends them (``make_celery().send_task``).

The wire format's own tests come first; they need neither Redis nor ../shared.
"""
from __future__ import annotations

import base64
import io
import json
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import redis
from PIL import Image
from celery.utils.saferepr import saferepr
from kombu import Exchange, Producer
from kombu.serialization import dumps, loads

from bot.drawing.celery import wire as wire_module
from bot.drawing.celery.app import QUEUE, RESULT_SERIALIZER, make_celery
from bot.drawing.pool import time_limit
from bot.drawing.celery.wire import (TASK_NAME, BadMessage, BadOrder, Ordered, order_from_message, order_to_message,
                                     photo_key, put_photo, read_workers, Summarized, result_from_message, result_summary,
                                     result_to_message)
from bot.flow.kinds.registry import DOUBLED
from bot.flow.orders import CLIP_ALLOWANCE
from inference.drawer import Drawer, DrawerSpec, WorkFailed, WorkOrder
from inference.engine import DEFAULT_BACKEND
from inference.imageio import ImageLimits
from inference.pipeline import ConvertSettings, Converted
from testkit.pictures import psnr
from testkit.pickles import Opens
from testkit.phone_files import FORMATS as PHONE_FORMATS, as_phone_file
from testkit.redis_server import PASSWORD, RedisServer, turned_away
from testkit.wait import wait_for
from testkit.worker_harness import RunningWorker, caught_drawing, celery_cli, start_worker
from weights.store import ModelStore

THREADS = 2  # the worker's and the in-process reference drawer's, so both compute alike


def wire(message: dict[str, object]) -> object:
    """``message`` as the other side reads it: through msgpack, as kombu packs it (tuples become lists)."""
    return msgpack.unpackb(msgpack.packb(message, use_bin_type=True), raw=False)


ORDER = WorkOrder("job-1", b"\xff\xd8 photo bytes", "hayao",
                  ConvertSettings(max_side=480, fmt="png", faces=False, strength=70, keep_colours=True,
                                  limits=ImageLimits(max_pixels=1000, min_side=8, max_aspect=3.5)))


def test_redis_hands_no_order_out_again_while_its_worker_may_still_be_drawing_it() -> None:
    """kombu gives an unacknowledged order to another worker after the visibility timeout: it was the job
    timeout plus a minute (180 s), so a clip still drawing at 3 minutes, within its 1200 s, was drawn twice."""
    allowances = (1.0, CLIP_ALLOWANCE, DOUBLED.work.allowance, 1000.0)  # a photo, a clip, an HD, and any more
    for job_timeout in (30.0, 120.0, 600.0):
        visible_after = make_celery("redis://127.0.0.1:1/0", job_timeout).conf.broker_transport_options[
            "visibility_timeout"]
        longest = max(time_limit(a, job_timeout) for a in allowances)
        assert visible_after >= longest + 60, (job_timeout, visible_after, longest)


def test_an_order_comes_back_as_it_went_with_its_photo_inside_or_in_a_key_of_its_own() -> None:
    assert order_from_message(wire(order_to_message(ORDER))) == Ordered(ORDER, None)
    doubling = replace(ORDER, operation="double")
    assert order_from_message(wire(order_to_message(doubling))) == Ordered(doubling, None)
    claimed = order_to_message(doubling, photo_key("job-1:abc"))
    assert "data" not in claimed and claimed["photo"] == "animebot:photo:job-1:abc"
    assert order_from_message(wire(claimed)) == Ordered(replace(doubling, data=b""), "animebot:photo:job-1:abc")


def test_a_drawing_and_a_failure_come_back_as_they_went_tuples_and_all() -> None:
    drawn = Converted(b"\x89PNG...", (900, 1200), (360, 480), "hayao", "openvino", {"model_s": 1.5, "encode_s": 0.01},
                      [{"box": [1.0, 2.0, 30.5, 40.0], "score": 0.93}], 1)
    back = result_from_message(wire(result_to_message(drawn)))
    assert back == drawn and isinstance(back, Converted) and isinstance(back.input_size, tuple)
    failed = WorkFailed("job-1", "not_installed", "model 'paprika' is not installed")
    assert result_from_message(wire(result_to_message(failed))) == failed


def test_a_result_is_stored_whole_and_shown_to_celery_s_tools_as_a_summary() -> None:
    """Celery's events carry a result's repr (Flower shows it); Redis gets the message itself."""
    drawn = Converted(bytes(range(256)) * 400, (900, 1200), (360, 480), "hayao", "openvino", {"model_s": 1.5},
                      [{"box": [1.0, 2.0, 30.5, 40.0], "score": 0.93, "pass": True}, {"score": 0.4, "pass": False}])
    failed = WorkFailed("job-1", "not_installed", "model 'paprika' is not installed")
    for reply, shown in ((drawn, "(hayao picture 360x480, 1 face(s) redrawn, 102,400 bytes)"),
                         (failed, "(failed: not_installed)")):
        returned = Summarized(result_to_message(reply), result_summary(reply))
        assert saferepr(returned, 1024) == shown
        stored = dumps(returned, serializer=RESULT_SERIALIZER)
        content_type, encoding, payload = stored
        assert result_from_message(loads(payload, content_type, encoding, accept=[content_type])) == reply


def _settings(**changes: object) -> dict[str, Any]:
    message = order_to_message(ORDER)
    return {**message, "settings": {**message["settings"], **changes}}


@pytest.mark.parametrize(("message", "why"), [
    (["not", "a", "map"], "must be a map, got list"),
    ({**order_to_message(ORDER), "v": 2}, "format version 2, and this release reads 3 to 6"),  # before stickers
    ({**order_to_message(ORDER), "v": 7}, "format version 7, and this release reads 3 to 6"),  # a later release's
    ({**order_to_message(ORDER, "animebot:photo:t"), "photo": "celery-task-meta-t"}, "must be a key starting"),
    ({**order_to_message(ORDER, "animebot:photo:t"), "operation": "paint"}, "operation must be one of draw, double"),
    ({**order_to_message(ORDER, "animebot:photo:t"), "data": b"x"}, "unknown field(s) data"),
    ({**order_to_message(ORDER), "v": 3, "hd": False}, "the field hd, which its format version 3 does not"),
    ({**order_to_message(ORDER), "v": True}, "format version True"),
    ({k: v for k, v in order_to_message(ORDER).items() if k != "v"}, "format version None"),
    ({k: v for k, v in order_to_message(ORDER).items() if k != "style"}, "no field(s) style"),
    ({**order_to_message(ORDER), "callback": "os.system"}, "unknown field(s) callback"),
    ({**order_to_message(ORDER), "data": "text, not bytes"}, "order.data must be bytes, got str"),
    ({**order_to_message(ORDER), "job_id": 7}, "order.job_id must be str, got int"),
    (_settings(max_side="720"), "order.settings.max_side must be int, got str"),
    (_settings(faces=1), "order.settings.faces must be bool, got int"),
    (_settings(max_side=True), "order.settings.max_side must be int, got bool"),
    (_settings(sharpen=True), "order.settings has unknown field(s) sharpen"),
    (_settings(limits={"max_pixels": 1, "min_side": 1}), "order.settings.limits has no field(s) max_aspect"),
])
def test_anything_but_exactly_an_order_is_refused_with_a_sentence(message: object, why: str) -> None:
    with pytest.raises(BadOrder) as refused:
        order_from_message(wire(message) if isinstance(message, dict) else message)
    assert why in refused.value.message


def test_an_order_whose_photo_is_bigger_than_any_bot_sends_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """No bot sends a photo past ANIMEBOT_MAX_FILE_MB's ceiling (2000 MB, a local Bot API's); made small here."""
    monkeypatch.setattr(wire_module, "MAX_PHOTO_BYTES", 1 << 20)
    with pytest.raises(BadOrder) as refused:
        order_from_message(wire({**order_to_message(ORDER), "data": b"x" * ((1 << 20) + 1)}))
    assert "is 1,048,577 bytes, over the 1,048,576 (1 MiB) an order may carry" in refused.value.message


@pytest.mark.parametrize("message", [
    {**result_to_message(WorkFailed("j", "c", "m")), "kind": "pickle"},
    {**result_to_message(WorkFailed("j", "c", "m")), "code": None},
    {**result_to_message(Converted(b"", (1, 1), (1, 1), "s", "b", {}, [])), "input_size": [1, 2, 3]},
    {**result_to_message(Converted(b"", (1, 1), (1, 1), "s", "b", {}, [])), "timings": {"model_s": "slow"}},
])
def test_a_result_that_is_not_exactly_one_is_refused(message: dict[str, object]) -> None:
    with pytest.raises(BadMessage):
        result_from_message(wire(message))


@pytest.fixture(scope="module")
def worker(redis_server: RedisServer, real_store: ModelStore,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWorker]:
    """One worker for the module, ready to draw. On the way out it must stop cleanly (SIGTERM, exit 0)
    with the Redis password nowhere in its log."""
    running = start_worker(tmp_path_factory.mktemp("worker"), real_store.home, redis_server.url(),
                           ANIMEBOT_THREADS=str(THREADS))
    try:
        running.wait_for_log("animebot worker ready: pid")
        running.wait_for_log("celery.apps.worker: animebot@")  # "... ready.": consuming
        yield running
    finally:
        code = running.stop()
    assert code == 0, running.log()
    assert PASSWORD not in running.log()


@pytest.fixture(scope="module")
def app(redis_server: RedisServer) -> Any:
    """The bot's side: its Celery app, which only sends."""
    return make_celery(redis_server.url(), 120)


def send(app: Any, *args: object) -> Any:
    return app.send_task(TASK_NAME, args=list(args), task_id=str(uuid.uuid4()))


def send_claimed(app: Any, client: redis.Redis, order: WorkOrder) -> Any:
    """``order`` as the bot sends it: its photo in a key of its own, and the order naming the key."""
    task_id = str(uuid.uuid4())
    put_photo(client, photo_key(task_id), order.data, 600)
    return app.send_task(TASK_NAME, args=[order_to_message(order, photo_key(task_id))], task_id=task_id)


def test_a_photo_comes_back_drawn_exactly_as_the_bot_s_own_workers_draw_it(
        worker: RunningWorker, app: Any, real_store: ModelStore, shared_photo: Callable[[str], bytes]) -> None:
    orders = [WorkOrder(f"job-{name}", shared_photo(name), "hayao", ConvertSettings())
              for name in ("portrait_900x1200.jpg", "portrait_closeup.jpg")]  # the close-up has a face to redraw
    sent = [send(app, order_to_message(order)) for order in orders]
    drawer = Drawer(DrawerSpec(real_store.home, DEFAULT_BACKEND, THREADS, "hayao"))  # what bot/drawing/pool.py's workers run
    drawer.load()
    for order, task in zip(orders, sent):
        here = drawer.draw(order)
        there = result_from_message(task.get(timeout=120))
        assert isinstance(here, Converted) and isinstance(there, Converted), there
        assert there.data == here.data  # the same bytes, so the same pixels
        assert (there.input_size, there.output_size, there.faces, there.style) == \
            (here.input_size, here.output_size, here.faces, "hayao")
        assert f"task {task.id} (job {order.job_id}): hayao drawn in" in worker.log()
    assert len(there.faces) == 1


def test_an_iphone_s_heic_and_an_avif_are_drawn_upright(worker: RunningWorker, app: Any,
                                                        shared_photo: Callable[[str], bytes]) -> None:
    """The worker's drawing processes read what a phone files, stored sideways with its turn, as the phone shows it."""
    upright = shared_photo("portrait_900x1200.jpg")
    files = [upright] + [as_phone_file(upright, fmt) for fmt in PHONE_FORMATS]
    settings = ConvertSettings(max_side=256, faces=False)
    sent = [send(app, order_to_message(WorkOrder(f"job-phone-{n}", data, "hayao", settings)))
            for n, data in enumerate(files)]
    jpeg, *phone = (result_from_message(task.get(timeout=120)) for task in sent)
    assert isinstance(jpeg, Converted), jpeg
    jpeg_pixels = np.asarray(Image.open(io.BytesIO(jpeg.data)).convert("RGB"))
    for drawn in phone:
        assert isinstance(drawn, Converted), drawn
        assert (drawn.input_size, drawn.output_size) == (jpeg.input_size, jpeg.output_size) == ((900, 1200), (192, 256))
        pixels = np.asarray(Image.open(io.BytesIO(drawn.data)).convert("RGB"))
        assert psnr(pixels, jpeg_pixels) > 30 and psnr(pixels, jpeg_pixels[::-1, ::-1]) < 20  # not upside down


def test_a_style_the_worker_lacks_fails_at_once_with_the_reason(worker: RunningWorker, app: Any,
                                                                shared_photo: Callable[[str], bytes]) -> None:
    photo = shared_photo("square_512.jpg")  # how soon the reason comes back is bench/scale_out.py's to report
    for style, why in (("paprika", "model 'paprika' is not installed"),
                       ("nosuch", "no style 'nosuch'; installed styles: hayao")):
        task = send(app, order_to_message(WorkOrder("job-2", photo, style, ConvertSettings())))
        reply = result_from_message(task.get(timeout=30))
        assert isinstance(reply, WorkFailed) and why in reply.message, reply


def small_order(shared_photo: Callable[[str], bytes]) -> dict[str, object]:
    return order_to_message(WorkOrder("job-3", shared_photo("square_512.jpg"), "hayao", ConvertSettings(max_side=128)))


def test_a_pickled_task_is_refused_unread_and_the_worker_serves_on(worker: RunningWorker, app: Any, tmp_path: Path,
                                                                   shared_photo: Callable[[str], bytes]) -> None:
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(Opens(control)))
    assert control.exists()  # the payload is live: unpickling it does make its file
    marker = tmp_path / "pwned"
    task_id = str(uuid.uuid4())
    # A well-formed Celery task message, its body pickled, published raw to the worker's queue.
    headers, properties, body, _ = app.amqp.as_task_v2(task_id, TASK_NAME, args=[Opens(marker)])
    with app.connection_for_write() as connection:
        Producer(connection).publish(body, serializer="pickle", headers=headers, exchange=Exchange(QUEUE),
                                     routing_key=QUEUE, **properties)
    worker.wait_for_log("Refusing to deserialize untrusted content of type pickle")
    assert isinstance(result_from_message(send(app, small_order(shared_photo)).get(timeout=60)), Converted)
    assert not marker.exists()
    assert app.AsyncResult(task_id).state == "PENDING"  # discarded: no result, no drawing


def test_a_message_that_is_not_exactly_an_order_is_refused_unread_and_the_worker_serves_on(
        worker: RunningWorker, app: Any, shared_photo: Callable[[str], bytes]) -> None:
    order = small_order(shared_photo)
    assert isinstance(order["data"], bytes)
    # JSON is accepted for the tools' control messages, but cannot carry a photo's bytes: an order in
    # it (its photo as text) is read as what it is, not an order.
    in_json = [{**order, "data": base64.b64encode(order["data"]).decode()}]
    for args, serializer in (([{"v": 1, "hello": "world"}], "msgpack"), ([{**order, "v": 0}], "msgpack"),
                             ([order, order], "msgpack"), ([], "msgpack"), (in_json, "json")):
        task = app.send_task(TASK_NAME, args=args, task_id=str(uuid.uuid4()), serializer=serializer)
        task.get(timeout=30, propagate=False)
        assert task.state == "FAILURE"  # Celery stores the rejection, so a sender hears of it at once
        lines = [line for line in worker.log().splitlines() if task.id in line]
        assert any(f"task {task.id} refused: " in line for line in lines), worker.log()
        assert not any("drawn in" in line for line in lines)
    assert isinstance(result_from_message(send(app, order).get(timeout=60)), Converted)


def test_celery_s_own_tools_see_the_worker_and_each_photo_s_events(
        worker: RunningWorker, app: Any, redis_server: RedisServer, shared_photo: Callable[[str], bytes]) -> None:
    """What an operator runs: ``celery --broker URL inspect ping`` and ``stats`` are answered, and a
    photo's task events (what Flower and ``celery events`` show) come with its state and runtime."""
    assert "pong" in celery_cli(redis_server.url(), "inspect", "ping")
    ((node, stats),) = json.loads(celery_cli(redis_server.url(), "inspect", "stats", "-j")).items()
    assert node.startswith("animebot@") and stats["pool"]["max-concurrency"] == 1

    events: list[dict[str, Any]] = []
    with app.connection_for_read() as conn:
        receiver = app.events.Receiver(conn, handlers={"*": events.append})
        listening = threading.Thread(target=receiver.capture, kwargs={"limit": None, "timeout": None}, daemon=True)
        listening.start()
        try:
            wait_for(lambda: any(e["type"] == "worker-heartbeat" for e in events), 120, "a Celery heartbeat")
            task = send(app, small_order(shared_photo))
            assert isinstance(result_from_message(task.get(timeout=60)), Converted)
            wait_for(lambda: any(e["type"] == "task-succeeded" and e["uuid"] == task.id for e in events), 30,
                     "the photo's task-succeeded event")
        finally:
            receiver.should_stop = True
            listening.join(10)
    mine = [e for e in events if e.get("uuid") == task.id]
    assert [e["type"] for e in mine if e["type"] != "task-sent"] == ["task-received", "task-started", "task-succeeded"]
    assert mine[-1]["runtime"] > 0
    assert "untrusted content of type json" not in worker.log()  # the tools' JSON is read (pickle, tested above, is not)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for init to reap it does not)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def test_workers_are_listed_while_they_run_and_vanish_with_their_pool_when_killed(
        redis_server: RedisServer, real_store: ModelStore, tmp_path: Path, shared_photo: Callable[[str], bytes]) -> None:
    url = redis_server.url(db=1)  # a queue and heartbeats of its own: the module's worker is not seen here
    running = start_worker(tmp_path / "home", real_store.home, url, ANIMEBOT_THREADS=str(THREADS))
    client = redis.Redis.from_url(url)
    try:
        running.wait_for_log("animebot worker ready: pid")
        wait_for(lambda: bool(read_workers(client)), 120, "heartbeat")
        (info,) = read_workers(client)
        assert info.name.startswith("animebot@") and info.name.endswith(f"-{running.process.pid}")
        assert "hayao" in info.styles and info.engine.startswith(DEFAULT_BACKEND) and info.faces == "on"
        assert info.task is None and abs(time.time() - info.seen) < 5
        assert f"PPid:\t{running.process.pid}\n" in Path(f"/proc/{info.pid}/status").read_text()  # a pool process
        task = send_claimed(make_celery(url, 120), client,
                            WorkOrder("job-4", shared_photo("group_3_faces.jpg"), "hayao", ConvertSettings()))
        with caught_drawing([running], url):  # the drawing is certainly unfinished when its worker dies
            assert [w.task for w in read_workers(client)] == [task.id]
            running.kill_main()  # the main process only, as the OOM killer would
            # How soon each goes is bench/scale_out.py's to report; these timeouts are safety nets.
            wait_for(lambda: not alive(info.pid), 60, "end of the pool process")
        wait_for(lambda: not read_workers(client), 120, "end of the heartbeat")
        # Not lost: kombu's Redis transport holds the unacknowledged order, and a worker hands it out again
        # once the visibility timeout (a clip's time limit + 60 s) is over.
        assert task.id.encode() in b"".join(client.hvals("unacked"))
        assert PASSWORD not in running.log()
    finally:
        running.kill9()
        client.close()


@pytest.mark.usefixtures("redis_installed")
def test_a_worker_started_while_redis_is_down_waits_for_it_and_never_logs_the_password(
        real_store: ModelStore, tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")  # not started: nothing listens on its port yet
    running = start_worker(tmp_path / "home", real_store.home, server.url(), ready=False)
    try:
        running.wait_for_log("Cannot connect to redis://")
        running.wait_for_log("heartbeat: cannot reach Redis")
        [drawing] = running.drawing_pids()  # the process whose heartbeat that was
        with turned_away(server.port, [drawing]) as tries:  # beats that fail again must not be logged again
            wait_for(lambda: tries[drawing] >= 3, 60, "three more beats", context=running.log)
        server.start()
        running.wait_for_log("heartbeat: Redis is back")
        running.wait_for_log("celery.apps.worker: animebot@", 60)  # "... ready.": connected, consuming
        client = server.client()
        wait_for(lambda: bool(read_workers(client)), 120, "heartbeat")
        client.close()
        assert running.stop() == 0
        log = running.log()
        assert PASSWORD not in log and "redis://:**@127.0.0.1" in log  # Celery's own lines mask it too
        assert log.count("heartbeat: cannot reach Redis") == 1, log  # once an outage, not every beat
    finally:
        running.kill9()
        server.kill()
