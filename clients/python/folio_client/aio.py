"""The asyncio client: the same API as the blocking one, each call a coroutine.

    client = await folio_client.aio.connect()
    task = await client.create("Task", {"title": "Buy milk"})
    async for t in client.iter_list("Task"):
        ...
    async with client.watch(after=0) as events:
        async for event in events:
            ...

Requests awaited together (`asyncio.gather`) share the one connection and are pipelined.
"""

from __future__ import annotations

import asyncio
import time
import collections
import itertools
from typing import Any, AsyncIterator, Callable, Deque, Dict, List, Optional, Tuple

from . import operations as ops
from .binding import Namespace, Pending, bind_async, bind_sync
from .errors import CannotConnect, ConnectionLost, FolioError, NotFound
from .paths import socket_candidates
from .results import Page
from .routing import Router, reopen_until
from .streams import LiveState, LiveUpdate, WatchState
from .values import decode_line

__all__ = ["connect", "AsyncClient", "AsyncPipeline", "AsyncWatch", "AsyncLiveQuery"]

# asyncio's StreamReader refuses lines longer than its limit; a page may hold 8 MiB of items, a live
# query's first answer up to 1000 objects.
_LINE_LIMIT = 1 << 28


async def connect(path: Optional[str] = None, *, timeout: Optional[float] = None,
                  request_keys: bool = True, reconnect_timeout: float = 10.0) -> "AsyncClient":
    """As `folio_client.connect`, for asyncio (`asyncio.open_unix_connection`)."""
    client = AsyncClient(path, timeout=timeout, request_keys=request_keys, reconnect_timeout=reconnect_timeout)
    await client._connection()
    return client


class _AsyncConnection:
    """One socket and the task that reads it. Dead for good once lost."""

    def __init__(self, path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.path = path
        self.router = Router(path)
        self.max_line: Optional[int] = None  # foliod's, asked for before the first long line
        self._reader = reader
        self._writer = writer
        self._write_lock = asyncio.Lock()
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def open(cls, path: str) -> "_AsyncConnection":
        reader, writer = await asyncio.open_unix_connection(path, limit=_LINE_LIMIT)
        return cls(path, reader, writer)

    @property
    def alive(self) -> bool:
        return self.router.alive

    async def send(self, requests: List[Tuple[int, bytes, Optional[asyncio.Queue]]]) -> List[asyncio.Future]:
        loop = asyncio.get_running_loop()
        futures = []
        try:
            # Registered in the order they are sent: an answer foliod could not tag goes to the oldest.
            async with self._write_lock:
                for tag, _, stream in requests:
                    future = loop.create_future()
                    futures.append(future)
                    try:
                        self.router.register(tag, future, stream)
                    except ConnectionLost as error:
                        future.set_exception(error)
                self._writer.write(b"".join(line for _, line, _ in requests))
                await self._writer.drain()
        except (OSError, RuntimeError) as error:
            self.lose(f"sending to {self.path} failed: {error}")
        return futures

    async def _read(self) -> None:
        reason = f"foliod closed the connection on {self.path}"
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                self.router.route(decode_line(line))
        except asyncio.CancelledError:
            reason = "closed by the client"
        except OSError as error:
            reason = f"reading from {self.path} failed: {error}"
        except Exception as error:  # a line that is not JSON, or longer than the reader's limit
            reason = f"unreadable answer from {self.path}: {error!r}"
        finally:
            self.lose(reason)

    def lose(self, reason: str) -> None:
        if self.router.lose(reason):
            self._writer.close()

    async def close(self) -> None:
        self.lose("closed by the client")
        if self._task is not asyncio.current_task():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        try:
            await self._writer.wait_closed()
        except OSError:
            pass


class AsyncClient:
    """An asyncio client of foliod, for one event loop. Use `await connect()`; `await close()`."""

    def __init__(self, path: Optional[str] = None, *, timeout: Optional[float] = None, request_keys: bool = True,
                 reconnect_timeout: float = 10.0):
        self.reconnect_timeout = reconnect_timeout
        self._candidates = [path] if path else socket_candidates()
        self.path: Optional[str] = None
        self.timeout = timeout
        self.request_keys = request_keys
        self._lock: Optional[asyncio.Lock] = None
        self._conn: Optional[_AsyncConnection] = None
        self._closed = False
        self._tags = itertools.count(1)
        self.view = Namespace(self._call, ops.VIEW, "view")
        self.schema = Namespace(self._call, ops.SCHEMA, "schema")

    async def _connection(self, until: Optional[float] = None) -> _AsyncConnection:
        """As `Client._connection`: after a loss, a new connection is tried for `reconnect_timeout`."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        while True:
            try:
                async with self._lock:
                    if self._closed:
                        raise ConnectionLost("the client is closed")
                    if self._conn is None or not self._conn.alive:
                        until = reopen_until(self._conn and self._conn.router, until, self.reconnect_timeout)
                        self._conn = await self._open()
                    return self._conn
            except CannotConnect:
                if until is None or time.monotonic() >= until:
                    raise
                await asyncio.sleep(0.02)

    async def _open(self) -> _AsyncConnection:
        if self.path is not None:
            try:
                return await _AsyncConnection.open(self.path)
            except OSError as error:
                raise CannotConnect(f"cannot connect to foliod at {self.path}: {error.strerror or error}") from error
        tried = []
        for candidate in self._candidates:
            try:
                connection = await _AsyncConnection.open(candidate)
            except (FileNotFoundError, ConnectionRefusedError, PermissionError) as error:
                tried.append(f"{candidate} ({error.strerror})")
                continue
            self.path = candidate
            return connection
        raise CannotConnect("cannot connect to foliod: tried " + ", ".join(tried))

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def __aenter__(self) -> "AsyncClient":
        await self._connection()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<folio_client.aio.AsyncClient {self.path or self._candidates}>"

    # --- requests ---

    async def _send(self, conn: _AsyncConnection,
                    requests: List[Tuple[Dict[str, Any], Optional[asyncio.Queue]]]) -> List[Tuple[int, asyncio.Future]]:
        tags = [next(self._tags) for _ in requests]
        lines = ops.encode_requests(tags, requests)
        if ops.needs_max_line(lines):
            if conn.max_line is None:
                conn.max_line = (await self.hello())["maxLine"]
            ops.check_max_line(lines, conn.max_line)
        return list(zip(tags, await conn.send(lines)))

    async def _wait(self, future: asyncio.Future) -> Any:
        return await asyncio.wait_for(future, self.timeout) if self.timeout is not None else await future

    async def _exchange(self, batch: List[Tuple[Dict[str, Any], bool]]) -> List[Tuple[Any, Optional[BaseException]]]:
        """As `Client._exchange`: sends together, waits for all, sends the lost retryable ones again
        until `reconnect_timeout` has passed since the first loss."""
        outcomes: List[Tuple[Any, Optional[BaseException]]] = [(None, None)] * len(batch)
        waiting = list(range(len(batch)))
        until: Optional[float] = None
        while True:
            futures = await self._send(await self._connection(until), [(batch[i][0], None) for i in waiting])
            lost = []
            for i, (_, future) in zip(waiting, futures):
                try:
                    outcomes[i] = (await self._wait(future), None)
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

    async def _call(self, call: ops.Call) -> Any:
        [(result, error)] = await self._exchange([ops.prepare(call, self.request_keys)])
        if error is not None:
            raise error
        return call.decode(result)

    async def _run(self, plan) -> Any:
        try:
            step = next(plan)
            while True:
                calls = step if isinstance(step, list) else [step]
                outcomes = await self._exchange([ops.prepare(c, self.request_keys) for c in calls])
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

    def pipeline(self) -> "AsyncPipeline":
        """`async with client.pipeline() as p: a = p.get(...)`, then `a.result()`."""
        return AsyncPipeline(self)

    # --- paging ---

    async def _pages(self, build: Callable[..., ops.Call], args: tuple, kwargs: dict) -> AsyncIterator[Any]:
        after = kwargs.pop("after", None)
        while True:
            page = await self._call(build(*args, after=after, **kwargs))
            yield page
            if not page.has_more:
                return
            after = page.next

    def pages(self, collection: Optional[str] = None, **kwargs) -> AsyncIterator[Page]:
        return self._pages(ops.list_, (collection,), kwargs)

    async def iter_list(self, collection: Optional[str] = None, **kwargs) -> AsyncIterator[dict]:
        async for page in self.pages(collection, **kwargs):
            for item in page.items:
                yield item

    async def iter_links(self, ref: Any, field: str, **kwargs) -> AsyncIterator[dict]:
        async for page in self._pages(ops.links, (ref, field), kwargs):
            for item in page.items:
                yield item

    async def iter_backlinks(self, ref: Any, from_: str, **kwargs) -> AsyncIterator[dict]:
        async for page in self._pages(ops.backlinks, (ref, from_), kwargs):
            for item in page.items:
                yield item

    async def iter_history(self, collection: str, id: str, **kwargs) -> AsyncIterator[dict]:
        async for page in self._pages(ops.history, (collection, id), kwargs):
            for event in page.events:
                yield event

    async def iter_events(self, after: int = 0, limit: Optional[int] = None) -> AsyncIterator[dict]:
        async for page in self._pages(ops.events, (), {"after": after, "limit": limit}):
            for event in page.events:
                yield event

    async def iter_files(self, prefix: Optional[str] = None, limit: Optional[int] = None) -> AsyncIterator[dict]:
        async for page in self._pages(ops.file_list, (prefix,), {"limit": limit}):
            for item in page.items:
                yield item

    # --- files ---

    async def file_put(self, name: Optional[str] = None, data: Optional[bytes] = None, *, path: Optional[str] = None,
                       content_type: Optional[str] = None, replace: bool = False) -> dict:
        if (data is None) == (path is None):
            raise TypeError("file_put takes data or path, one of them")
        if path is not None:
            with open(path, "rb") as f:
                data = f.read()
        return await self._run(ops.file_put_plan(bytes(data), name, content_type, replace))

    async def file_read(self, name: str) -> bytes:
        return await self._run(ops.file_read_plan(name))

    # --- streams ---

    def watch(self, after: Optional[int] = None, collection: Optional[str] = None, *,
              resume: bool = False) -> "AsyncWatch":
        """As `Client.watch`; starts at `await`, `async with` or the first `async for` step."""
        return AsyncWatch(self, WatchState(after, collection, resume))

    def live(self, collection: Optional[str] = None, *, view: Optional[str] = None,
             where: Optional[Dict[str, Any]] = None, sort: Any = None, order: Optional[str] = None,
             limit: Optional[int] = None, resume: bool = True) -> "AsyncLiveQuery":
        """As `Client.live`; starts at `await`, `async with` or the first `async for` step."""
        query = {"collection": collection, "view": view, "where": where, "sort": ops._paths(sort),
                 "order": order, "limit": limit}
        return AsyncLiveQuery(self, LiveState(query, resume))


for _name, _build in ops.PLAIN.items():
    setattr(AsyncClient, _name, bind_async(_name, _build, AsyncClient._call, "AsyncClient"))


class AsyncPipeline:
    """As `Pipeline`: collected requests sent in one write when `async with` ends (or at `execute()`)."""

    def __init__(self, client: AsyncClient):
        self._client = client
        self._calls: List[Tuple[ops.Call, Pending]] = []
        self.view = Namespace(self._add, ops.VIEW, "view")
        self.schema = Namespace(self._add, ops.SCHEMA, "schema")

    def _add(self, call: ops.Call) -> Pending:
        pending = Pending()
        self._calls.append((call, pending))
        return pending

    async def execute(self, raise_on_error: bool = True) -> List[Any]:
        calls, self._calls = self._calls, []
        outcomes = await self._client._exchange([ops.prepare(c, self._client.request_keys) for c, _ in calls])
        values = []
        for (call, pending), (result, error) in zip(calls, outcomes):
            if error is None:
                try:
                    result = call.decode(result)
                except Exception as decode_error:
                    error = decode_error
            pending.settle(result, error)
            values.append(error if error is not None else result)
        if raise_on_error:
            for _, pending in calls:
                if pending.exception() is not None:
                    raise pending.exception()
        return values

    async def __aenter__(self) -> "AsyncPipeline":
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            await self.execute(raise_on_error=False)

    def __len__(self) -> int:
        return len(self._calls)


for _name, _build in ops.PLAIN.items():
    setattr(AsyncPipeline, _name, bind_sync(_name, _build, AsyncPipeline._add, "AsyncPipeline"))


class _AsyncStream:
    """Drives a WatchState or LiveState over the client's connection (see streams.py)."""

    def __init__(self, client: AsyncClient, state):
        self._client = client
        self._state = state
        self._ready: Deque[Any] = collections.deque()
        self._conn: Optional[_AsyncConnection] = None
        self._tag: Optional[int] = None
        self._queue: Optional[asyncio.Queue] = None
        self._started = False
        self._closed = False

    async def start(self):
        """Sends the watch and waits for its answer (once); returns the stream."""
        if not self._started:
            self._started = True
            await self._start()
        return self

    def __await__(self):
        return self.start().__await__()

    async def _start(self) -> None:
        for attempt in (1, 2):
            conn = await self._client._connection()
            stream: asyncio.Queue = asyncio.Queue()
            request = {k: v for k, v in self._state.request().items() if v is not None}
            [(tag, future)] = await self._client._send(conn, [(request, stream)])
            try:
                result = await self._client._wait(future)
            except ConnectionLost:
                if attempt == 2 or self._client._closed:
                    raise
                continue
            except BaseException:
                # Given up on (a timeout, a cancellation): the watch may start on the server all the
                # same, and its lines would pile up in a queue no one reads. Stop routing them, and
                # end it there.
                if conn.router.end_stream(tag, notify=False) and conn.alive:
                    await self._client._send(conn, [(ops.unwatch(tag).fields, None)])
                raise
            self._conn, self._tag, self._queue = conn, tag, stream
            try:
                self._ready.extend(self._state.started(result))
            except FolioError as error:
                await self._fail(error)
            return

    async def _fail(self, error: FolioError) -> None:
        if self._closed or not self._state.restartable(error):
            self._queue = None
            raise error
        conn, tag = self._conn, self._tag
        self._queue = None
        if conn is not None and tag is not None and conn.alive and conn.router.end_stream(tag, notify=False):
            await self._client._send(conn, [(ops.unwatch(tag).fields, None)])
        await self._start()

    async def get(self, timeout: Optional[float] = None) -> Any:
        """The next item; `StopAsyncIteration` once the stream ended, `TimeoutError` after `timeout` s."""
        await self.start()
        while not self._ready:
            if self._queue is None:
                raise StopAsyncIteration
            try:
                kind, payload = await asyncio.wait_for(self._queue.get(), timeout)
            except asyncio.TimeoutError:
                raise TimeoutError(f"nothing arrived within {timeout} s") from None
            if kind == "line":
                try:
                    self._ready.extend(self._state.line(payload))
                except FolioError as error:
                    await self._fail(error)
            elif kind == "end":
                self._queue = None
            else:
                await self._fail(payload)
        return self._ready.popleft()

    def __aiter__(self) -> "_AsyncStream":
        return self

    async def __anext__(self) -> Any:
        return await self.get()

    async def close(self) -> None:
        """Sends `unwatch` and waits for it; items already received can still be read."""
        if self._closed:
            return
        self._closed = True
        conn, tag = self._conn, self._tag
        if self._queue is None or conn is None or tag is None or not conn.alive:
            return
        [(_, future)] = await self._client._send(conn, [(ops.unwatch(tag).fields, None)])
        try:
            self._state.ended(await self._client._wait(future))
        except (NotFound, ConnectionLost):
            pass
        conn.router.end_stream(tag)

    async def __aenter__(self):
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()


class AsyncWatch(_AsyncStream):
    """A watch of the log: `async for event in watch`."""

    @property
    def last_seq(self) -> Optional[int]:
        return self._state.last_seq


class AsyncLiveQuery(_AsyncStream):
    """A live query: `items`, `total`, `seq`; `async for update in live` yields `LiveUpdate`s."""

    @property
    def items(self) -> List[dict]:
        return self._state.items

    @property
    def total(self) -> Optional[int]:
        return self._state.total

    @property
    def seq(self) -> Optional[int]:
        return self._state.seq

    async def __anext__(self) -> LiveUpdate:
        return await self.get()
