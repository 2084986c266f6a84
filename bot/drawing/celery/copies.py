"""Removing from Redis every copy of an order the bot is done with, photo bytes and all.

An order sent more than once (its worker died, or it was lost on the way) may have left a copy
behind: kombu's Redis transport keeps each order a worker took, until that worker acknowledges it,
in the ``unacked`` hash (by delivery tag, with its time in the ``unacked_index`` sorted set), and a
worker killed whole never acknowledges. kombu puts such a copy back in the queue only once it is
older than the visibility timeout (bot/drawing/celery/app.py), and the worker that takes it then
skips it (bot/drawing/celery/task.py): until then the photo would stay in Redis, for minutes, after
its user had the answer. The bot knows when it is done with a task, so it removes the copies itself.

The delivery tag is made by kombu when the bot sends, and the bot never learns it, so a copy is
found by the task id in its message: kombu stores each as JSON, with the task id in its headers
(``"id"``) and properties (``"correlation_id"``) and the order itself in base64, which has no
quotes, so the quoted id is in that task's messages and no other's. One Lua script does it, so
that no worker takes or restores a copy half-way: it writes the task's answered marker first (a
copy a worker popped just before is skipped), then deletes every copy from the queue and from
``unacked`` and ``unacked_index``. A worker that still draws a deleted copy finds the marker and
stores nothing; its acknowledgement then deletes nothing, and nothing of it is ever restored.
"""
from __future__ import annotations

import json

import redis
from kombu.transport.redis import Channel

from bot.drawing.celery.app import QUEUE
from bot.drawing.celery.wire import answered_key

# KEYS: the answered marker, kombu's unacked hash and its index, the queue. ARGV: the task id as JSON
# writes it (quoted), the marker's lifetime in seconds.
_DROP = """
redis.call('SET', KEYS[1], '1', 'EX', ARGV[2])
local removed = 0
local held = redis.call('HGETALL', KEYS[2])
for i = 1, #held, 2 do
  if string.find(held[i + 1], ARGV[1], 1, true) then
    redis.call('HDEL', KEYS[2], held[i])
    redis.call('ZREM', KEYS[3], held[i])
    removed = removed + 1
  end
end
for _, message in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
  if string.find(message, ARGV[1], 1, true) then
    removed = removed + redis.call('LREM', KEYS[4], 0, message)
  end
end
return removed
"""


def drop_copies(client: redis.Redis, task_id: str, marker_ttl_s: int) -> int:
    """Mark ``task_id`` answered and delete every copy of its order that Redis holds; how many there were.

    The keys are kombu's defaults (the app sets no ``unacked_key`` or ``global_keyprefix``). Redis holds
    at most one order per worker process, and this runs only for an order sent more than once
    (bot/drawing/celery/pool.py), so reading them all is cheap."""
    keys = [answered_key(task_id), Channel.unacked_key, Channel.unacked_index_key, QUEUE]
    return int(client.eval(_DROP, len(keys), *keys, json.dumps(task_id), marker_ttl_s))
