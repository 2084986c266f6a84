"""Scaled out: the real bot, two real ``animebot worker`` processes and a real Redis, through the fake Bot API.

Each fault test ends the same way: every photo answered exactly once, with a picture.
"""
from __future__ import annotations

import io
import json
import os
import re
import signal
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from bot.drawing.celery.wire import read_workers
from bot.words.catalogue import t
from inference.drawer import Drawer, DrawerSpec, WorkOrder
from inference.pipeline import ConvertSettings
from testkit.bot_harness import RunningBot, group_chat, pick_style, private_chat, start_bot
from testkit.clip_maker import mp4, pan_frames, read_back
from testkit.models import QUICK_STYLE
from testkit.pictures import psnr, jpeg
from testkit.journal import job_of, jobs_for, settled
from testkit.privacy import redis_holding
from testkit.replies import album_files, answers, buttons, is_answer, is_status, labels
from testkit.fake_telegram import TOKEN, Call, FakeTelegram
from testkit.redis_server import PASSWORD, RedisServer, free_port
from testkit.worker_harness import RunningWorker, caught_drawing, held, start_worker
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
MAX_SIDE = 320
ADMIN = 5999
METRICS_PORT = free_port()
# The cluster's bot draws the cute style, about a ninth of Hayao's cost, where a test is about the
# path a photo takes. A fault test needs drawings long enough to be caught in: its photos ask for
# Hayao (:data:`SLOW`).
SLOW = "/anime hayao"
BOT_ENV = {"ANIMEBOT_MAX_SIDE": str(MAX_SIDE), "ANIMEBOT_RATE_PER_MINUTE": "0", "ANIMEBOT_THREADS": "1",
           "ANIMEBOT_ADMINS": str(ADMIN), "ANIMEBOT_METRICS_PORT": str(METRICS_PORT), "ANIMEBOT_STYLE": QUICK_STYLE}
# For a bot of a test's own, beside the module's cluster (whose bot holds the metrics port), drawing
# Hayao by default as a fresh bot does.
OWN_BOT_ENV = {k: v for k, v in BOT_ENV.items() if k not in ("ANIMEBOT_METRICS_PORT", "ANIMEBOT_STYLE")}


@dataclass
class Cluster:
    fake: FakeTelegram
    redis: RedisServer
    bot: RunningBot
    workers: list[RunningWorker]
    tmp: Path
    store: ModelStore

    def add_worker(self) -> RunningWorker:
        worker = start_worker(self.tmp / f"worker-{len(self.workers)}", self.store.home, self.redis.url())
        self.workers.append(worker)
        return worker

    def restart_bot(self) -> None:
        self.bot = start_bot(self.fake, self.bot.home, self.store.home, ANIMEBOT_BROKER_URL=self.redis.url(), **BOT_ENV)

    def logs(self) -> str:
        return self.bot.log() + "".join(w.log() for w in self.workers)


@pytest.fixture(scope="module")
def cluster(redis_server: RedisServer, real_store: ModelStore,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("scale")
    with FakeTelegram() as fake:
        c = Cluster(fake, redis_server, None, [], tmp, real_store)  # type: ignore[arg-type]
        c.add_worker()
        c.add_worker()
        c.bot = start_bot(fake, tmp / "bot", real_store.home, ANIMEBOT_BROKER_URL=redis_server.url(), **BOT_ENV)
        try:
            yield c
        finally:
            c.bot.stop()
            for w in c.workers:
                w.stop()
            logs = c.logs()
            assert TOKEN not in logs and PASSWORD not in logs


def finals(fake: FakeTelegram, message: dict[str, Any]) -> list[str]:
    """Every final answer to ``message`` ('photo', 'album' or the text), status messages aside."""
    return labels(fake, message, "sendPhoto", "sendMediaGroup", "sendMessage")


def all_answered_once(fake: FakeTelegram, home: Path, messages: list[dict[str, Any]], expected: str = "photo",
                      timeout: float = 600) -> None:
    """Each of ``messages`` answered, the bot's journal settled (every update handled, no job open:
    nothing more will be sent), and then each answer there exactly once."""
    fake.wait_for(lambda: all(finals(fake, m) for m in messages) and settled(home, fake), timeout,
                  "answer to every message, with the journal settled")
    got = [finals(fake, m) for m in messages]
    assert got == [[expected]] * len(messages), got


def burst(fake: FakeTelegram, first_user: int, count: int, held_by: Sequence[RunningWorker] = ()) -> list[dict[str, Any]]:
    """One photo from each of ``count`` users, each a photo never sent before (nothing comes from the
    cache), drawn in Hayao: slow enough for a fault to land while some are drawn and others wait. With
    ``held_by``, they are sent while those workers' main processes are held: none is drawn before all
    are sent, however fast the CPU draws (the photos are made first)."""
    photos = [jpeg(first_user + i, (1280, 960)) for i in range(count)]
    with held(*(w.process.pid for w in held_by)):
        return [fake.photo_message(*private_chat(first_user + i), photo, caption=SLOW) for i, photo in enumerate(photos)]


@dataclass
class FirstPhotos:
    data: bytes  # what ``single`` carries
    single: dict[str, Any]


@pytest.fixture(scope="module")
def first_photos(cluster: Cluster, shared_photo: Callable[[str], bytes]) -> FirstPhotos:
    """Private photos, an album and a group's /anime, drawn by the workers and each answered once: the
    module's first work, which the tests that look at what was drawn (or counted) ask for."""
    fake = cluster.fake
    data = shared_photo("portrait_900x1200.jpg")
    single = fake.photo_message(*private_chat(5001), data)
    others = burst(fake, 5002, 2)
    chat, user = private_chat(5010)
    album = [fake.photo_message(chat, user, shared_photo(name), media_group_id="scale-album")
             for name in ("square_512.jpg", "town_1280x854.jpg")]
    group = group_chat(5020)
    _, member = private_chat(5021)
    photo = fake.photo_message(group, member, shared_photo("street_1279x867.jpg"))
    fake.text_message(group, member, "/anime", reply_to=photo)
    all_answered_once(fake, cluster.bot.home, [single, *others, photo])  # in a group the picture is threaded to the photo
    all_answered_once(fake, cluster.bot.home, album[:1], expected="album")
    return FirstPhotos(data, single)


def test_private_photos_an_album_and_a_group_anime_are_drawn_by_the_workers(
        cluster: Cluster, first_photos: FirstPhotos) -> None:
    fake, data, single = cluster.fake, first_photos.data, first_photos.single
    # The same pixels the bot's own worker processes draw (they run the same Drawer).
    sent = next(c for c in fake.replies_to(single) if c.method == "sendPhoto")
    got = np.asarray(Image.open(io.BytesIO(fake.sent_file(sent, "photo"))).convert("RGB"))
    drawer = Drawer(DrawerSpec(cluster.store.home, "openvino", 1, QUICK_STYLE))
    drawer.load()
    local = drawer.draw(WorkOrder("local", data, QUICK_STYLE, ConvertSettings(max_side=MAX_SIDE)))
    want = np.asarray(Image.open(io.BytesIO(local.data)).convert("RGB"))  # type: ignore[union-attr]
    assert got.shape == want.shape and np.array_equal(got, want)
    drew = [w for w in cluster.workers if "drawn in" in w.log()]
    assert len(drew) == 2, "both workers should have drawn some of the photos"


def test_the_fair_queue_holds_across_workers(cluster: Cluster) -> None:
    fake = cluster.fake
    # Encoded before any is sent: seventeen take over a CPU-second, time in which the workers would
    # draw the first users' photos before the late one even reached the bot.
    data = {(u, n): jpeg(5500 + 10 * u + n, (1280, 960)) for u in range(4) for n in range(4)}
    late_data = jpeg(5599, (1280, 960))
    heavy = [[fake.photo_message(*private_chat(5500 + u), data[u, n], caption=SLOW) for n in range(4)]
             for u in range(4)]  # four users send four photos each, at once
    late = fake.photo_message(*private_chat(5599), late_data, caption=SLOW)
    everyone = [m for photos in heavy for m in photos] + [late]
    all_answered_once(fake, cluster.bot.home, everyone)

    def at(message: dict[str, Any]) -> float:
        return next(c.at for c in fake.replies_to(message) if c.method == "sendPhoto")

    assert all(at(late) < at(photos[-1]) for photos in heavy)  # before every heavy user's last photo


def test_stats_healthz_and_metrics_show_the_workers_and_the_queue(cluster: Cluster, first_photos: FirstPhotos) -> None:
    fake = cluster.fake
    fake.text_message(*private_chat(ADMIN), "/stats")
    stats = fake.wait_for(lambda: [c for c in fake.messages_to(ADMIN) if "Queue:" in c.params["text"]], 60)[0]
    text = str(stats.params["text"])
    assert "2 drawing process(es) in 2 animebot worker(s), via Celery" in text, text
    assert text.count("[hayao") == 2, text  # each worker, with what it draws
    health = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/healthz", timeout=10).read())
    assert health["ok"] is True and "2 drawing process(es)" in health["workers"]
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read().decode()
    assert "animebot_workers_online 2.0" in metrics
    done = re.search(r'animebot_jobs_total\{outcome="done"\} (\d+)', metrics)
    assert done and int(done.group(1)) >= 4, metrics  # at least the first photos' jobs
    assert re.search(r"animebot_photo_draw_seconds_count \d+", metrics)


def test_a_worker_killed_while_drawing_loses_no_photo(cluster: Cluster) -> None:
    fake = cluster.fake
    sent = burst(fake, 5100, 10, held_by=cluster.workers)
    # The victim is whichever worker is caught drawing; its last heartbeat, naming the photo, stays in
    # Redis a few seconds after the kill, long enough for the bot to have seen the photo being drawn.
    with caught_drawing(cluster.workers, cluster.redis.url()) as victim:
        victim.kill9()  # with a photo on it, and more waiting
    cluster.workers.remove(victim)
    all_answered_once(fake, cluster.bot.home, sent)
    assert "(its worker stopped answering); sending it again" in cluster.bot.log()
    cluster.add_worker()


def test_redis_gone_twice_and_back_empty_loses_no_photo(cluster: Cluster) -> None:
    fake = cluster.fake
    down, back = "the broker is unreachable", "the broker is reachable again"
    before = {line: cluster.bot.log().count(line) for line in (down, back)}
    beats_lost = [w.log().count("heartbeat: cannot reach Redis") for w in cluster.workers]

    def bot_said(line: str, times: int) -> bool:
        return cluster.bot.log().count(line) >= before[line] + times

    sent = burst(fake, 5200, 6, held_by=cluster.workers)
    with caught_drawing(cluster.workers, cluster.redis.url()):
        cluster.redis.kill()  # with a photo being drawn and others waiting
    during = burst(fake, 5210, 2)  # accepted and told they wait
    fake.wait_for(lambda: bot_said(down, 1) and all(w.log().count("heartbeat: cannot reach Redis") > n
                                                    for w, n in zip(cluster.workers, beats_lost)),
                  120, "outage seen by the bot and by every worker")
    fake.wait_for(lambda: all(jobs_for(cluster.bot.home, m) in (["queued"], ["running"])
                              and any(is_status(c) for c in fake.replies_to(m)) for m in during),
                  120, "photo taken on and told it waits, for each sent during the outage")
    cluster.redis.start()  # empty: nothing was kept
    fake.wait_for(lambda: bot_said(back, 1), 120, "sign the bot reached the broker again")
    cluster.redis.kill()  # and gone again before everything is back to normal
    fake.wait_for(lambda: bot_said(down, 2), 120, "second outage seen by the bot")
    cluster.redis.start()
    all_answered_once(fake, cluster.bot.home, sent + during)
    assert bot_said(back, 2)  # once after each outage


def test_a_bot_started_while_redis_is_down_says_so_once_and_answers_once_it_is_back(
        redis_installed: None, real_store: ModelStore, tmp_path: Path) -> None:
    """Compose starts the bot beside Redis, not after it: the bot must not die of a broker that is not
    up yet (it restarted in a loop, a traceback each time); a photo sent meanwhile waits for it."""
    redis = RedisServer(tmp_path / "redis")  # not started: its port refuses connections
    worker = None
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home, ANIMEBOT_BROKER_URL=redis.url(), **OWN_BOT_ENV)
        try:
            message = fake.photo_message(*private_chat(5901), jpeg(5901, (640, 480)))
            fake.wait_for(lambda: jobs_for(bot.home, message), 120, "the photo taken on")
            redis.start()
            worker = start_worker(tmp_path / "worker", real_store.home, redis.url())
            all_answered_once(fake, bot.home, [message])
        finally:
            assert bot.stop() == 0
            if worker is not None:
                worker.stop()
            redis.kill()
    log = bot.log()
    said = [line for line in log.splitlines() if " WARNING " in line or " ERROR " in line]
    assert len(said) == 1 and "the broker is unreachable (ConnectionError" in said[0], said
    assert "the broker is reachable again" in log
    assert "Traceback" not in log and PASSWORD not in log


def test_a_clip_is_drawn_by_a_worker_on_another_machine(cluster: Cluster,
                                                         shared_photo: Callable[[str], bytes]) -> None:
    fake = cluster.fake
    clip = mp4(pan_frames(shared_photo("town_1280x854.jpg"), 20, (320, 240)), 10, sound_s=2.0)
    msg = fake.clip_message(*private_chat(5350), clip)
    reply = fake.wait_for(lambda: [c for c in fake.replies_to(msg) if c.method == "sendVideo"], 300)[0]
    out = read_back(fake.sent_file(reply, "video"))
    assert len(out["frames"]) == 20 and out["audio"] == "aac" and out["size"] == (320, 240)
    assert "clip 320x240 -> 320x240, 20 frames (20 drawn) at 10 fps, 2.0 s, sound kept" in cluster.bot.log()


def test_a_clip_on_a_worker_shows_its_frames_and_cancel_stops_it(cluster: Cluster,
                                                                  shared_photo: Callable[[str], bytes]) -> None:
    fake = cluster.fake
    chat, user = private_chat(5351)
    pick_style(fake, chat, user, "hayao", "Hayao")  # a drawing long enough to press Cancel in
    clip = mp4(pan_frames(shared_photo("street_1279x867.jpg"), 150, (480, 360)), 15)  # 10 s: about a minute
    msg = fake.clip_message(chat, user, clip)

    def progress() -> list[Any]:
        return [c for c in fake.calls_to("editMessageText", chat["id"]) if "Drawing frame" in c.params["text"]]

    edit = fake.wait_for(progress, 300)[0]  # the worker's heartbeat carried its frames to the bot
    status = fake.messages[(chat["id"], int(edit.params["message_id"]))]
    fake.press(user, status, edit.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
    answer = fake.wait_for(lambda: answers(fake, msg, "sendMessage", "sendVideo"), 120)[0]
    assert answer.method == "sendMessage" and answer.params["text"].startswith("Cancelled")
    assert "failed: cancelled" in "".join(w.log() for w in cluster.workers)  # the worker stopped, not finished


def drawing_job(cluster: Cluster, job: str) -> tuple[RunningWorker, int] | None:
    """The worker, and its pool process, whose heartbeat says it is drawing ``job``, if one is. The worker is
    known by its main process, which its heartbeat's node name ends with: the pool processes' ids in the
    workers' logs include dead ones, whose ids the system may have given to another worker's process since."""
    client = cluster.redis.client()
    try:
        beats = read_workers(client)
    finally:
        client.close()
    return next(((worker, beat.pid) for beat in beats if beat.task and beat.task.startswith(f"{job}:")
                 for worker in cluster.workers if beat.name.endswith(f"-{worker.process.pid}")), None)


def a_clip_drawn_through_a_crash(cluster: Cluster, user_id: int, photo: bytes,
                                 crash: Callable[[RunningWorker, int], None]) -> None:
    """A Hayao clip, and ``crash`` (given the worker and the pool process) done to the process drawing it
    as soon as its heartbeat says so, seconds before it could finish. Then: once the clip is answered,
    nothing in Redis holds it, under any key; it is answered once; and the bot's log says so in one
    WARNING naming the job (the resend), with no traceback or file id."""
    fake = cluster.fake
    fake.wait_for(lambda: settled(cluster.bot.home, fake), 300, "the module's earlier work settled")
    chat, user = private_chat(user_id)
    pick_style(fake, chat, user, "hayao", "Hayao")  # a clip long enough to be caught drawing
    clip = mp4(pan_frames(photo, 24, (320, 240)), 8)
    logged = len(cluster.bot.log())
    msg = fake.clip_message(chat, user, clip)
    fake.wait_for(lambda: jobs_for(cluster.bot.home, msg), 60, "the clip's job")
    job = job_of(cluster.bot.home, msg)
    crash(*fake.wait_for(lambda: drawing_job(cluster, job), 300, "a process drawing the clip"))
    fake.wait_for(lambda: answers(fake, msg, "sendVideo", "sendMessage"), 600, "the clip's answer")
    client = cluster.redis.client()
    try:
        assert redis_holding(client, clip) == []
    finally:
        client.close()
    fake.wait_for(lambda: settled(cluster.bot.home, fake), 120, "the journal settled")
    assert labels(fake, msg, "sendVideo", "sendMessage") == ["video"]
    said = cluster.bot.log()[logged:]
    warned = [line for line in said.splitlines() if " WARNING " in line and f"job {job}" in line]
    assert len(warned) == 1 and "sending it again" in warned[0], warned
    assert "Traceback" not in said and msg["video"]["file_id"] not in said


def test_a_drawing_process_killed_mid_clip_is_logged_once_and_its_clip_leaves_redis(
        cluster: Cluster, shared_photo: Callable[[str], bytes]) -> None:
    """kill -9 of the pool process drawing a clip, its worker living on: the worker acknowledges the
    order and the bot sends it again itself, saying so once."""
    ready = "animebot worker ready: pid"
    replaced: list[tuple[RunningWorker, int]] = []

    def kill_process(worker: RunningWorker, pid: int) -> None:
        replaced.append((worker, worker.log().count(ready)))
        os.kill(pid, signal.SIGKILL)

    a_clip_drawn_through_a_crash(cluster, 5360, shared_photo("town_1280x854.jpg"), kill_process)
    (worker, before), = replaced  # the cluster's later tests want both processes
    cluster.fake.wait_for(lambda: worker.log().count(ready) > before, 300, "the killed process's replacement ready")


def test_a_worker_killed_whole_mid_clip_leaves_no_copy_of_it_in_redis(
        cluster: Cluster, shared_photo: Callable[[str], bytes]) -> None:
    """kill -9 of a whole worker drawing a clip: Redis keeps its unacknowledged order until the visibility
    timeout, but the order holds no clip (a claim check), and the bot, having sent the clip again and
    answered it, deletes the clip's key: no copy of the clip is left in Redis."""
    def kill_worker(worker: RunningWorker, pid: int) -> None:
        worker.kill9()
        cluster.workers.remove(worker)

    a_clip_drawn_through_a_crash(cluster, 5361, shared_photo("street_1279x867.jpg"), kill_worker)
    cluster.add_worker()


def test_the_bot_killed_mid_burst_answers_everything_after_its_restart(cluster: Cluster) -> None:
    fake = cluster.fake
    sent = burst(fake, 5300, 8)
    # Killed once a photo is answered and recorded so (a kill between the two repeats that answer:
    # the one window docs/behaviour.md owns up to), with the others on workers and waiting.
    fake.wait_for(lambda: any(jobs_for(cluster.bot.home, m) == ["done"] for m in sent), 300)
    cluster.bot.kill9()
    # The kill can land on the photo Telegram has taken but the journal has not yet recorded: that one
    # may come twice. Two workers finish two photos within milliseconds of each other, but answers pass
    # that window one at a time (tests/flow/test_bot_answer_window.py), so never two.
    in_window = [i for i, m in enumerate(sent) if finals(fake, m) and jobs_for(cluster.bot.home, m) != ["done"]]
    cluster.restart_bot()
    fake.wait_for(lambda: all(finals(fake, m) for m in sent) and settled(cluster.bot.home, fake), 600,
                  "answer to every photo, with the journal settled")  # nothing more will be sent
    got = [finals(fake, m) for m in sent]
    assert all(a == ["photo"] or (i in in_window and a == ["photo", "photo"]) for i, a in enumerate(got)), \
        (got, in_window)
    assert len(in_window) <= 1, in_window  # the window is milliseconds wide: never two photos in it


def test_a_style_no_worker_has_gets_a_clear_sentence_not_a_hang(
        redis_server: RedisServer, real_store: ModelStore, hayao_file: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    if "cute" not in {e.name for e in real_store.installed("style")}:
        pytest.skip("the cute style is not in ../shared/models")
    tmp = tmp_path_factory.mktemp("no-style")
    lean = ModelStore(tmp / "lean")  # a worker machine given Hayao only
    lean.import_file(hayao_file)
    url = redis_server.url(db=2)  # a queue of its own: the cluster's workers, which have cute, are not asked
    worker = start_worker(tmp / "worker", lean.home, url)
    try:
        with FakeTelegram() as fake:
            bot = start_bot(fake, tmp / "bot", real_store.home, ANIMEBOT_BROKER_URL=url,
                            ANIMEBOT_MAX_SIDE=str(MAX_SIDE), ANIMEBOT_RATE_PER_MINUTE="0")
            try:
                cute = fake.photo_message(*private_chat(5400), jpeg(5400), caption="/anime cute")
                plain = fake.photo_message(*private_chat(5401), jpeg(5401))
                all_answered_once(fake, bot.home, [plain])
                fake.wait_for(lambda: finals(fake, cute), 120)
                assert finals(fake, cute) == ["That style can't be drawn right now: none of my drawing machines "
                                               "has it. Please pick another with /style."]
            finally:
                assert bot.stop() == 0
    finally:
        worker.stop()


def final_replies(fake: FakeTelegram, message: dict[str, Any]) -> list[Call]:
    """The bot's replies to ``message``, status messages (and the count of an All styles' album) aside."""
    return [c for c in fake.replies_to(message) if c.method != "sendMessage"
            or (is_answer(c) and not re.match(r"\d+ styles: ", c.params["text"]))]


def all_styles_answers(fake: FakeTelegram, user: dict[str, Any], original: dict[str, Any],
                       count: int = 1) -> list[Call]:
    """Press All styles under the result of ``original``; the first ``count`` answers that follow."""
    result = fake.wait_for(lambda: final_replies(fake, original), 300)[0]
    assert result.method == "sendPhoto"
    press = next(d for d in buttons(result) if d.startswith("a:"))
    fake.press(user, result.result, press)
    return list(fake.wait_for(lambda: (lambda after: after if len(after) >= count else None)(
        final_replies(fake, original)[1:]), 600))[:count]


def test_all_styles_on_two_workers_comes_back_each_tile_in_its_own_style(
        redis_server: RedisServer, styles_store: ModelStore, shared_photo: Callable[[str], bytes],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every style of one photo at once, over two workers: each tile is what that style draws of the
    photo, and no two are the same picture (they used to share one Celery task id)."""
    tmp = tmp_path_factory.mktemp("all-styles")
    url = redis_server.url(db=4)
    workers = [start_worker(tmp / f"worker-{i}", styles_store.home, url) for i in range(2)]
    try:
        with FakeTelegram() as fake:
            bot = start_bot(fake, tmp / "bot", styles_store.home, ANIMEBOT_BROKER_URL=url, **OWN_BOT_ENV)
            try:
                chat, user = private_chat(5450)
                photo = shared_photo("tall_1280x1707.jpg")
                original = fake.photo_message(chat, user, photo)
                (album,) = all_styles_answers(fake, user, original)
                assert album.method == "sendMediaGroup", album.method
            finally:
                assert bot.stop() == 0, bot.log()
            tiles = []
            for caption, sent in album_files(fake, album):
                tiles.append((caption.split("\n")[0], np.asarray(Image.open(io.BytesIO(sent)).convert("RGB"))))
    finally:
        for w in workers:
            w.stop()
    styles = {t("en", f"style_name_{e.name}"): e.name for e in styles_store.installed("style")}
    assert len(tiles) == len(styles) - 1 and "Hayao" not in [label for label, _ in tiles]
    drawer = Drawer(DrawerSpec(styles_store.home, "openvino", 1, "hayao"))
    drawer.load()
    for label, got in tiles:
        local = drawer.draw(WorkOrder("local", photo, styles[label], ConvertSettings(max_side=MAX_SIDE)))
        want = np.asarray(Image.open(io.BytesIO(local.data)).convert("RGB"))  # type: ignore[union-attr]
        assert got.shape == want.shape and psnr(got, want) >= 30, label
    for i, (a, x) in enumerate(tiles):
        for b, y in tiles[:i]:
            assert x.shape != y.shape or psnr(x, y) < 30, f"{a} and {b} are the same picture"


def test_all_styles_with_one_style_a_worker_has_names_it_and_counts_styles(
        redis_server: RedisServer, styles_store: ModelStore, hayao_file: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The bot has seven styles, its only worker two: All styles under a Hayao result draws Cute alone,
    captioned with its name, and says how many of the styles could not be drawn."""
    tmp = tmp_path_factory.mktemp("two-of-seven")
    lean = ModelStore(tmp / "lean")
    lean.import_file(hayao_file)
    lean.import_file(styles_store.path(styles_store.entry("cute")))
    url = redis_server.url(db=5)
    worker = start_worker(tmp / "worker", lean.home, url)
    try:
        with FakeTelegram() as fake:
            bot = start_bot(fake, tmp / "bot", styles_store.home, ANIMEBOT_BROKER_URL=url, **OWN_BOT_ENV)
            try:
                chat, user = private_chat(5460)
                original = fake.photo_message(chat, user, jpeg(5460))
                drawn, said = all_styles_answers(fake, user, original, count=2)
            finally:
                assert bot.stop() == 0, bot.log()
    finally:
        worker.stop()
    assert drawn.method == "sendPhoto" and drawn.params["caption"] == "Cute"
    assert said.params["text"] == ("5 of 6 styles could not be drawn: That style can't be drawn right now: none of my "
                                   "drawing machines has it. Please pick another with /style.")
