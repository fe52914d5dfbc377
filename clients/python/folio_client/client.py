"""The blocking client: one Unix-socket connection shared by every thread, answers matched by tag.

A reader thread reads every line and hands it to whoever waits for it: the request with that tag,
or the watch or live query that owns the tag. Any number of threads may send at once, so requests
from several threads are pipelined on the one connection.
"""

from __future__ import annotations

import collections
import itertools
import queue
import socket
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Tuple

from . import operations as ops
from .binding import Namespace, Pending, bind_sync
from .errors import CannotConnect, ConnectionLost, FolioError, NotFound
from .paths import socket_candidates
from .routing import Router, reopen_until
from .results import Page
from .streams import LiveState, LiveUpdate, WatchState
from .values import decode_line

__all__ = ["Client", "connect", "Pipeline", "Watch", "LiveQuery"]


def connect(path: Optional[str] = None, *, timeout: Optional[float] = None, request_keys: bool = True,
            reconnect_timeout: float = 10.0) -> "Client":
    """Connects to foliod at `path`, or at the default socket (PROTOCOL.md §1: `FOLIO_SOCKET`, then the
    user's runtime socket, then /run/folio/folio.sock). `timeout` bounds each wait for an answer in
    seconds (None: wait). With `request_keys` (the default) every write carries a fresh request key
    and is sent again, with the same key, after a lost connection: on a new connection, waiting up to
    `reconnect_timeout` seconds from the loss for foliod to come back (a restart), and as often as the
    connection is lost within that time (a killed foliod may take a new connection on its way out).
    A request made after a loss waits for a new connection the same way, then `CannotConnect`."""
    return Client(path, timeout=timeout, request_keys=request_keys, reconnect_timeout=reconnect_timeout)


class _Connection:
    """One socket and its reader thread. Dead for good once lost; the client opens a new one."""

    def __init__(self, path: str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except BaseException:
            sock.close()
            raise
        self.path = path
        self.router = Router(path)
        self.max_line: Optional[int] = None  # foliod's, asked for before the first long line
        self._sock = sock
        self._send = threading.Lock()  # keeps each sendall's bytes together
        self._reader = threading.Thread(target=self._read, name=f"folio reader {path}", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self.router.alive

    def send(self, requests: List[Tuple[int, bytes, Optional[queue.Queue]]]) -> List[Future]:
        """Sends the lines in one write; each gets a future of its answer's result. A line with a queue
        starts a stream: its later lines (and its final error) go to the queue."""
        futures = []
        try:
            # Registered in the order they are sent: an answer foliod could not tag goes to the oldest.
            with self._send:
                for tag, _, stream in requests:
                    future: Future = Future()
                    futures.append(future)
                    try:
                        self.router.register(tag, future, stream)
                    except ConnectionLost as error:
                        future.set_exception(error)
                self._sock.sendall(b"".join(line for _, line, _ in requests))
        except OSError as error:
            self.lose(f"sending to {self.path} failed: {error}")
        return futures

    def _read(self) -> None:
        reason = f"foliod closed the connection on {self.path}"
        try:
            with self._sock.makefile("rb") as lines:
                for line in lines:
                    self.router.route(decode_line(line))
        except OSError as error:
            reason = f"reading from {self.path} failed: {error}"
        except Exception as error:  # a line that is not JSON: nothing after it can be trusted
            reason = f"unreadable answer from {self.path}: {error!r}"
        finally:
            self.lose(reason)
            self._sock.close()

    def lose(self, reason: str) -> None:
        """Ends the connection: every waiting request and stream gets the error."""
        if self.router.lose(reason):
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.lose("closed by the client")
        if threading.current_thread() is not self._reader:
            self._reader.join()


class Client:
    """A blocking, thread-safe client of foliod. Use `connect()`; close it (or use `with`)."""

    def __init__(self, path: Optional[str] = None, *, timeout: Optional[float] = None, request_keys: bool = True,
                 reconnect_timeout: float = 10.0):
        self._candidates = [path] if path else socket_candidates()
        self.reconnect_timeout = reconnect_timeout
        self.path: Optional[str] = None
        self.timeout = timeout
        self.request_keys = request_keys
        self._lock = threading.Lock()
        self._conn: Optional[_Connection] = None
        self._closed = False
        self._tags = itertools.count(1)
        self.view = Namespace(self._call, ops.VIEW, "view")
        self.schema = Namespace(self._call, ops.SCHEMA, "schema")
        self._connection()

    # --- connection ---

    def _connection(self, until: Optional[float] = None) -> _Connection:
        """The open connection, or a new one if the last was lost, trying again while foliod does not
        answer: until `until` (a monotonic time), and after a loss for `reconnect_timeout` from it."""
        while True:
            try:
                with self._lock:
                    if self._closed:
                        raise ConnectionLost("the client is closed")
                    if self._conn is None or not self._conn.alive:
                        until = reopen_until(self._conn and self._conn.router, until, self.reconnect_timeout)
                        self._conn = self._open()
                    return self._conn
            except CannotConnect:
                if until is None or time.monotonic() >= until:
                    raise
                time.sleep(0.02)

    def _open(self) -> _Connection:
        if self.path is not None:
            try:
                return _Connection(self.path)
            except OSError as error:
                raise CannotConnect(f"cannot connect to foliod at {self.path}: {error.strerror or error}") from error
        tried = []
        for candidate in self._candidates:
            try:
                connection = _Connection(candidate)
            except (FileNotFoundError, ConnectionRefusedError, PermissionError) as error:
                tried.append(f"{candidate} ({error.strerror})")
                continue
            self.path = candidate
            return connection
        raise CannotConnect("cannot connect to foliod: tried " + ", ".join(tried))

    def close(self) -> None:
        """Closes the connection; waiting requests get `ConnectionLost`, watches end with it."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<folio_client.Client {self.path or self._candidates}>"

    # --- requests ---

    def _new_tag(self) -> int:
        return next(self._tags)

    def _prepare(self, call: ops.Call) -> Tuple[Dict[str, Any], bool]:
        return ops.prepare(call, self.request_keys)

    def _send(self, conn: _Connection,
              requests: List[Tuple[Dict[str, Any], Optional[queue.Queue]]]) -> List[Tuple[int, Future]]:
        """Tags the requests and sends them in one write: their tags and the futures of their answers."""
        tags = [self._new_tag() for _ in requests]
        lines = ops.encode_requests(tags, requests)
        if ops.needs_max_line(lines):
            if conn.max_line is None:
                conn.max_line = self.hello()["maxLine"]
            ops.check_max_line(lines, conn.max_line)
        return list(zip(tags, conn.send(lines)))

    def _exchange(self, batch: List[Tuple[Dict[str, Any], bool]]) -> List[Tuple[Any, Optional[BaseException]]]:
        """Sends the requests together and waits for every answer; those lost with the connection and
        retryable are sent again, together, on a new connection, until `reconnect_timeout` has passed
        since the first loss."""
        outcomes: List[Tuple[Any, Optional[BaseException]]] = [(None, None)] * len(batch)
        waiting = list(range(len(batch)))
        until: Optional[float] = None
        while True:
            futures = self._send(self._connection(until), [(batch[i][0], None) for i in waiting])
            lost = []
            for i, (_, future) in zip(waiting, futures):
                try:
                    outcomes[i] = (future.result(self.timeout), None)
                except ConnectionLost as error:
                    outcomes[i] = (None, error)
                    if batch[i][1] and not self._closed and (until is None or time.monotonic() < until):
                        lost.append(i)
                except FolioError as error:
                    outcomes[i] = (None, error)
            if not lost:
                break
            waiting = lost
            until = until if until is not None else time.monotonic() + self.reconnect_timeout
        return outcomes

    def _call(self, call: ops.Call) -> Any:
        [(result, error)] = self._exchange([self._prepare(call)])
        if error is not None:
            raise error
        return call.decode(result)

    def _run(self, plan) -> Any:
        """Drives a plan of operations.py (a generator of calls) to its return value."""
        try:
            step = next(plan)
            while True:
                calls = step if isinstance(step, list) else [step]
                outcomes = self._exchange([self._prepare(c) for c in calls])
                answers = []
                for call, (result, error) in zip(calls, outcomes):
                    if error is not None:
                        step = plan.throw(error)
                        break
                    answers.append(call.decode(result))
                else:
                    step = plan.send(answers if isinstance(step, list) else answers[0])
        except StopIteration as done:
            return done.value

    def pipeline(self) -> "Pipeline":
        """Collects requests and sends them in one write: `with client.pipeline() as p: a = p.get(...)`,
        then `a.result()`. Each method of the client returns a `Pending` there."""
        return Pipeline(self)

    # --- paging ---

    def _pages(self, build: Callable[..., ops.Call], args: tuple, kwargs: dict) -> Iterator[Any]:
        after = kwargs.pop("after", None)
        while True:
            page = self._call(build(*args, after=after, **kwargs))
            yield page
            if not page.has_more:
                return
            after = page.next

    def pages(self, collection: Optional[str] = None, **kwargs) -> Iterator[Page]:
        """Every page of a `list` (same arguments), following `next`."""
        return self._pages(ops.list_, (collection,), kwargs)

    def iter_list(self, collection: Optional[str] = None, **kwargs) -> Iterator[dict]:
        """Every object of a `list` (same arguments), page after page (`limit` is the page size)."""
        return (item for page in self.pages(collection, **kwargs) for item in page.items)

    def iter_links(self, ref: Any, field: str, **kwargs) -> Iterator[dict]:
        return (item for page in self._pages(ops.links, (ref, field), kwargs) for item in page.items)

    def iter_backlinks(self, ref: Any, from_: str, **kwargs) -> Iterator[dict]:
        return (item for page in self._pages(ops.backlinks, (ref, from_), kwargs) for item in page.items)

    def iter_history(self, collection: str, id: str, **kwargs) -> Iterator[dict]:
        """Every event of one object, oldest first."""
        return (e for page in self._pages(ops.history, (collection, id), kwargs) for e in page.events)

    def iter_events(self, after: int = 0, limit: Optional[int] = None) -> Iterator[dict]:
        """Every event of the log after `after`, up to the last one at the time of each read."""
        return (e for page in self._pages(ops.events, (), {"after": after, "limit": limit}) for e in page.events)

    def iter_files(self, prefix: Optional[str] = None, limit: Optional[int] = None) -> Iterator[dict]:
        return (f for page in self._pages(ops.file_list, (prefix,), {"limit": limit}) for f in page.items)

    # --- files ---

    def file_put(self, name: Optional[str] = None, data: Optional[bytes] = None, *, path: Optional[str] = None,
                 content_type: Optional[str] = None, replace: bool = False) -> dict:
        """Stores `data` (or the content of the file at `path`) under `name`; returns its metadata."""
        if (data is None) == (path is None):
            raise TypeError("file_put takes data or path, one of them")
        if path is not None:
            with open(path, "rb") as f:
                data = f.read()
        return self._run(ops.file_put_plan(bytes(data), name, content_type, replace))

    def file_read(self, name: str) -> bytes:
        """The whole content of a file."""
        return self._run(ops.file_read_plan(name))

    # --- streams ---

    def watch(self, after: Optional[int] = None, collection: Optional[str] = None, *,
              resume: bool = False) -> "Watch":
        """Streams events after sequence `after` (default: from now on), of one `collection` or all,
        as an iterator; `close()` (or leaving `with`) sends `unwatch`. `Lagging` ends it with
        `last_seq`; with `resume=True` it starts again after the last event, also after a lost
        connection."""
        return Watch(self, WatchState(after, collection, resume))

    def live(self, collection: Optional[str] = None, *, view: Optional[str] = None,
             where: Optional[Dict[str, Any]] = None, sort: Any = None, order: Optional[str] = None,
             limit: Optional[int] = None, resume: bool = True) -> "LiveQuery":
        """A live query: the first `limit` objects of the query, kept current. `items`, `total` and
        `seq` are the window now; iterating yields a `LiveUpdate` per snapshot or change. On a lost
        connection or `lagging` it resumes after `seq` (unless `resume=False`)."""
        query = {"collection": collection, "view": view, "where": where, "sort": ops._paths(sort),
                 "order": order, "limit": limit}
        return LiveQuery(self, LiveState(query, resume))


for _name, _build in ops.PLAIN.items():
    setattr(Client, _name, bind_sync(_name, _build, Client._call, "Client"))


class Pipeline:
    """Requests collected, then sent in one write when the `with` block ends (or at `execute()`). Each
    method of the client is here too and returns a `Pending`. Writes keep their request keys, so a
    lost connection sends the pipeline's writes and reads once more, as single requests do."""

    def __init__(self, client: Client):
        self._client = client
        self._calls: List[Tuple[ops.Call, Pending]] = []
        self.view = Namespace(self._add, ops.VIEW, "view")
        self.schema = Namespace(self._add, ops.SCHEMA, "schema")

    def _add(self, call: ops.Call) -> Pending:
        pending = Pending()
        self._calls.append((call, pending))
        return pending

    def execute(self, raise_on_error: bool = True) -> List[Any]:
        """Sends what was collected and waits for every answer: the results in order. With
        `raise_on_error=False` a failed request's place holds its exception."""
        calls, self._calls = self._calls, []
        outcomes = self._client._exchange([self._client._prepare(call) for call, _ in calls])
        values = []
        for (call, pending), (result, error) in zip(calls, outcomes):
            if error is None:
                try:
                    result = call.decode(result)
                except Exception as decode_error:  # a result of an unexpected shape
                    error = decode_error
            pending.settle(result, error)
            values.append(error if error is not None else result)
        if raise_on_error:
            for pending in (p for _, p in calls):
                if pending.exception() is not None:
                    raise pending.exception()
        return values

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.execute(raise_on_error=False)

    def __len__(self) -> int:
        return len(self._calls)


for _name, _build in ops.PLAIN.items():
    setattr(Pipeline, _name, bind_sync(_name, _build, Pipeline._add, "Pipeline"))


class _Stream:
    """Drives a WatchState or LiveState over the client's connection (see streams.py)."""

    def __init__(self, client: Client, state):
        self._client = client
        self._state = state
        self._ready: Deque[Any] = collections.deque()
        self._conn: Optional[_Connection] = None
        self._tag: Optional[int] = None
        self._queue: Optional[queue.Queue] = None
        self._closed = False
        self._start()

    def _start(self) -> None:
        for attempt in (1, 2):
            conn = self._client._connection()
            stream: queue.Queue = queue.Queue()
            request = {k: v for k, v in self._state.request().items() if v is not None}
            [(tag, future)] = self._client._send(conn, [(request, stream)])
            try:
                result = future.result(self._client.timeout)
            except ConnectionLost:
                if attempt == 2 or self._client._closed:
                    raise
                continue
            except BaseException:
                # Given up on (a timeout): the watch may start on the server all the same, and its
                # lines would pile up in a queue no one reads. Stop routing them, and end it there.
                if conn.router.end_stream(tag, notify=False) and conn.alive:
                    self._client._send(conn, [(ops.unwatch(tag).fields, None)])
                raise
            self._conn, self._tag, self._queue = conn, tag, stream
            try:
                self._ready.extend(self._state.started(result))
            except FolioError as error:
                self._fail(error)
            return

    def _fail(self, error: FolioError) -> None:
        """The stream ended with `error`: start again if the state says so, else raise it."""
        if self._closed or not self._state.restartable(error):
            self._queue = None
            raise error
        self._abandon()
        self._start()

    def _abandon(self) -> None:
        """Ends the current stream on the server if it may still run there."""
        conn, tag = self._conn, self._tag
        self._queue = None
        if conn is not None and tag is not None and conn.alive and conn.router.end_stream(tag, notify=False):
            self._client._send(conn, [(ops.unwatch(tag).fields, None)])

    def get(self, timeout: Optional[float] = None) -> Any:
        """The next item; `StopIteration` once the stream ended, `TimeoutError` after `timeout` seconds."""
        while not self._ready:
            if self._queue is None:
                raise StopIteration
            try:
                kind, payload = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"nothing arrived within {timeout} s") from None
            if kind == "line":
                try:
                    self._ready.extend(self._state.line(payload))
                except FolioError as error:
                    self._fail(error)
            elif kind == "end":
                self._queue = None
            else:
                self._fail(payload)
        return self._ready.popleft()

    def __iter__(self) -> "_Stream":
        return self

    def __next__(self) -> Any:
        return self.get()

    def close(self) -> None:
        """Sends `unwatch` and waits for it; items already received can still be read."""
        if self._closed:
            return
        self._closed = True
        conn, tag = self._conn, self._tag
        if self._queue is None or conn is None or tag is None or not conn.alive:
            return
        [(_, future)] = self._client._send(conn, [(ops.unwatch(tag).fields, None)])
        try:
            self._state.ended(future.result(self._client.timeout))
        except (NotFound, ConnectionLost):
            pass  # it had ended already (lagging, a dropped view, the connection)
        conn.router.end_stream(tag)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Watch(_Stream):
    """A watch of the log: iterating yields events (§7 wire form, typed values decoded)."""

    @property
    def last_seq(self) -> Optional[int]:
        """The sequence of the last event delivered (or the `after` it started from)."""
        return self._state.last_seq


class LiveQuery(_Stream):
    """A live query: `items` (the window), `total` and `seq` are current after each item taken."""

    @property
    def items(self) -> List[dict]:
        return self._state.items

    @property
    def total(self) -> Optional[int]:
        return self._state.total

    @property
    def seq(self) -> Optional[int]:
        return self._state.seq

    def __next__(self) -> LiveUpdate:
        return self.get()
