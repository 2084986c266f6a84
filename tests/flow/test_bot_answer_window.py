"""A crash repeats at most one answer: answers go out one at a time between being sent and being recorded.

There is no asking Telegram what it got, so a kill between Telegram taking an answer and the journal
recording it sends that answer again after the restart. An independent check killed a scaled-out bot as
its first answer arrived: two workers had finished within 6 ms of each other, both answers were in that
window, and both came twice (3 rounds in 21). Here the first answer is held on its way, as a slow
network holds it, while a second photo is drawn and reaches its answer: the second must not go out until
the first is back and recorded.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from testkit.bot_harness import private_chat, start_bot
from testkit.fake_telegram import FakeTelegram
from testkit.journal import journal_rows, settled
from testkit.pictures import synthetic_photo
from testkit.replies import final_answer
from weights.store import ModelStore

# Once the second photo has reached its answer, how long its answer is looked for while the first is held:
# without the one-at-a-time rule it goes out within milliseconds (nothing else stands in its way).
LOOK_S = 3.0


def test_a_second_answer_waits_until_the_first_is_recorded(tiny_store: ModelStore, tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", tiny_store.home, ANIMEBOT_RATE_PER_MINUTE="0")
        try:
            arrived: list[int] = []
            first_held, let_go = threading.Event(), threading.Event()

            def hold_the_first_answer(method: str, params: dict[str, Any]) -> bool:
                if method == "sendPhoto":
                    arrived.append(int(params["chat_id"]))
                    if len(arrived) == 1:
                        first_held.set()
                        let_go.wait(300)
                return False

            fake.intercept = hold_the_first_answer
            first = fake.photo_message(*private_chat(7201), synthetic_photo(seed=11))
            fake.wait_for(first_held.is_set, 120, "the first answer on its way")
            second = fake.photo_message(*private_chat(7202), synthetic_photo(seed=12))
            # Its user's last photo is noted just before its answer is sent: it is drawn and at its answer.
            fake.wait_for(lambda: journal_rows(bot.home, "SELECT last_photo FROM users WHERE user_id = 7202")
                          not in ([], [(None,)]), 120, "the second photo drawn and about to be answered")
            time.sleep(LOOK_S)
            assert arrived == [7201], "a second answer went out while the first was neither back nor recorded"
            let_go.set()
            assert final_answer(fake, first) == "photo" and final_answer(fake, second) == "photo"
            fake.wait_for(lambda: settled(bot.home, fake), 60, "both recorded as answered")
            assert arrived == [7201, 7202]
        finally:
            let_go.set()
            fake.intercept = None
            assert bot.stop() == 0, bot.log()
