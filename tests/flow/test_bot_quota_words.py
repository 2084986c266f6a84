"""Each limit says when to send again in its own words, in the singular where the number is one.

With the day's quota used up, a burst of photos was told "Photos not taken so far: 2. Send them again once
these are back": the waiting limit's words, where nothing is coming back. And a quota or a waiting limit of
one said "1 photos".
"""
from __future__ import annotations

from pathlib import Path

from testkit.bot_harness import private_chat
from testkit.bot_in_process import serving
from testkit.pictures import synthetic_photo
from testkit.replies import final_answer
from weights.store import ModelStore

REACHED = "You've reached today's limit of 1 photo. It resets at midnight UTC."


def test_a_burst_over_the_daily_quota_is_told_to_send_again_after_midnight(tiny_store: ModelStore,
                                                                           tmp_path: Path) -> None:
    with serving(tmp_path, tiny_store.home, ANIMEBOT_STYLE="tiny", ANIMEBOT_BACKEND="onnxruntime",
                 ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_DAILY_QUOTA="1") as (_, fake):
        chat, user = private_chat(8800)
        assert final_answer(fake, fake.photo_message(chat, user, synthetic_photo(seed=1))) == "photo"
        burst = [fake.photo_message(chat, user, synthetic_photo(seed=2 + i)) for i in range(3)]
        notice = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if c.params["text"] == REACHED], 60)
        assert len(notice) == 1 and len(burst) == 3  # one sentence for the burst, counted in its edits

        def counted() -> list[str]:
            return [c.params["text"] for c in fake.calls_to("editMessageText", chat["id"])
                    if str(c.params["message_id"]) == str(notice[0].result["message_id"])]

        fake.wait_for(lambda: any("not taken so far: 3" in text for text in counted()), 60)
        assert counted()[-1] == f"{REACHED}\nPhotos not taken so far: 3. Send them again after midnight UTC."
        assert not [text for text in counted() if "once these are back" in text]
