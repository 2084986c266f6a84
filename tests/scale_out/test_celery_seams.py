"""What bot/drawing/celery/results.py takes from Celery that Celery does not document as public: the Redis
result consumer it subclasses, the reconnect it calls, and the hook it switches off. A Celery release that
renames or reshapes one of them fails here, not as a bot that silently stops hearing results."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from celery.backends.asynchronous import AsyncBackendMixin
from celery.backends.redis import RedisBackend, ResultConsumer

from bot.drawing.celery.app import for_bot
from bot.drawing.celery.results import PushedRedisBackend, _Consumer


def parameters(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_result_consumer_s_private_parts_are_as_the_bot_uses_them() -> None:
    assert parameters(ResultConsumer._reconnect_pubsub) == ["self"]  # _Consumer.reconnect
    assert parameters(ResultConsumer.on_state_change) == ["self", "meta", "message"]  # _Consumer's override
    assert parameters(ResultConsumer.cancel_for) == ["self", "task_id"]
    assert parameters(ResultConsumer.drain_events) == ["self", "timeout"]
    assert issubclass(RedisBackend, AsyncBackendMixin)


def test_the_hook_the_bot_switches_off_is_the_one_that_stops_following_a_task() -> None:
    """Celery stops following a task once an AsyncResult of it is fulfilled; the bot follows each task from
    its send until it is done with it, so PushedRedisBackend makes the hook do nothing."""
    assert parameters(AsyncBackendMixin.on_result_fulfilled) == ["self", "result"]
    assert "cancel_for" in inspect.getsource(AsyncBackendMixin.on_result_fulfilled)
    assert "self.on_result_fulfilled(result)" in inspect.getsource(AsyncBackendMixin)  # where Celery calls it


def test_the_bot_s_app_builds_the_pushed_backend_with_its_consumer() -> None:
    backend = for_bot("redis://127.0.0.1:1/0", 60).backend
    assert isinstance(backend, PushedRedisBackend) and isinstance(backend.result_consumer, _Consumer)
