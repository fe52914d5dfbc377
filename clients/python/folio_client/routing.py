"""Which waiter an incoming line belongs to, for both clients: the request with its tag (a future), or
the watch or live query that owns the tag (a queue). The futures and queues may be those of
`concurrent.futures`/`queue` or of `asyncio`: only `set_result`, `set_exception`, `done` and
`put_nowait` are used.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Optional

from .errors import ConnectionLost, FolioError, TooLarge, error_from_wire


class Router:
    """The requests and streams waiting on one connection. Thread-safe; once lost, lost for good."""

    def __init__(self, path: str):
        self.path = path
        self.alive = True
        self.lost_at: Optional[float] = None  # time.monotonic() when it was lost
        self._lock = threading.Lock()  # guards the maps and `alive`; never held while blocking
        self._pending: Dict[Any, Any] = {}
        self._streams: Dict[Any, Any] = {}
        self._last_error: Optional[FolioError] = None

    def register(self, tag: Any, future: Any, stream: Any = None) -> None:
        """Waits for the answer to `tag`; with a `stream` queue, its later lines and end go there.
        Call in the order the requests are sent (under the lock their sending takes)."""
        with self._lock:
            if not self.alive:
                raise ConnectionLost(f"the connection to {self.path} is closed")
            self._pending[tag] = future
            if stream is not None:
                self._streams[tag] = stream

    def end_stream(self, tag: Any, notify: bool = True) -> bool:
        """Stops routing the stream's lines (after its unwatch); whether it was still running."""
        with self._lock:
            stream = self._streams.pop(tag, None)
        if stream is not None and notify:
            stream.put_nowait(("end", None))
        return stream is not None

    def route(self, message: Dict[str, Any]) -> None:
        tag = message.get("tag")
        if "ok" not in message:  # a stream line: a watch's event, a live query's change
            with self._lock:
                stream = self._streams.get(tag)
            if stream is not None:
                stream.put_nowait(("line", message))
            return
        ok = message["ok"] is True
        if tag is None:
            error = error_from_wire(message.get("error", {}))
            if not ok and error.code == "bad_request" and self._fail_oldest(error):
                return
            # About the connection itself (too_large, idle-timeout, refused): it closes next.
            if not ok:
                self._last_error = error
            return
        stream = None
        with self._lock:
            future = self._pending.pop(tag, None)
            if not ok:  # a stream that failed to start, or one that ended (lagging, a dropped view)
                stream = self._streams.pop(tag, None)
        if future is not None:
            if future.done():  # given up on (a timeout of asyncio.wait_for cancels it)
                return
            if ok:
                future.set_result(message.get("result"))
            else:
                future.set_exception(error_from_wire(message.get("error", {})))
        elif stream is not None:
            stream.put_nowait(("error", error_from_wire(message.get("error", {}))))

    def _fail_oldest(self, error: FolioError) -> bool:
        """A line foliod could not read, so not its tag either (a number beyond a double, nesting
        past 128 levels): answers come in the order of the requests, and requests are registered in
        the order they are sent, so it answers the oldest request waiting. Without this it waited
        for good."""
        with self._lock:
            oldest = next(iter(self._pending), None)
            if oldest is None:
                return False
            future = self._pending.pop(oldest)
            stream = self._streams.pop(oldest, None)
        if not future.done():
            future.set_exception(error)
        elif stream is not None:
            stream.put_nowait(("error", error))
        return True

    def lose(self, reason: str) -> bool:
        """Fails every waiting request and stream; False if it was lost already."""
        with self._lock:
            if not self.alive:
                return False
            self.alive = False
            self.lost_at = time.monotonic()
            pending, self._pending = self._pending, {}
            streams, self._streams = self._streams, {}
        last = self._last_error
        for future in pending.values():
            if not future.done():
                # A line over maxLine is refused for good; sending it again would close the next connection too.
                future.set_exception(last if isinstance(last, TooLarge) else ConnectionLost(reason, last))
        for stream in streams.values():
            stream.put_nowait(("error", ConnectionLost(reason, last)))
        return True


def reopen_until(router: Optional[Router], until: Optional[float], reconnect_timeout: float) -> Optional[float]:
    """How long to keep trying to open a connection in place of the one `router` served: a request
    made after foliod went away (a restart) waits up to `reconnect_timeout` from the loss for it to
    come back, as a request lost in flight does; before the first connection, only until `until`."""
    if router is None or router.lost_at is None:
        return until
    resumed = router.lost_at + reconnect_timeout
    return resumed if until is None else max(until, resumed)
