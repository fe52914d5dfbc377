"""Typed values of the wire (PROTOCOL.md §4) and the JSON codec that maps them to Python.

`{"$date": s}` is a timezone-aware `datetime`, `{"$ref": "C/id"}` a `Ref`, `{"$file": name}` a
`FileRef`, and `{"$result": n}` (batch ops only) a `Result`. Encoding happens wherever such a
value sits in a request (data, patch, ops, where, include targets); decoding wherever the
server returns one.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = ["Ref", "FileRef", "Result", "parse_datetime", "format_datetime", "encode_line", "decode_line"]


class Ref:
    """A reference to the object `collection/id`. `missing` is set when an `include` found no target."""

    __slots__ = ("collection", "id", "missing")

    def __init__(self, collection: str, id: str, missing: bool = False):
        self.collection = collection
        self.id = id
        self.missing = missing

    @classmethod
    def parse(cls, text: str, missing: bool = False) -> "Ref":
        """`"Task/t1"` → `Ref("Task", "t1")`. The id may not contain `/`, the collection never does."""
        collection, slash, id = text.partition("/")
        if not slash or not collection or not id:
            raise ValueError(f"not a reference 'Collection/id': {text!r}")
        return cls(collection, id, missing)

    def __str__(self) -> str:
        return f"{self.collection}/{self.id}"

    def __repr__(self) -> str:
        extra = ", missing=True" if self.missing else ""
        return f"Ref({self.collection!r}, {self.id!r}{extra})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ref):
            return NotImplemented
        return (self.collection, self.id) == (other.collection, other.id)

    def __hash__(self) -> int:
        return hash(("Ref", self.collection, self.id))

    def to_wire(self) -> dict:
        return {"$ref": str(self)}


class FileRef:
    """A reference to a file of the file store by name (§5.25)."""

    __slots__ = ("name", "missing", "forbidden")

    def __init__(self, name: str, missing: bool = False, forbidden: bool = False):
        self.name = name
        self.missing = missing
        self.forbidden = forbidden

    def __repr__(self) -> str:
        extra = ", missing=True" if self.missing else ""
        extra += ", forbidden=True" if self.forbidden else ""
        return f"FileRef({self.name!r}{extra})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileRef):
            return NotImplemented
        return self.name == other.name

    def __hash__(self) -> int:
        return hash(("FileRef", self.name))

    def to_wire(self) -> dict:
        return {"$file": self.name}


class Result:
    """`{"$result": n}`: in a batch op, a reference to the object that op `n` of the batch wrote (§5.18)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"Result({self.index})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Result) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("Result", self.index))

    def to_wire(self) -> dict:
        return {"$result": self.index}


_DATE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)


def parse_datetime(text: str) -> datetime:
    """Parses an RFC 3339 date-time as foliod accepts it into an aware `datetime`.

    Up to 9 fraction digits are read; Python keeps microseconds, so digits past the sixth are
    dropped (truncated, never rounded into the next second). Raises `ValueError` for text that is
    not RFC 3339 or an instant Python cannot hold (year 0, a leap second).
    """
    m = _DATE.match(text)
    if m is None:
        raise ValueError(f"not an RFC 3339 date-time: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction = m.group(7) or ""
    micros = int((fraction + "000000")[:6])
    if m.group(8):
        tz = timezone.utc
    else:
        offset = timedelta(hours=int(m.group(10)), minutes=int(m.group(11)))
        tz = timezone(-offset if m.group(9) == "-" else offset)
    return datetime(year, month, day, hour, minute, second, micros, tzinfo=tz)


def format_datetime(value: datetime) -> str:
    """An aware `datetime` as RFC 3339 (`Z` for UTC). A naive one is refused: it names no instant."""
    offset = value.utcoffset()
    if offset is None:
        raise ValueError(f"naive datetime {value!r}: give it a tzinfo (e.g. timezone.utc) so it names an instant")
    if offset.seconds % 60 or offset.microseconds:
        raise ValueError(f"datetime {value!r}: RFC 3339 offsets are whole minutes")
    text = value.replace(tzinfo=None).isoformat()
    if offset == timedelta(0):
        return text + "Z"
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(offset) // timedelta(minutes=1)
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _encode_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$date": format_datetime(value)}
    to_wire = getattr(value, "to_wire", None)
    if to_wire is not None:
        return to_wire()
    if isinstance(value, (set, frozenset)):
        raise TypeError("sets have no order; send a list")
    raise TypeError(f"{type(value).__name__} is not a JSON value for Folio")


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_encode_default)


def encode_line(request: dict) -> bytes:
    """One request line: compact JSON, UTF-8, typed values encoded, ending in `\\n`."""
    return _encoder.encode(request).encode("utf-8") + b"\n"


def _decode_object(obj: dict) -> Any:
    if len(obj) > 2:
        return obj
    if "$date" in obj and len(obj) == 1:
        text = obj["$date"]
        try:
            return parse_datetime(text)
        except ValueError:
            return obj  # an instant Python cannot hold stays as the server wrote it, and round-trips
    if "$ref" in obj and (len(obj) == 1 or obj.get("$missing") is True):
        try:
            return Ref.parse(obj["$ref"], missing=len(obj) == 2)
        except ValueError:
            return obj
    if "$file" in obj:
        rest = set(obj) - {"$file"}
        if rest <= {"$missing", "$forbidden"} and len(rest) <= 1:
            return FileRef(obj["$file"], missing=obj.get("$missing") is True, forbidden=obj.get("$forbidden") is True)
    return obj


_decoder = json.JSONDecoder(object_hook=_decode_object)


def decode_line(line: bytes) -> dict:
    """One answer or stream line, typed values decoded."""
    return _decoder.decode(line.decode("utf-8"))

