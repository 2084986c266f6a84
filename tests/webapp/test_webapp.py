"""The Mini App: Telegram's signature checked, the API over the bot's real HTTP server, and the page.

The initData check is tested on its own (valid, forged, stale, fields missing, another bot's
token). Then a real bot (the tiny generator, a real worker, real SQLite), polling the fake Bot
API with ``ANIMEBOT_METRICS_PORT`` and ``ANIMEBOT_WEBAPP_URL`` set, is used as the page uses it:
over HTTP, signed as Telegram signs, by its user and by others. The page itself is
tests/webapp/test_webapp_page.py's.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import numpy as np
import pytest
from PIL import Image

from bot.webapp.auth import MAX_AGE_S, Unauthorized, check_init_data, from_header
from bot.webapp.links import Links
from inference.colour import blend
from testkit.bot_harness import REPO, group_chat, private_chat, start_bot
from testkit.bot_in_process import bot_in_process
from testkit.fake_telegram import BOT_USER, TOKEN, Call, FakeTelegram
from testkit.journal import drawn_by, journal_rows
from testkit.redis_server import RedisServer, free_port
from testkit.webapp import QUOTA, URL, App, call, drawn_photo, init_data, unsigned
from testkit.words import sentences
from testkit.wait import wait_for
from testkit.worker_harness import caught_drawing, start_worker
from weights.store import ModelStore



# --- the signature, on its own ---------------------------------------------------------------

def test_initdata_signed_for_this_bot_within_the_hour_names_its_user() -> None:
    now = time.time()
    user = check_init_data(init_data(5001, TOKEN, now - 60, lang="zh"), TOKEN, now)
    assert (user.id, user.language_code) == (5001, "zh")
    assert check_init_data(init_data(5001, TOKEN, now - MAX_AGE_S + 30), TOKEN, now).id == 5001
    assert from_header("tma " + init_data(5002, TOKEN, now), TOKEN, now).id == 5002


@pytest.mark.parametrize("why", ["forged user", "forged hash", "stale", "two days old", "from the future",
                                 "no hash", "no user", "no auth_date", "another bot", "a field twice",
                                 "not a query", "empty"])
def test_initdata_that_telegram_did_not_sign_for_this_bot_now_is_refused(why: str) -> None:
    now = time.time()
    good = init_data(5001, TOKEN, now)
    fields = dict(parse_qsl(good))
    forged = {
        "forged user": good.replace("5001", "5009"),
        "forged hash": good[:-1] + ("0" if good[-1] != "0" else "1"),
        "stale": init_data(5001, TOKEN, now - MAX_AGE_S - 60),
        "two days old": init_data(5001, TOKEN, now - 2 * 86400),
        "from the future": init_data(5001, TOKEN, now + 3600),
        "no hash": good.split("&hash=")[0],
        "no user": init_data(5001, TOKEN, now, drop=("user",)),
        "no auth_date": init_data(5001, TOKEN, now, drop=("auth_date",)),
        "another bot": init_data(5001, "123456:ANOTHER-bots-token", now),
        "a field twice": good + f"&auth_date={fields['auth_date']}",
        "not a query": "this is not initData",
        "empty": "",
    }[why]
    with pytest.raises(Unauthorized):
        check_init_data(forged, TOKEN, now)


def test_the_header_must_say_tma() -> None:
    good = init_data(5001, TOKEN)
    for header in (None, "", good, f"Bearer {good}", "tma "):
        with pytest.raises(Unauthorized):
            from_header(header, TOKEN, time.time())


def test_a_picture_address_is_for_one_user_one_picture_and_expires() -> None:
    links, other_key = Links(b"k" * 32), Links(b"j" * 32)
    now = 1_800_000_000.0
    url = links.image(7, "AbCdEfGhIjKl", "photo", now)
    *_, uid, rid, variant, expires, mac = url.split("/")
    assert links.valid(7, rid, variant, int(expires), mac, now)
    assert links.valid(7, rid, variant, int(expires), mac, now + 3600)  # at least an hour
    assert not links.valid(7, rid, variant, int(expires), mac, now + 3 * 3600)  # at most two
    assert not links.valid(8, rid, variant, int(expires), mac, now)  # another user
    assert not links.valid(7, rid, "image", int(expires), mac, now)  # another picture of it
    assert not links.valid(7, rid, variant, int(expires) + 3600, mac, now)  # a longer life
    assert not other_key.valid(7, rid, variant, int(expires), mac, now)  # another bot's database


# --- the API, on a real bot ----------------------------------------------------------------------

def web_app_buttons(answer: Call) -> list[str]:
    return [b["web_app"]["url"] for row in answer.params["reply_markup"]["inline_keyboard"] for b in row
            if "web_app" in b]


def test_the_mini_app_is_offered_in_the_menu_and_under_private_results_and_served_at_app(app: App) -> None:
    assert app.fake.menu_button == {"type": "web_app", "text": "Studio", "web_app": {"url": URL}}
    _, answer = drawn_photo(app, 6101, seed=61)
    (opened,) = web_app_buttons(answer)
    assert opened.startswith(URL + "?r=")
    group = group_chat(6100)
    _, in_group = drawn_photo(app, 6102, seed=62, chat=group)
    assert web_app_buttons(in_group) == []  # Telegram refuses Mini App buttons outside private chats

    page = app.get("/app")
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert b"/app/static/app.js" in page.body and "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert app.get("/app/static/app.css").headers["Content-Type"].startswith("text/css")
    wanted, served = ["app.js"], set()  # the entry module, then every module it imports, and theirs
    while wanted:
        name = wanted.pop()
        reply = app.get(f"/app/static/{name}")
        assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/javascript") and reply.body, name
        served.add(name)
        wanted += [n for n in re.findall(r'from "\./([\w.]+)"', reply.body.decode()) if n not in served]
    assert served == {path.name for path in (REPO / "bot/webapp/page").glob("*.js")}
    assert app.get("/app/static/index.py").status == 404
    assert app.get("/app/static/..%2Fapi.py").status == 404


def test_the_page_says_what_the_catalogue_says_in_every_language(app: App) -> None:
    """One table of sentences: the page's are served from bot/words/locales/, as a translator left them there
    (read here with Babel, apart from the bot's reader), and every sentence app.js names is among them."""
    html = app.get("/app").body.decode()
    found = re.search(r'<script id="words" type="application/json">(.*?)</script>', html, re.S)
    assert found, "the page has its sentences"
    wanted = {lang: {"$dir": "rtl" if lang in ("ar", "fa") else "ltr",
                     **{key.removeprefix("page_"): text for key, text in sentences(lang).items() if key.startswith("page_")}}
              for lang in ("en", "zh", "ru", "es", "pt-br", "id", "fa", "ar", "uk", "uz", "tr")}
    assert json.loads(found.group(1)) == wanted  # every language, and which way each reads
    scripts = (REPO / "bot/webapp/page").glob("*.js")
    named = {key for path in scripts for key in re.findall(r'\bT\("(\w+)"', path.read_text())}
    assert len(named) > 20 and named <= wanted["en"].keys()


def test_the_api_answers_401_and_nothing_more_to_calls_telegram_did_not_sign_now(app: App) -> None:
    now = time.time()
    good = init_data(6201, TOKEN, now)
    for auth in (None, good.replace("6201", "6202"), init_data(6201, TOKEN, now - 2 * 86400),
                 init_data(6201, "123456:ANOTHER-bots-token", now)):
        refused = app.get("/app/api/results", auth=auth) if auth else app.get("/app/api/results")
        assert (refused.status, refused.body) == (401, b"unauthorized")
    assert app.get("/app/api/results", auth=good).status == 200


def test_a_user_lists_their_results_with_the_photo_and_nobody_else_sees_them(app: App) -> None:
    owner, stranger = 6301, 6302
    data, answer = drawn_photo(app, owner, seed=63)
    (result,) = app.results(owner)
    assert web_app_buttons(answer) == [f"{URL}?r={result['id']}"]
    assert (result["style"], result["strength"], result["keep_colours"]) == ("tiny", 100, False)
    drawing, photo = app.picture(result["image"]), app.picture(result["photo"])
    sent = Image.open(io.BytesIO(app.fake.sent_file(answer, "photo"))).convert("RGB")
    assert drawing.size == photo.size == sent.size == (result["width"], result["height"])
    assert np.abs(np.asarray(drawing, float) - np.asarray(sent, float)).mean() < 1  # the picture the chat got
    original = np.asarray(Image.open(io.BytesIO(data)).convert("RGB").resize(photo.size), float)
    assert np.abs(np.asarray(photo, float) - original).mean() < 3, "the photo is the user's own, at the drawing's size"
    assert np.abs(np.asarray(drawing, float) - original).mean() > 10
    assert result["base"] == result["image"]  # drawn at full strength: the drawing is the base of every preview
    assert app.picture(result["thumb"]).size == (240, 240)  # the list's tile: not the whole drawing

    assert app.results(stranger) == []
    assert app.get(f"/app/api/results/{result['id']}", stranger).status == 404
    for wrong in ("nope", "x" * 80, result["id"].lower() if result["id"] != result["id"].lower() else "0" * 12):
        answer = app.get(f"/app/api/results/{wrong}", owner)
        assert answer.status == 404 and "no longer kept" in answer.json()["error"], wrong
    assert app.post("/app/api/draw", stranger, {"id": result["id"], "style": "tiny", "strength": 50,
                                                "keep_colours": False}).status == 404
    *_, uid, rid, variant, expires, mac = result["image"].split("/")
    assert call(app.base, result["image"].replace(f"/{uid}/", f"/{stranger}/")).status == 403
    assert call(app.base, result["image"].replace(mac, mac[::-1])).status == 403
    assert app.get(f"/app/api/results/{result['id']}", owner).json()["result"]["id"] == result["id"]


def test_a_new_strength_is_drawn_through_the_queue_once_and_said_nowhere_else(app: App) -> None:
    uid = 6401
    _, answer = drawn_photo(app, uid, seed=64)
    (first,) = app.results(uid)
    chat_before = len(app.fake.messages_to(uid))
    asked = app.post("/app/api/draw", uid, {"id": first["id"], "style": "tiny", "strength": 40, "keep_colours": False})
    assert asked.status == 200
    job = asked.json()["job"]
    state = app.finished(job, uid)
    assert state["state"] == "done" and state["error"] is None
    new = state["result"]
    assert (new["strength"], new["keep_colours"], new["style"]) == (40, False, "tiny") and new["id"] != first["id"]
    assert new["base"] is not None  # its full-strength drawing is cached: the page previews every strength exactly
    assert [r["id"] for r in app.results(uid)] == [new["id"], first["id"]]
    rows = journal_rows(app.bot.home, "SELECT user_id, state, drawn, json_extract(request, '$.answer') FROM jobs"
                        " WHERE job_id = ?", job)
    assert rows == [(uid, "done", 1, "app")]  # journalled, drawn by a worker, counted against the quota
    assert len(app.fake.messages_to(uid)) == chat_before  # no status message, no photo: the page shows it

    photo, base = (np.asarray(app.picture(new[k])) for k in ("photo", "base"))
    expected = blend(photo, base, 0.4).astype(float)
    got = np.asarray(app.picture(new["image"]), float)
    assert np.abs(got - expected).mean() < 4, "what the page previews (its blend of photo and base) is what was drawn"
    assert np.abs(got - np.asarray(base, float)).mean() > 8

    again = app.post("/app/api/draw", uid, {"id": first["id"], "style": "tiny", "strength": 40, "keep_colours": False})
    repeat = app.finished(again.json()["job"], uid)
    assert repeat["result"]["id"] == new["id"] and drawn_by(app.bot.home, uid) == 2  # from the cache: free


def test_styles_are_tiles_of_the_users_photo_and_a_result_goes_to_the_chat_or_into_a_sticker(app: App) -> None:
    uid = 6501
    _, answer = drawn_photo(app, uid, seed=65)
    (result,) = app.results(uid)
    path = f"/app/api/results/{result['id']}/styles"
    (blank,) = app.get(path, uid).json()["styles"]
    assert (blank["name"], blank["image"]) == ("tiny", None) and blank["title"]
    assert app.finished(app.post(path, uid).json()["job"], uid)["state"] == "done"
    (tile,) = app.get(path, uid).json()["styles"]
    assert max(app.picture(tile["image"]).size) == 384

    sent_before = len(app.fake.calls_to("sendPhoto", uid))
    send = app.post(f"/app/api/results/{result['id']}/send", uid, {"as": "photo"})
    assert app.finished(send.json()["job"], uid) == {"state": "done", "ahead": None, "result": None, "error": None,
                                                     "stalled": False}
    (again,) = app.fake.calls_to("sendPhoto", uid)[sent_before:]
    assert again.params["photo"] == answer.result["photo"][-1]["file_id"]  # by reference: no upload
    sticker = app.post(f"/app/api/results/{result['id']}/send", uid, {"as": "sticker"})
    assert app.finished(sticker.json()["job"], uid)["state"] == "done"
    (added,) = app.fake.calls_to("sendSticker", uid)
    assert added.result["sticker"]["set_name"].endswith("_by_" + BOT_USER["username"])


def said_to(app: App, uid: int) -> int:
    """Everything the bot has sent into the user's chat."""
    return sum(len(app.fake.calls_to(method, uid)) for method in ("sendMessage", "sendPhoto", "sendDocument"))


def test_hd_is_doubled_through_the_queue_once_and_kept_for_its_picture(hd_app: App) -> None:
    """Real-CUGAN on the worker: the page's HD is exactly twice the drawing, drawn once (one photo of the quota),
    then from the cache; the chat hears nothing of it."""
    uid = 6451
    drawn_photo(hd_app, uid, seed=645)
    (result,) = hd_app.results(uid)
    assert (result["hd_available"], result["hd"]) == (True, None)
    ((key,),) = journal_rows(hd_app.bot.home, "SELECT value FROM secrets WHERE name = 'ids'")
    early = call(hd_app.base, Links(bytes(key)).image(uid, result["id"], "hd"))  # signed as the bot signs
    assert (early.status, early.body) == (404, b"gone")  # not made yet
    chat_before = said_to(hd_app, uid)
    asked = hd_app.post(f"/app/api/results/{result['id']}/hd", uid)
    assert asked.status == 200
    done = hd_app.finished(asked.json()["job"], uid)
    assert done["state"] == "done" and done["result"]["id"] == result["id"], done
    assert drawn_by(hd_app.bot.home, uid) == 2  # the photo, and its HD
    hd = done["result"]["hd"]
    assert hd and unsigned(hd_app.results(uid)[0]["hd"]) == unsigned(hd)
    picture = call(hd_app.base, hd)
    assert picture.status == 200
    assert picture.headers["Content-Disposition"] == 'inline; filename="anime-hayao-hd.jpg"'  # saved under a name
    doubled = Image.open(io.BytesIO(picture.body))
    assert doubled.size == (2 * result["width"], 2 * result["height"])
    drawing = np.asarray(hd_app.picture(result["image"]), float)
    halved = np.asarray(doubled.convert("RGB").resize(drawing.shape[1::-1], Image.Resampling.BOX), float)
    assert np.abs(halved - drawing).mean() < 6, "the HD is that drawing, doubled"

    again = hd_app.finished(hd_app.post(f"/app/api/results/{result['id']}/hd", uid).json()["job"], uid)
    assert again["state"] == "done" and unsigned(again["result"]["hd"]) == unsigned(hd)
    assert drawn_by(hd_app.bot.home, uid) == 2, "the second HD is the cached one: free"
    assert said_to(hd_app, uid) == chat_before


def test_hd_where_it_is_not_installed_is_refused_in_one_sentence(app: App) -> None:
    uid = 6452
    drawn_photo(app, uid, seed=646)
    (result,) = app.results(uid)
    assert (result["hd_available"], result["hd"]) == (False, None)
    refused = app.post(f"/app/api/results/{result['id']}/hd", uid)
    assert refused.status == 409 and refused.json() == {"error": "HD is not available on this bot."}
    assert call(app.base, app.results(uid)[0]["image"]).status == 200
    assert journal_rows(app.bot.home, "SELECT COUNT(*) FROM jobs WHERE json_extract(request, '$.kind') = 'hd'") == [(0,)]


def test_bad_requests_get_one_sentence_a_spent_quota_its_own_and_a_flood_429(app: App) -> None:
    uid = 6601
    _, _ = drawn_photo(app, uid, seed=66)
    (result,) = app.results(uid)
    for body in ({"id": result["id"], "style": "tiny", "strength": 101, "keep_colours": False},
                 {"id": result["id"], "style": "tiny", "strength": True, "keep_colours": False},
                 {"id": result["id"], "style": "no-such-style", "strength": 50, "keep_colours": False},
                 {"id": result["id"], "style": "tiny", "strength": 50}, ["a list"]):
        bad = app.post("/app/api/draw", uid, body)
        assert bad.status == 400 and bad.json() == {"error": "That request was not understood; reload the page."}
    assert app.post("/app/api/draw", uid, raw=b"{not json").status == 400
    assert app.post("/app/api/draw", uid, raw=b"{" + b" " * 5000 + b"}").status == 413
    assert app.get("/app/api/jobs/app-nosuchjob", uid).status == 404
    assert call(app.base, "/app/api/results", "x" * 9000).status in (400, 431)  # past aiohttp's header limit
    logged = app.bot.log()
    assert "refused a malformed HTTP request (LineTooLong)" in logged and "x" * 64 not in logged
    assert "Traceback" not in logged
    assert app.get("/app/api/results?offset=-1", uid).status == 400

    for strength in range(10, 10 * QUOTA, 10):  # the photo was one of the quota; these are the rest
        job = app.post("/app/api/draw", uid, {"id": result["id"], "style": "tiny", "strength": strength,
                                              "keep_colours": False}).json()["job"]
        assert app.finished(job, uid)["state"] == "done"
    chat_before = len(app.fake.messages_to(uid))
    over = app.post("/app/api/draw", uid, {"id": result["id"], "style": "tiny", "strength": 5, "keep_colours": True})
    refused = app.finished(over.json()["job"], uid)
    assert refused["state"] == "failed" and "today" in refused["error"], refused
    sticker = app.post(f"/app/api/results/{result['id']}/send", uid, {"as": "sticker"})  # bound for the chat...
    assert "today" in app.finished(sticker.json()["job"], uid)["error"]
    assert len(app.fake.messages_to(uid)) == chat_before  # ...but refused on the page: nothing in the chat

    flood = [app.get("/app/api/results", 6602).status for _ in range(130)]
    assert flood.count(429) >= 10 and flood[0] == 200
    limited = app.get("/app/api/results", 6602)
    assert limited.status == 429 and int(limited.headers["Retry-After"]) > 0
    assert app.get("/app/api/results", 6603).status == 200  # one user's flood is theirs alone


def test_a_result_forgotten_is_gone_from_the_page(app: App) -> None:
    from testkit.privacy import forget

    uid = 6701
    chat, user = private_chat(uid)
    data, _ = drawn_photo(app, uid, seed=67)
    (result,) = app.results(uid)
    app.picture(result["photo"])  # the photo fetched again for the page: theirs to forget too
    sha = hashlib.sha256(data).hexdigest()
    assert journal_rows(app.bot.home, "SELECT COUNT(*) FROM results WHERE content_sha256 = ?", sha) == [(2,)]
    forget(app.fake, chat, user)
    assert app.results(uid) == []
    assert call(app.base, result["photo"]).status == 404 and call(app.base, result["image"]).status == 404
    assert journal_rows(app.bot.home, "SELECT COUNT(*) FROM results WHERE content_sha256 = ?", sha) == [(0,)]


def test_after_a_restart_the_journal_says_how_the_pages_job_ended(tiny_store: ModelStore, tmp_path: Path) -> None:
    uid = 6801
    home = tmp_path / "home"
    with FakeTelegram() as fake:
        first_port, second_port = free_port(), free_port()
        env = {"ANIMEBOT_STYLE": "tiny", "ANIMEBOT_BACKEND": "onnxruntime", "ANIMEBOT_WEBAPP_URL": URL}
        with bot_in_process(fake, home, tiny_store.home, ANIMEBOT_METRICS_PORT=str(first_port), **env) as bot:
            before = App(bot, fake, first_port)
            drawn_photo(before, uid, seed=68)
            (result,) = before.results(uid)
            job = before.post("/app/api/draw", uid, {"id": result["id"], "style": "tiny", "strength": 70,
                                                     "keep_colours": True}).json()["job"]
            kept = before.finished(job, uid)["result"]
        with bot_in_process(fake, home, tiny_store.home, ANIMEBOT_METRICS_PORT=str(second_port), **env) as bot:
            after = App(bot, fake, second_port)
            state = after.get(f"/app/api/jobs/{job}", uid).json()
            assert state["state"] == "done" and state["result"]["id"] == kept["id"]
            assert (state["result"]["strength"], state["result"]["keep_colours"]) == (70, True)
            assert after.get(f"/app/api/jobs/{job}", uid + 1).status == 404  # nobody else's, even from the journal
            assert [r["id"] for r in after.results(uid)] == [kept["id"], result["id"]]


def test_scaled_out_the_pages_drawings_cross_redis_to_the_workers(redis_server: RedisServer, tiny_store: ModelStore,
                                                                   tmp_path: Path) -> None:
    """Two `animebot worker`s draw what the page asks for, through Celery over Redis; the chat hears nothing. The
    admin view names the worker processes from their heartbeats, and whose photo one of them is drawing."""
    uid, port = 6901, free_port()
    env = {"ANIMEBOT_STYLE": "tiny", "ANIMEBOT_BACKEND": "onnxruntime", "ANIMEBOT_RATE_PER_MINUTE": "0",
           "ANIMEBOT_METRICS_PORT": str(port), "ANIMEBOT_WEBAPP_URL": URL, "ANIMEBOT_BROKER_URL": redis_server.url(),
           "ANIMEBOT_ADMINS": str(uid)}
    with FakeTelegram() as fake:
        workers = [start_worker(tmp_path / f"worker{i}", tiny_store.home, redis_server.url(), ANIMEBOT_BACKEND="onnxruntime",
                                ANIMEBOT_STYLE="tiny") for i in range(2)]
        bot = None
        try:
            bot = start_bot(fake, tmp_path / "bot", tiny_store.home, **env)
            app = App(bot, fake, port)  # type: ignore[arg-type]  # a bot process reads the same
            drawn_photo(app, uid, seed=69)
            (first,) = app.results(uid)
            chat_before = len(fake.messages_to(uid))
            jobs = [app.post("/app/api/draw", uid, {"id": first["id"], "style": "tiny", "strength": strength,
                                                    "keep_colours": False}).json()["job"] for strength in (30, 60)]
            kept = [app.finished(job, uid)["result"] for job in jobs]
            assert [r["strength"] for r in kept] == [30, 60] and app.picture(kept[1]["image"]).size == \
                (first["width"], first["height"])
            drew = "".join(worker.log() for worker in workers)
            assert all(f"(job {job})" in drew for job in jobs), drew  # a worker drew each, not the bot
            assert len(fake.messages_to(uid)) == chat_before
            assert {r["id"] for r in app.results(uid)} == {first["id"], *(r["id"] for r in kept)}

            job = app.post("/app/api/draw", uid, {"id": first["id"], "style": "tiny", "strength": 45,
                                                  "keep_colours": False}).json()["job"]
            with caught_drawing(workers, redis_server.url()):  # held mid-photo: look before its beat goes stale
                def admin_view() -> dict[str, Any] | None:
                    view: dict[str, Any] = app.get("/app/api/admin", uid).json()
                    return view if view["queue"]["users"] and any(w["busy"] for w in view["workers"]) else None

                view = wait_for(admin_view, 5, "the held drawing in the admin view", interval=0.5)
                assert view["queue"]["users"] == [{"user": uid, "waiting": 0, "drawing": 1, "oldest_s": 0}]
                assert len(view["workers"]) >= 2 and [w["busy"] for w in view["workers"]].count(True) == 1
                assert all(w["styles"] == ["tiny"] for w in view["workers"])
            assert app.finished(job, uid)["state"] == "done"
            assert app.get("/app/api/admin", uid).json()["today"]["photos"] == 4  # the chat's photo, three redraws
            assert "Traceback" not in bot.log() + drew
        finally:
            for process in (bot, *workers):
                if process is not None:
                    process.stop()
