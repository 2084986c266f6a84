"""/block, /unblock and /blocked through the real bot, on the fake Bot API: a blocked user's photo, press,
inline query and Mini App call each get one sentence and nothing is drawn; the block outlives a restart;
a non-admin's /block is an unknown command and touches no one. A photo being drawn when the block comes is
answered, not drawn; a blocked user may still /forget; the admins' menus list their commands."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot.root.profile import ADMIN_COMMANDS, PRIVATE_COMMANDS
from bot.words.catalogue import LANGS, profile_code, t
from testkit.bot_harness import private_chat
from testkit.bot_in_process import bot_in_process
from testkit.fake_telegram import FakeTelegram
from testkit.journal import handled, journal_rows
from testkit.pictures import synthetic_photo
from testkit.privacy import forget
from testkit.redis_server import free_port
from testkit.replies import final_answer, is_status
from testkit.webapp import URL, App, drawn_photo
from testkit.worker_harness import held
from weights.store import ModelStore

ADMIN, USER, OTHER = 9101, 9102, 9103
BLOCKED = "Sorry, you can't use this bot."
UNKNOWN = "I don't know that command. /help lists what I can do."


def said(fake: FakeTelegram, uid: int, text: str) -> str:
    """What the bot answers ``text`` in ``uid``'s private chat: one sentence."""
    chat, user = private_chat(uid)
    before = len(fake.messages_to(uid))
    fake.text_message(chat, user, text)
    return str(fake.wait_for(lambda: fake.messages_to(uid)[before:], 60)[0].params["text"])


def jobs_of(home: Path, uid: int) -> int:
    return len(journal_rows(home, f"SELECT job_id FROM jobs WHERE user_id = {uid}"))


def serve(fake: FakeTelegram, home: Path, models: Path, port: int) -> Any:
    return bot_in_process(fake, home, models, ANIMEBOT_STYLE="tiny", ANIMEBOT_BACKEND="onnxruntime",
                          ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_ADMINS=str(ADMIN),
                          ANIMEBOT_METRICS_PORT=str(port), ANIMEBOT_WEBAPP_URL=URL)


@contextlib.contextmanager
def one_bot(home: Path, models: Path) -> Iterator[tuple[FakeTelegram, App]]:
    """The fake Bot API with the bot on it, and the bot's HTTP server as the Mini App calls it."""
    with FakeTelegram() as fake:
        port = free_port()
        with serve(fake, home, models, port) as bot:
            yield fake, App(bot, fake, port)


def test_an_admin_blocks_and_unblocks_and_the_block_outlives_a_restart(tiny_store: ModelStore,
                                                                      tmp_path: Path) -> None:
    home = tmp_path / "bot"
    chat, user = private_chat(USER)
    with FakeTelegram() as fake:
        port = free_port()
        with serve(fake, home, tiny_store.home, port) as bot:
            app = App(bot, fake, port)
            _, result = drawn_photo(app, USER, seed=1)  # a result with buttons, and one the Mini App lists
            rid = app.results(USER)[0]["id"]

            # A non-admin's /block is an unknown command, and touches no one.
            assert said(fake, OTHER, f"/block {USER}") == UNKNOWN
            assert said(fake, OTHER, "/blocked") == UNKNOWN
            assert final_answer(fake, fake.photo_message(chat, user, synthetic_photo(seed=2))) == "photo"

            assert said(fake, ADMIN, "/block") == "Send /block USER_ID (digits)."
            assert said(fake, ADMIN, "/unblock someone") == "Send /unblock USER_ID (digits)."
            assert said(fake, ADMIN, f"/block {ADMIN}") == \
                f"User {ADMIN} is an admin of this bot, and admins can't be blocked."
            assert said(fake, ADMIN, "/blocked") == "Nobody is blocked."
            assert said(fake, ADMIN, f"/block {USER}") == \
                f"Blocked user {USER}: they can't use this bot until you send /unblock {USER}."

            # The blocked user: one sentence for each, nothing downloaded, queued or drawn.
            files, photos, jobs = len(fake.calls_to("getFile")), len(fake.calls_to("sendPhoto", USER)), jobs_of(home, USER)
            refused = fake.photo_message(chat, user, synthetic_photo(seed=3))
            assert final_answer(fake, refused) == BLOCKED
            presses = [b["callback_data"] for row in result.params["reply_markup"]["inline_keyboard"] for b in row
                       if "callback_data" in b]  # (the Mini App's button opens a page)
            fake.press(user, result.result, presses[0])
            pressed = fake.wait_for(lambda: [c for c in fake.calls_to("answerCallbackQuery")
                                             if c.params.get("text") == BLOCKED], 60)
            assert len(pressed) == 1
            fake.inline_query(user)
            inline = fake.wait_for(lambda: fake.calls_to("answerInlineQuery"), 60)
            assert BLOCKED in str(inline[-1].params.get("button"))
            for answer in (app.get("/app/api/results", USER), app.post("/app/api/draw", USER, {
                    "id": rid, "style": "tiny", "strength": 50, "keep_colours": False})):
                assert answer.status == 403 and answer.json() == {"error": BLOCKED}
            assert (len(fake.calls_to("getFile")), len(fake.calls_to("sendPhoto", USER)), jobs_of(home, USER)) == \
                (files, photos, jobs)
            assert len(fake.replies_to(refused)) == 1

            listed = said(fake, ADMIN, "/blocked")
            assert listed.startswith("Blocked users:\n• ") and f"User {USER}, blocked by {ADMIN} on " in listed

        # The block is in the database: a restarted bot refuses them too, until /unblock.
        port = free_port()
        with serve(fake, home, tiny_store.home, port) as bot:
            assert final_answer(fake, fake.photo_message(chat, user, synthetic_photo(seed=4))) == BLOCKED
            assert f"User {USER}, blocked by {ADMIN}" in said(fake, ADMIN, "/blocked")
            assert said(fake, ADMIN, f"/unblock {USER}") == f"Unblocked user {USER}: they can use this bot again."
            assert final_answer(fake, fake.photo_message(chat, user, synthetic_photo(seed=5))) == "photo"
            assert App(bot, fake, port).get("/app/api/results", USER).status == 200
            assert said(fake, ADMIN, f"/unblock {USER}") == f"User {USER} was not blocked."
            assert said(fake, ADMIN, "/blocked") == "Nobody is blocked."


def test_a_photo_being_drawn_as_its_user_is_blocked_is_answered_not_drawn(tiny_store: ModelStore, tmp_path: Path) -> None:
    """The bot answers every photo it accepted, and never draws for a blocked user: a photo on the worker and
    one waiting when the block comes are answered, as a burst of refusals is, by one "Sorry, you can't use this
    bot." (their "In queue" and "Drawing" messages removed), and what the worker makes of the first is thrown
    away. Their jobs are closed as refused and their updates handled, so a restart neither draws them nor
    says the sentence again."""
    home = tmp_path / "bot"
    with FakeTelegram() as fake:
        port = free_port()
        with serve(fake, home, tiny_store.home, port) as bot:
            photos = _blocked_mid_drawing(fake, App(bot, fake, port))
            assert all(handled(home, p) for p in photos)
        told = len(fake.messages_to(USER))
        with serve(fake, home, tiny_store.home, free_port()):  # a restart: whatever is unhandled is replayed
            fake.wait_for(lambda: journal_rows(home, "SELECT COUNT(*) FROM updates WHERE handled = 0") == [(0,)], 60)
        assert fake.messages_to(USER)[told:] == []
    states = journal_rows(home, f"SELECT state, outcome FROM jobs WHERE user_id = {USER}")
    assert states == [("refused", "blocked")] * 2


def _blocked_mid_drawing(fake: FakeTelegram, app: App) -> list[dict[str, Any]]:
    """Two photos, one on the worker and one waiting, when the admin blocks their user: one sentence for
    both, nothing drawn. Returns the photos' messages."""
    def queue() -> tuple[int, int]:
        """Photos waiting, and on the worker, as the admin page reads them."""
        now = app.get("/app/api/admin", ADMIN).json()["queue"]
        return now["waiting"], now["drawing"]

    chat, user = private_chat(USER)
    (pid,) = app.bot.worker_pids().values()
    with held(pid):  # the worker takes the first photo and draws nothing; the second waits
        photos = [fake.photo_message(chat, user, synthetic_photo(seed=seed)) for seed in (1, 2)]
        fake.wait_for(lambda: queue() == (1, 1), 60)
        told = len(fake.messages_to(USER))
        assert said(fake, ADMIN, f"/block {USER}").startswith(f"Blocked user {USER}")
        (answer,) = fake.wait_for(lambda: [m for m in fake.messages_to(USER)[told:] if not is_status(m)], 60)
        assert answer.params["text"] == BLOCKED  # in reply to one of them: whichever job stopped first
        assert answer.params["reply_parameters"]["message_id"] in [p["message_id"] for p in photos]
        fake.wait_for(lambda: not [m for m in fake.messages_to(USER)
                                   if is_status(m) and (USER, m.result["message_id"]) in fake.messages], 60)
        assert [m.params["text"] for m in fake.messages_to(USER)[told:] if not is_status(m)] == [BLOCKED]
    fake.wait_for(lambda: queue() == (0, 0), 60)  # the worker has finished it, for nobody
    assert not fake.calls_to("sendPhoto", USER)
    return photos


def test_a_blocked_user_may_still_read_privacy_and_forget_and_admins_have_their_menu(tiny_store: ModelStore,
                                                                                    tmp_path: Path) -> None:
    """A block stops the drawing, not a user's say over their data: /privacy and /forget (and its buttons) still
    work for them, and the block stays. The admins' own private chats list the admin commands in the menu, in
    each language, beside everyone's; nobody else's does."""
    home = tmp_path / "bot"
    chat, user = private_chat(USER)
    with one_bot(home, tiny_store.home) as (fake, _):
        for lang in LANGS:
            code = profile_code(lang) or ""
            assert [(c["command"], c["description"]) for c in fake.profile["commands", f"chat:{ADMIN}", code]] == \
                [(name, t(lang, f"command_{name}")) for name in PRIVATE_COMMANDS + ADMIN_COMMANDS]
        assert {scope for _, scope, _ in fake.profile} == {"", "all_private_chats", "all_group_chats", f"chat:{ADMIN}"}

        assert final_answer(fake, fake.photo_message(chat, user, synthetic_photo(seed=1))) == "photo"
        assert said(fake, ADMIN, f"/block {USER}").startswith(f"Blocked user {USER}")
        assert said(fake, USER, "/privacy").startswith("What I keep")
        assert forget(fake, chat, user).startswith("Done.")
        assert jobs_of(home, USER) == 0
        assert f"User {USER}, blocked by {ADMIN}" in said(fake, ADMIN, "/blocked")
        assert final_answer(fake, fake.photo_message(chat, user, synthetic_photo(seed=2))) == BLOCKED
        assert said(fake, USER, "/start") == BLOCKED
