"""The broker's formats across releases: each message in the oldest format that can say it, every field
change under a new version, and a real earlier release reading what this one writes, and back.

A rolling upgrade (Compose's ``up -d``, Kubernetes' rolling update, KEDA's scale-up of a new image) runs a
bot and workers of two releases side by side. When HD added ``WorkOrder.hd`` under the same version, each
side refused every order of the other, and the bot sent it again at once, 100 times a second. Since
format 6 an order names the key its photo waits in (a claim check); the formats before carry the bytes,
and a bot sends those while a worker of the release before is up.
"""
from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import typing
from dataclasses import replace
from pathlib import Path

import msgpack
import pytest

from bot.drawing.celery.wire import (ADDED, CLAIMED_SINCE, OLDEST_READ, WIRE_VERSION, BadOrder, ClaimedOrder,
                                     InlineOrder, Ordered, order_from_message, order_to_message, photo_key,
                                     result_from_message, result_to_message)
from inference.drawer import WorkFailed, WorkOrder
from inference.pipeline import Converted, ConvertSettings
from testkit.releases import BEFORE_HD, release_tree

# Every field of what crosses the broker, as format WIRE_VERSION has it. A change here without a new
# version is what made two releases refuse each other: raise WIRE_VERSION, say in wire.ADDED what an
# older message means by leaving a new field out, and record the new format here.
FORMAT = {6: """
ClaimedOrder.job_id: str
ClaimedOrder.photo: str
ClaimedOrder.style: str
ClaimedOrder.settings: ConvertSettings
ConvertSettings.max_side: int
ConvertSettings.fmt: str
ConvertSettings.jpeg_quality: int
ConvertSettings.faces: bool
ConvertSettings.strength: int
ConvertSettings.keep_colours: bool
ConvertSettings.limits: ImageLimits
ImageLimits.max_pixels: int
ImageLimits.min_side: int
ImageLimits.max_aspect: float
ConvertSettings.avatar: bool
ConvertSettings.cut: str
ClaimedOrder.clip: ClipSettings | None
ClipSettings.limits: ClipLimits
ClipLimits.max_seconds: float
ClipLimits.max_fps: float
ClipLimits.max_side: int
ClipSettings.fmt: str
ClipSettings.sound: bool
ClipSettings.strength: int
ClipSettings.keep_colours: bool
ClipSettings.steady: bool
ClipSettings.cut: str
ClipSettings.avatar: bool
ClaimedOrder.operation: str
Converted.data: bytes
Converted.input_size: tuple[int, int]
Converted.output_size: tuple[int, int]
Converted.style: str
Converted.backend: str
Converted.timings: dict[str, float]
Converted.faces: list[dict[str, object]]
Converted.frames: int
Converted.clip: ClipFacts | None
ClipFacts.fps: float
ClipFacts.seconds: float
ClipFacts.drawn: int
ClipFacts.trimmed: bool
ClipFacts.sound: str | None
Converted.cut: str
WorkFailed.job_id: str
WorkFailed.code: str
WorkFailed.message: str
WorkFailed.values: dict[str, int | float]
"""}

MODULES = re.compile(r"[a-z_]+\.")
PLAIN = WorkOrder("job-1", b"\xff\xd8 photo", "hayao", ConvertSettings(max_side=320, cut="sticker"))
DRAWN = Converted(b"\x89PNG", (640, 480), (320, 240), "hayao", "openvino", {"model_s": 0.5}, [{"score": 0.9}], 1)


def wire_fields() -> list[str]:
    """``Class.field: type`` for every dataclass an order or a result carries, in the order they nest."""
    lines: list[str] = []
    seen: set[type] = set()

    def walk(cls: type) -> None:
        seen.add(cls)
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            shown = MODULES.sub("", typing._type_repr(hint))  # ConvertSettings, not inference.pipeline.ConvertSettings
            lines.append(f"{cls.__name__}.{f.name}: {shown}")
            for inner in typing.get_args(hint) or (hint,):
                if isinstance(inner, type) and dataclasses.is_dataclass(inner) and inner not in seen:
                    walk(inner)

    for cls in (ClaimedOrder, Converted, WorkFailed):
        walk(cls)
    return lines


def test_the_fields_that_cross_the_broker_are_those_of_the_current_format_version() -> None:
    assert wire_fields() == FORMAT[WIRE_VERSION].split("\n")[1:-1], \
        "an order's or a result's fields changed: raise WIRE_VERSION (bot/drawing/celery/wire.py) and record them"
    carriers = {"order": InlineOrder, "failed": WorkFailed, "converted": Converted}
    for carrier, added in ADDED.items():  # what an older message means by leaving a field out is its default
        fields = {f.name: f for f in dataclasses.fields(carriers[carrier])}
        for version, defaults in added.items():
            assert OLDEST_READ < version <= (CLAIMED_SINCE - 1 if carrier == "order" else WIRE_VERSION)
            for name, was in defaults.items():
                field = fields[name]
                default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
                assert default == was, (carrier, name)


def test_an_order_is_written_in_the_oldest_format_that_can_say_it() -> None:
    doubling = replace(PLAIN, operation="double")
    plain, hd = order_to_message(PLAIN), order_to_message(doubling)
    assert plain["v"] == OLDEST_READ and "hd" not in plain
    assert hd["v"] == 4 and hd["hd"] is True  # HD's format (5 added nothing to orders)
    assert order_from_message(plain) == Ordered(PLAIN, None) and order_from_message(hd) == Ordered(doubling, None)
    claimed = order_to_message(PLAIN, photo_key("job-1:0"))  # a claim check says itself in 6 alone
    assert claimed["v"] == CLAIMED_SINCE == WIRE_VERSION and "data" not in claimed and "hd" not in claimed
    assert result_to_message(DRAWN)["v"] == OLDEST_READ  # a drawing's result has not changed since
    plain_failure = WorkFailed("job-1", "corrupt", "damaged")
    assert result_to_message(plain_failure)["v"] == OLDEST_READ and "values" not in result_to_message(plain_failure)
    sized = WorkFailed("job-1", "too_small", "too small (9×9)", {"width": 9, "height": 9, "min_side": 32})
    assert result_to_message(sized)["v"] == 5 and result_from_message(result_to_message(sized)) == sized
    # To a bot that reads no newer than 3 (one that sends no READS_HEADER), without the numbers it cannot read.
    assert result_to_message(sized, reads=3) == {**result_to_message(replace(sized, values={})), "v": 3}
    assert result_from_message(result_to_message(plain_failure)) == plain_failure
    with pytest.raises(BadOrder, match="the field hd, which its format version 3 does not"):
        order_from_message({**plain, "hd": True})


def _with_release(code: Path, script: str, given: bytes) -> bytes:
    """``script`` run by the release in ``code`` (its ``bot`` package first on the path), ``given`` on its stdin."""
    done = subprocess.run([sys.executable, "-c", script], input=given, capture_output=True, cwd=code,
                          env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


READ_ORDER = """
import sys, msgpack
from bot.drawing.celery.wire import BadOrder, order_from_message
try:
    order = order_from_message(msgpack.unpackb(sys.stdin.buffer.read(), raw=False))
    print(order.job_id, order.style, order.settings.max_side, order.settings.cut)
except BadOrder as exc:
    print("refused:", exc.message)
"""
WRITE = """
import sys, msgpack
from bot.drawing.celery.wire import order_to_message, result_to_message
from inference.drawer import WorkFailed, WorkOrder
from inference.pipeline import Converted, ConvertSettings
order = WorkOrder("job-2", b"photo", "shinkai", ConvertSettings(max_side=256, faces=False))
drawn = Converted(b"jpeg", (10, 20), (5, 10), "shinkai", "openvino", {"model_s": 0.1}, [], 1)
sys.stdout.buffer.write(msgpack.packb([order_to_message(order), result_to_message(drawn)], use_bin_type=True))
"""
READ_RESULT = """
import sys, msgpack
from bot.drawing.celery.wire import result_from_message
print(result_from_message(msgpack.unpackb(sys.stdin.buffer.read(), raw=False)).output_size)
"""


def test_the_release_before_hd_and_this_one_read_each_other_s_messages(tmp_path: Path) -> None:
    """The release before HD is run for real (its tree from git, with this checkout's packages)."""
    old = release_tree(BEFORE_HD, tmp_path / "old")
    pack = lambda message: msgpack.packb(message, use_bin_type=True)  # noqa: E731 - as kombu packs it
    # Its workers read this bot's orders, all but an HD, which they refuse unread with a sentence.
    assert _with_release(old, READ_ORDER, pack(order_to_message(PLAIN))).decode() == "job-1 hayao 320 sticker\n"
    doubling = replace(PLAIN, operation="double")
    refused = _with_release(old, READ_ORDER, pack(order_to_message(doubling))).decode()
    assert order_to_message(doubling)["v"] == 4  # HD's format: format 5 added nothing to orders
    assert refused.startswith("refused:") and "format version 4" in refused, refused
    # Its bot reads this release's results; this release's workers read its orders.
    assert _with_release(old, READ_RESULT, pack(result_to_message(DRAWN))).decode() == "(320, 240)\n"
    order, result = msgpack.unpackb(_with_release(old, WRITE, b""), raw=False)
    assert order_from_message(order) == Ordered(WorkOrder("job-2", b"photo", "shinkai",
                                                          ConvertSettings(max_side=256, faces=False)), None)
    assert result_from_message(result) == Converted(b"jpeg", (10, 20), (5, 10), "shinkai", "openvino",
                                                    {"model_s": 0.1}, [], 1)
    assert isinstance(result_from_message(result_to_message(WorkFailed("j", "c", "m"))), WorkFailed)
