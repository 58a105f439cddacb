"""JSON back into fleet's frozen values: the inverse of :func:`fleet.trace.to_jsonable`.

A trace is only worth replaying if the snapshot it recorded comes back *exactly* (seed 001 §9: hand
the same state to the decision and it returns the same plan). JSON keeps no types, so the decoder
takes them from the dataclasses' own annotations: a tuple field becomes a tuple again, an enum field
its member, a datetime field an aware datetime, a nested dataclass the dataclass. Anything that does
not fit the annotation is a :class:`CodecError` naming the path to the bad value
(``snapshot.issues[3].comments[0].created_at``) — never a half-built value. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping
from datetime import date, datetime
from enum import Enum
from types import NoneType, UnionType
from typing import Any, TypeVar

from fleet.core.model import Plan, Snapshot

T = TypeVar("T")


class CodecError(ValueError):
    """A JSON value that does not decode to the type its place requires; ``where`` is its path."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.where, self.why = where, why


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def decode(tp: type[T], data: Any, where: str = "$") -> T:
    """``data`` (what ``to_jsonable`` wrote, read back by ``json``) as a value of type ``tp``."""
    return typing.cast(T, _decode(tp, data, where))


def decode_snapshot(data: Any, where: str = "snapshot") -> Snapshot:
    return decode(Snapshot, data, where)


def decode_plan(data: Any, where: str = "plan") -> Plan:
    return decode(Plan, data, where)


def _decode(tp: Any, data: Any, where: str) -> Any:
    if tp is Any:
        return data
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is UnionType:
        return _union(typing.get_args(tp), data, where)
    if origin is tuple:
        return _tuple(typing.get_args(tp), data, where)
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_decode(item, v, f"{where}[{i}]") for i, v in enumerate(_list(data, where))]
    if origin is dict:
        _key, item = typing.get_args(tp)
        if not isinstance(data, Mapping):
            raise CodecError(where, f"expected an object, got {_kind(data)}")
        return {str(k): _decode(item, v, f"{where}.{k}") for k, v in data.items()}
    if tp is NoneType:
        if data is not None:
            raise CodecError(where, f"expected null, got {_kind(data)}")
        return None
    if isinstance(tp, type):
        return _scalar_or_value(tp, data, where)
    raise CodecError(where, f"no decoder for the annotation {tp!r}")


def _scalar_or_value(tp: type, data: Any, where: str) -> Any:
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, data, where)
    if issubclass(tp, Enum):
        try:
            return tp(data)
        except ValueError:
            names = ", ".join(repr(m.value) for m in tp)
            raise CodecError(where, f"{data!r} is not a {tp.__name__} ({names})") from None
    if issubclass(tp, datetime):
        return _iso(datetime.fromisoformat, data, where, "an ISO 8601 timestamp")
    if issubclass(tp, date):
        return _iso(date.fromisoformat, data, where, "an ISO date", "an ISO date string")
    if tp is bool:
        if not isinstance(data, bool):
            raise CodecError(where, f"expected true/false, got {_kind(data)}")
        return data
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise CodecError(where, f"expected an integer, got {_kind(data)}")
        return data
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise CodecError(where, f"expected a number, got {_kind(data)}")
        return float(data)
    if tp is str:
        if not isinstance(data, str):
            raise CodecError(where, f"expected a string, got {_kind(data)}")
        return data
    raise CodecError(where, f"no decoder for the type {tp.__name__}")


def _iso(
    parse: Callable[[str], T], data: Any, where: str, what: str, expected: str | None = None
) -> T:
    """``data`` read by ``parse`` (a ``fromisoformat``): a string that is ``what``; ``expected``
    names what a value of another type should have been, when it is not just ``what``."""
    if not isinstance(data, str):
        raise CodecError(where, f"expected {expected or what}, got {_kind(data)}")
    try:
        return parse(data)
    except ValueError as exc:
        raise CodecError(where, f"not {what}: {data!r} ({exc})") from None


def _union(args: tuple[Any, ...], data: Any, where: str) -> Any:
    if data is None:
        if NoneType in args:
            return None
        raise CodecError(where, "null where a value is required")
    errors: list[CodecError] = []
    for arg in args:
        if arg is NoneType:
            continue
        try:
            return _decode(arg, data, where)
        except CodecError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    raise CodecError(where, "; ".join(e.why for e in errors))


def _tuple(args: tuple[Any, ...], data: Any, where: str) -> tuple[Any, ...]:
    items = _list(data, where)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(items))
    if len(args) != len(items):
        raise CodecError(where, f"expected {len(args)} items, got {len(items)}")
    return tuple(
        _decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, items, strict=True))
    )


def _list(data: Any, where: str) -> list[Any]:
    if not isinstance(data, list):
        raise CodecError(where, f"expected an array, got {_kind(data)}")
    return data


def _dataclass(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise CodecError(where, f"expected a {cls.__name__} object, got {_kind(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        # A field this model does not have: the trace was written by another shape of the value,
        # and a snapshot missing what it carried is not the snapshot that produced the plan.
        raise CodecError(where, f"{cls.__name__} has no field {unknown[0]!r}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise CodecError(where, f"{cls.__name__} is missing its field {name!r}")
            continue
        kwargs[name] = _decode(hints[name], data[name], f"{where}.{name}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise CodecError(where, f"{cls.__name__} refused the values: {exc}") from None


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    if isinstance(data, bool):
        return f"boolean {data}"
    if isinstance(data, int | float):
        return f"number {data!r}"
    if isinstance(data, str):
        return f"string {data[:40]!r}"
    if isinstance(data, list):
        return "an array"
    if isinstance(data, Mapping):
        return "an object"
    return type(data).__name__
