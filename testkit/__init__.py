"""What the tests and the benchmarks both drive the real bot with, in one place.

The bot is tested and measured the same way: as a real ``animebot run`` (and real
``animebot worker`` processes over a real Redis) talking HTTP to a fake Bot API that plays
the users. tests/ asserts on what a user would see; bench/ times and weighs it. Both need the
same fake Telegram, the same process harnesses, the same clips, the same way of waiting and
the same way of picking the bot's answers out of what it sent, so those live here rather than
in tests/: bench/ imports nothing from tests/, and a change to how the bot is driven is made once.

- :mod:`testkit.fake_telegram`: the fake Bot API (real HTTP on 127.0.0.1, faults on demand).
- :mod:`testkit.bot_harness`, :mod:`testkit.worker_harness`: start the bot and its workers.
- :mod:`testkit.redis_server`: a real ``redis-server`` on a free port.
- :mod:`testkit.clip_maker`: clips made from a photo with PyAV.
- :mod:`testkit.wait`: the one way to wait, for something observable (never a bare sleep).
- :mod:`testkit.replies`: the bot's answers to a message, out of the fake API's recorded calls.
- :mod:`testkit.journal`: what the bot has stored and finished, read from its own SQLite journal.
- :mod:`testkit.compose`: the project's docker-compose.yml on a real Docker engine, on an internal network.
- :mod:`testkit.kubernetes`: deploy/kubernetes's objects, and any object checked against its schema.
- :mod:`testkit.models`, :mod:`testkit.pictures`: the real files in ../shared by name, made photos, psnr.

pytest fixtures stay in tests/ (its conftest.py, and a room's own); nothing here imports pytest.
"""
