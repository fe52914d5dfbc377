"""Every operation of PROTOCOL.md §5, declared once: its Python signature, the request it sends, how it
may be retried, and how its result is decoded. The blocking client, the asyncio client and pipelines
all call these builders; none of them spells an op's fields again.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any, Callable, Dict, Iterable, Optional, Sequence, Tuple

from .errors import TooLarge
from .results import BatchResult, EventPage, Page
from .values import Ref, encode_line

__all__ = ["Call", "create_op", "update_op", "delete_op"]

# How a call may be sent again on a new connection after its connection dropped:
READ = "read"  # always: it changes nothing
WRITE = "write"  # only with a request key, which makes foliod answer a resend with the first result
ONCE = "once"  # never (tied to its connection, or not idempotent without a key)


class Call:
    """One request to send: the op's fields (Python values, typed values not yet encoded), its retry
    class, and the function that turns the wire result into what the API returns."""

    __slots__ = ("fields", "retry", "decode")

    def __init__(self, op: str, fields: Dict[str, Any], retry: str = READ,
                 decode: Callable[[Any], Any] = lambda r: r):
        self.fields = {"op": op}
        self.fields.update((k, v) for k, v in fields.items() if v is not None)
        self.retry = retry
        self.decode = decode

    @property
    def op(self) -> str:
        return self.fields["op"]


def prepare(call: Call, request_keys: bool) -> Tuple[Dict[str, Any], bool]:
    """The fields to send (a write gets a fresh request key unless `request_keys` is off or it has one)
    and whether the request may be sent once more on a new connection after its connection dropped."""
    fields = call.fields
    if call.retry == WRITE and request_keys and "requestKey" not in fields:
        fields = dict(fields, requestKey=uuid.uuid4().hex)
    return fields, call.retry == READ or (call.retry == WRITE and "requestKey" in fields)


# foliod's smallest --max-line: no line this long or shorter is refused for its length.
MIN_MAX_LINE = 1024


def encode_requests(tags: Sequence[Any], requests: Sequence[Tuple[Dict[str, Any], Any]]) -> list:
    """`(tag, line, stream)` for each `(fields, stream)`: the tag goes second, after `op`."""
    return [(tag, encode_line({"op": fields["op"], "tag": tag, **fields}), stream)
            for tag, (fields, stream) in zip(tags, requests)]


def needs_max_line(lines: Sequence[Tuple[Any, bytes, Any]]) -> bool:
    return any(len(line) - 1 > MIN_MAX_LINE for _, line, _ in lines)


def check_max_line(lines: Sequence[Tuple[Any, bytes, Any]], max_line: int) -> None:
    """Refuses, before anything is sent, a line foliod would answer with `too_large` and then close the
    connection, ending every other request and watch on it."""
    for _, line, _ in lines:
        if len(line) - 1 > max_line:
            op = line[:40].decode("utf-8", "replace")
            raise TooLarge("too_large", f"a request line of {len(line) - 1} bytes ({op}…) is longer than foliod's "
                                        f"maxLine of {max_line} bytes; it was not sent", {"maxLine": max_line})


def _ref_text(ref: Any) -> Any:
    return str(ref) if isinstance(ref, Ref) else ref


def _list_fields(where, sort, order, limit, offset, after, include, explain) -> Dict[str, Any]:
    return {"where": where, "sort": _paths(sort), "order": order, "limit": limit, "offset": offset,
            "after": after, "include": _paths(include), "explain": explain}


def _paths(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


# --- records ---

def hello() -> Call:
    """Server identity and limits, and who it takes the caller to be (§5.1)."""
    return Call("hello", {})


def create(collection: str, data: Dict[str, Any], id: Optional[str] = None,
           request_key: Optional[str] = None) -> Call:
    """Creates an object; returns it (§5.2). Without `id` foliod generates one."""
    return Call("create", {"collection": collection, "id": id, "data": data, "requestKey": request_key}, WRITE)


def get(collection: str, id: str, include: Optional[Sequence[str]] = None, at_seq: Optional[int] = None,
        as_of: Any = None) -> Call:
    """The object, or `NotFound` (§5.3). `at_seq`/`as_of` (datetime or RFC 3339 text) read the past."""
    return Call("get", {"collection": collection, "id": id, "include": _paths(include), "atSeq": at_seq,
                        "asOf": as_of})


def update(collection: str, id: str, patch: Optional[Dict[str, Any]] = None,
           ops: Optional[Dict[str, Any]] = None, if_version: Optional[int] = None,
           request_key: Optional[str] = None) -> Call:
    """Merge `patch` (RFC 7386) and/or field operations `ops` into the object; returns it (§5.4)."""
    if patch is None and ops is None:
        patch = {}
    return Call("update", {"collection": collection, "id": id, "patch": patch, "ops": ops,
                           "ifVersion": if_version, "requestKey": request_key}, WRITE)


def delete(collection: str, id: str, if_version: Optional[int] = None, request_key: Optional[str] = None) -> Call:
    """Deletes the object; returns `{id, version}` (§5.5)."""
    return Call("delete", {"collection": collection, "id": id, "ifVersion": if_version,
                           "requestKey": request_key}, WRITE)


def batch(ops: Iterable[Dict[str, Any]], atomic: bool = True, request_key: Optional[str] = None) -> Call:
    """Up to 1000 writes in order, all or nothing unless `atomic=False` (§5.18). Build ops with
    `create_op`, `update_op`, `delete_op`; `Result(n)` refers to what op n wrote."""
    return Call("batch", {"ops": list(ops), "atomic": None if atomic else False, "requestKey": request_key},
                WRITE, BatchResult)


def create_op(collection: str, data: Dict[str, Any], id: Any = None) -> Dict[str, Any]:
    """A create op of a batch."""
    return {k: v for k, v in {"op": "create", "collection": collection, "id": id, "data": data}.items()
            if v is not None}


def update_op(collection: str, id: Any, patch: Optional[Dict[str, Any]] = None, ops: Optional[Dict[str, Any]] = None,
              if_version: Optional[int] = None) -> Dict[str, Any]:
    """An update op of a batch; `id` may be a `Result(n)`."""
    fields = {"op": "update", "collection": collection, "id": id, "patch": patch, "ops": ops, "ifVersion": if_version}
    if patch is None and ops is None:
        fields["patch"] = {}
    return {k: v for k, v in fields.items() if v is not None}


def delete_op(collection: str, id: Any, if_version: Optional[int] = None) -> Dict[str, Any]:
    """A delete op of a batch; `id` may be a `Result(n)`."""
    return {k: v for k, v in {"op": "delete", "collection": collection, "id": id, "ifVersion": if_version}.items()
            if v is not None}


# --- queries ---

def list_(collection: Optional[str] = None, where: Optional[Dict[str, Any]] = None,
         sort: Optional[Sequence[str]] = None, order: Optional[str] = None, limit: Optional[int] = None,
         offset: Optional[int] = None, after: Optional[str] = None, include: Optional[Sequence[str]] = None,
         explain: Optional[bool] = None, view: Optional[str] = None) -> Call:
    """One page of a collection or a view (§5.6); pass `page.next` as `after` for the next one."""
    return Call("list", {"collection": collection, "view": view,
                         **_list_fields(where, sort, order, limit, offset, after, include, explain)}, READ, Page)


def count(collection: Optional[str] = None, where: Optional[Dict[str, Any]] = None,
          sort: Optional[Sequence[str]] = None, view: Optional[str] = None, ref: Any = None,
          from_: Optional[str] = None, explain: Optional[bool] = None) -> Call:
    """How many objects match (§5.7): an int, or the result `{count, plan}` with `explain=True`."""
    return Call("count", {"collection": collection, "view": view, "ref": _ref_text(ref), "from": from_,
                          "where": where, "sort": _paths(sort), "explain": explain}, READ,
                (lambda r: r) if explain else (lambda r: r["count"]))


def links(ref: Any, field: str, where: Optional[Dict[str, Any]] = None, sort: Optional[Sequence[str]] = None,
          order: Optional[str] = None, limit: Optional[int] = None, offset: Optional[int] = None,
          after: Optional[str] = None, include: Optional[Sequence[str]] = None,
          explain: Optional[bool] = None) -> Call:
    """The objects the reference field `field` of `ref` points at (§5.20)."""
    return Call("links", {"ref": _ref_text(ref), "field": field,
                          **_list_fields(where, sort, order, limit, offset, after, include, explain)}, READ, Page)


def backlinks(ref: Any, from_: str, where: Optional[Dict[str, Any]] = None, sort: Optional[Sequence[str]] = None,
              order: Optional[str] = None, limit: Optional[int] = None, offset: Optional[int] = None,
              after: Optional[str] = None, include: Optional[Sequence[str]] = None,
              explain: Optional[bool] = None) -> Call:
    """The objects whose field `from_` (`"Collection.path"`) refers to `ref` (§5.21)."""
    return Call("backlinks", {"ref": _ref_text(ref), "from": from_,
                              **_list_fields(where, sort, order, limit, offset, after, include, explain)}, READ, Page)


def history(collection: str, id: str, after: Optional[int] = None, limit: Optional[int] = None) -> Call:
    """One page of the events of one object, oldest first (§5.8)."""
    return Call("history", {"collection": collection, "id": id, "after": after, "limit": limit}, READ, EventPage)


def events(after: Optional[int] = None, limit: Optional[int] = None) -> Call:
    """One page of the global log after sequence `after` (§5.9)."""
    return Call("events", {"after": after, "limit": limit}, READ, EventPage)


def stats() -> Call:
    """Counters of the store and the daemon (§5.10)."""
    return Call("stats", {})


def metrics() -> Call:
    """The Prometheus text of every counter (§5.24); admin only."""
    return Call("metrics", {}, READ, lambda r: r["text"])


def verify() -> Call:
    """Checks the hash chain, replays the log and re-hashes files (§5.16); admin only."""
    return Call("verify", {})


def backup(directory: str) -> Call:
    """A hot, compacted copy below foliod's backup-dir (§5.17); admin only."""
    return Call("backup", {"directory": directory})


def unwatch(watch: Any) -> Call:
    """Ends the watch with tag `watch` on this connection (§5.15)."""
    return Call("unwatch", {"watch": watch}, ONCE)


# --- views and schemas (client.view.*, client.schema.*) ---

def view_define(name: str, collection: str, where: Optional[Dict[str, Any]] = None,
                sort: Optional[Sequence[str]] = None, unique: Optional[bool] = None) -> Call:
    """Defines a view (§5.11); returns the definition with `count`."""
    return Call("view.define", {"name": name, "collection": collection, "where": where, "sort": _paths(sort),
                                "unique": unique}, ONCE)


def view_drop(name: str) -> Call:
    """Drops a view (§5.12)."""
    return Call("view.drop", {"name": name}, ONCE)


def view_list() -> Call:
    """Every view's definition (§5.13)."""
    return Call("view.list", {}, READ, lambda r: r["views"])


def schema_define(collection: str, fields: Dict[str, Any], additional_fields: Optional[bool] = None) -> Call:
    """Defines or replaces a collection's schema (§5.22)."""
    return Call("schema.define", {"collection": collection, "fields": fields,
                                  "additionalFields": additional_fields}, ONCE)


def schema_get(collection: str) -> Call:
    return Call("schema.get", {"collection": collection})


def schema_list() -> Call:
    return Call("schema.list", {}, READ, lambda r: r["schemas"])


def schema_drop(collection: str) -> Call:
    return Call("schema.drop", {"collection": collection}, ONCE)


# --- files (§5.25) ---

# A piece's base64 must fit in a request line of the default 1 MiB with room for the envelope.
FILE_PIECE = 512 * 1024
FILE_INLINE_MAX = 512 * 1024


def file_put_inline(data: bytes, name: Optional[str] = None, content_type: Optional[str] = None,
                    replace: Optional[bool] = None) -> Call:
    return Call("file.put", {"name": name, "contentType": content_type, "replace": replace or None,
                             "data": base64.b64encode(data).decode("ascii")}, ONCE)


def file_begin(name: Optional[str], content_type: Optional[str], replace: Optional[bool], size: int,
               sha256: str) -> Call:
    return Call("file.begin", {"name": name, "contentType": content_type, "replace": replace or None,
                               "size": size, "sha256": sha256}, ONCE, lambda r: r["upload"])


def file_write(upload: str, offset: int, data: bytes) -> Call:
    return Call("file.write", {"upload": upload, "offset": offset,
                               "data": base64.b64encode(data).decode("ascii")}, ONCE)


def file_commit(upload: str) -> Call:
    return Call("file.commit", {"upload": upload}, ONCE)


def file_put_plan(data: bytes, name: Optional[str] = None, content_type: Optional[str] = None,
                  replace: Optional[bool] = None):
    """Puts a file: in one `file.put` up to 512 KiB, else in pieces (`file.begin`, `file.write` eight at a
    time in flight, `file.commit`) on one connection. A plan: a generator of calls (or lists of calls to
    pipeline) whose answers are sent back into it; its return value is the file's metadata."""
    if len(data) <= FILE_INLINE_MAX:
        return (yield file_put_inline(data, name, content_type, replace))
    upload = yield file_begin(name, content_type, replace, len(data), hashlib.sha256(data).hexdigest())
    offsets = range(0, len(data), FILE_PIECE)
    for first in range(0, len(offsets), 8):
        yield [file_write(upload, o, data[o:o + FILE_PIECE]) for o in offsets[first:first + 8]]
    return (yield file_commit(upload))


def file_read_plan(name: str):
    """Reads a whole file in pieces of 512 KiB; a plan (see `file_put_plan`) returning its bytes."""
    pieces = []
    offset, size = 0, None
    while size is None or offset < size:
        piece, size = yield file_read_piece(name, offset)
        if not piece:
            break
        pieces.append(piece)
        offset += len(piece)
    return b"".join(pieces)


def file_get(name: str, referrers: Optional[bool] = None, limit: Optional[int] = None) -> Call:
    """A file's metadata (and with `referrers=True` the records that refer to it)."""
    return Call("file.get", {"name": name, "referrers": referrers, "limit": limit})


def file_read_piece(name: str, offset: int = 0, length: Optional[int] = None) -> Call:
    return Call("file.read", {"name": name, "offset": offset, "length": length}, READ,
                lambda r: (base64.b64decode(r["data"]), r["size"]))


def file_list(prefix: Optional[str] = None, after: Optional[str] = None, limit: Optional[int] = None) -> Call:
    """One page of file names (and metadata) in name order."""
    return Call("file.list", {"prefix": prefix, "after": after, "limit": limit}, READ, Page)


def file_delete(name: str, force: Optional[bool] = None) -> Call:
    """Unbinds a name; `Conflict` with `referrers` while records refer to it, unless `force=True`."""
    return Call("file.delete", {"name": name, "force": force}, ONCE)


# The ops every client exposes under their own names, with the builder's signature.
PLAIN = {
    "hello": hello, "create": create, "get": get, "update": update, "delete": delete, "batch": batch,
    "list": list_, "count": count, "links": links, "backlinks": backlinks, "history": history, "events": events,
    "stats": stats, "metrics": metrics, "verify": verify, "backup": backup, "file_get": file_get,
    "file_list": file_list, "file_delete": file_delete,
}
VIEW = {"define": view_define, "drop": view_drop, "list": view_list}
SCHEMA = {"define": schema_define, "get": schema_get, "list": schema_list, "drop": schema_drop}
