"""Dataclasses as plain values (maps, lists, strings, numbers) and back, checked field by field.

One codec serves both places where our dataclasses leave the process: the
journal's stored requests (JSON in SQLite) and the orders, results and
heartbeats that cross Redis to ``animebot worker`` (msgpack, JSON). Reading
is never a bare ``cls(**raw)``: every field is checked against its type hint,
so a value that is not exactly what we wrote is refused with a sentence
naming the first field that is wrong.

The two readers differ only in how they treat another release's fields:
the wire is ``strict`` (the bot and its workers must run one release, and a
message that is not our schema is not acted on), the journal ``lenient``
(a newer animebot reads what an older one wrote: unknown fields are dropped,
missing ones take their defaults).
"""
from __future__ import annotations

import dataclasses
import types
from typing import Any, Union, get_args, get_origin, get_type_hints


class DecodeError(ValueError):
    """A value that is not the type it should be."""


def encode(obj: Any) -> dict[str, Any]:
    """A dataclass as a map of plain values (tuples become lists in JSON and msgpack)."""
    return dataclasses.asdict(obj)


def decode(value: object, hint: Any, where: str, error: type[Exception] = DecodeError, *,
           lenient: bool = False) -> Any:
    """``value`` as the type ``hint`` (a dataclass, or a plain, tuple, list, dict or optional type), built
    from what msgpack or JSON gives (lists for tuples, maps for dataclasses); ``error`` names the first
    field that is not exactly so. ``lenient``: a dataclass's unknown fields are dropped and its missing
    ones take their defaults."""
    return _Reader(error, lenient).read(value, hint, where)


class _Reader:
    def __init__(self, error: type[Exception], lenient: bool) -> None:
        self.error = error
        self.lenient = lenient

    def read(self, value: object, hint: Any, where: str) -> Any:
        origin, args = get_origin(hint), get_args(hint)
        error = self.error
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self._dataclass(value, hint, where)
        if origin in (Union, types.UnionType):
            for option in args:
                try:
                    return self.read(value, option, where)
                except error:
                    continue
            raise error(f"{where} must be {' or '.join(_name(a) for a in args)}, got {type(value).__name__}")
        if origin is tuple:
            if not isinstance(value, (list, tuple)):
                raise error(f"{where} must be a list, got {type(value).__name__}")
            items = args[:1] * len(value) if args[1:] == (Ellipsis,) else args
            if len(value) != len(items):
                raise error(f"{where} must have {len(items)} items, got {len(value)}")
            return tuple(self.read(v, t, f"{where}[{i}]") for i, (v, t) in enumerate(zip(value, items)))
        if origin is list:
            if not isinstance(value, list):
                raise error(f"{where} must be a list, got {type(value).__name__}")
            return [self.read(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
        if origin is dict:
            if not isinstance(value, dict):
                raise error(f"{where} must be a map, got {type(value).__name__}")
            return {self.read(k, args[0], f"{where} key"): self.read(v, args[1], f"{where}[{k!r}]")
                    for k, v in value.items()}
        if hint is object:
            return value
        if hint is float and isinstance(value, (int, float)) and type(value) is not bool:
            return float(value)
        if type(value) is not hint:  # exactly: True is an int to Python, not to us
            raise error(f"{where} must be {_name(hint)}, got {type(value).__name__}")
        return value

    def _dataclass(self, value: object, hint: type, where: str) -> Any:
        if not isinstance(value, dict):
            raise self.error(f"{where} must be a map, got {type(value).__name__}")
        known = dataclasses.fields(hint)
        names = [f.name for f in known]
        optional = {f.name for f in known if self.lenient and (f.default is not dataclasses.MISSING
                                                               or f.default_factory is not dataclasses.MISSING)}
        extra = [] if self.lenient else sorted(str(k) for k in value if k not in names)
        missing = [n for n in names if n not in value and n not in optional]
        if extra or missing:
            raise self.error(f"{where} has " + "; ".join(
                ([f"unknown field(s) {', '.join(extra)}"] if extra else [])
                + ([f"no field(s) {', '.join(missing)}"] if missing else [])))
        hints = get_type_hints(hint)
        return hint(**{n: self.read(value[n], hints[n], f"{where}.{n}") for n in names if n in value})


def _name(hint: Any) -> str:
    return "None" if hint is type(None) else getattr(hint, "__name__", str(hint))
