"""Fixtures: the real foliod in a temporary directory of each test, and a proxy that can drop or stall
the connection between the client and foliod."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, List, Optional

import pytest

import folio_client

REPO = Path(__file__).resolve().parents[3]


def foliod_binary() -> str:
    path = os.environ.get("FOLIOD") or str(REPO / ".build" / "debug" / "foliod")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no foliod at {path}: build it (swift build --product foliod) or set FOLIOD", pytrace=False)
    return path


class Foliod:
    """foliod serving DIR/data on DIR/folio.sock; its log in DIR/foliod.log."""

    def __init__(self, directory: str, args: List[str]):
        self.directory = directory
        self.socket = os.path.join(directory, "folio.sock")
        self.args = args
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> None:
        log = open(os.path.join(self.directory, "foliod.log"), "ab")
        self.process = subprocess.Popen(
            [foliod_binary(), "--data", os.path.join(self.directory, "data"), "--socket", self.socket, *self.args],
            stdout=log, stderr=subprocess.STDOUT, env={k: v for k, v in os.environ.items() if k != "FOLIO_SOCKET"})
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"foliod exited with {self.process.returncode}:\n{self.log()}", pytrace=False)
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(self.socket)
                return
            except OSError:
                time.sleep(0.01)
            finally:
                probe.close()
        pytest.fail(f"foliod did not listen on {self.socket} within 20 s:\n{self.log()}", pytrace=False)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        try:
            return Path(self.directory, "foliod.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""


@pytest.fixture
def make_foliod():
    """Starts foliod with extra arguments; each in a directory of its own, removed afterwards."""
    started: List[Foliod] = []

    def make(*args: str) -> Foliod:
        # A short path of our own: a Unix socket's path may not exceed 107 bytes.
        daemon = Foliod(tempfile.mkdtemp(prefix="folio-py-"), list(args))
        started.append(daemon)
        daemon.start()
        return daemon

    yield make
    for daemon in started:
        daemon.stop()
        shutil.rmtree(daemon.directory, ignore_errors=True)


@pytest.fixture
def foliod(make_foliod) -> Foliod:
    return make_foliod()


@pytest.fixture
def client(foliod):
    with folio_client.connect(foliod.socket, timeout=30) as c:
        yield c


class Proxy:
    """A Unix-socket proxy in front of foliod. `drop_when(pred)` forwards the next request line for
    which pred(line) is true, waits for foliod's answer and closes the connection instead of passing
    it on: the request was done, its answer lost (with nothing else in flight on that connection).
    `drop_all()` closes every connection now; `pause()` stops reading foliod's answers. `requests`
    holds every request line passed on, decoded."""

    def __init__(self, target: str, directory: str):
        self.target = target
        self.path = os.path.join(directory, "proxy.sock")
        self.connections = 0
        self.requests: List[dict] = []
        self._drop_when: Optional[Callable[[bytes], bool]] = None
        self._open: List[tuple] = []
        self._swallowing: set = set()
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_when(self, predicate: Optional[Callable[[bytes], bool]]) -> None:
        self._drop_when = predicate

    def drop_all(self) -> None:
        with self._lock:
            pairs, self._open = self._open, []
        for pair in pairs:
            self._close(pair)

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._listener.close()
        self.resume()
        self.drop_all()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.target)
            pair = (downstream, upstream)
            with self._lock:
                self._open.append(pair)
                self.connections += 1
            threading.Thread(target=self._requests, args=(pair,), daemon=True).start()
            threading.Thread(target=self._answers, args=(pair,), daemon=True).start()

    @staticmethod
    def _close(pair) -> None:
        for s in pair:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _requests(self, pair) -> None:
        downstream, upstream = pair
        try:
            with downstream.makefile("rb") as lines:
                for line in lines:
                    # Decided before the line goes on: marked after, a quick answer could pass
                    # through before the mark (a create answered while this thread waited for the GIL).
                    predicate = self._drop_when
                    dropped = predicate is not None and predicate(line)
                    if dropped:
                        self._drop_when = None
                        with self._lock:
                            self._swallowing.add(pair)
                    upstream.sendall(line)
                    self.requests.append(json.loads(line))
                    if dropped:
                        return
        except (OSError, ValueError):
            pass

    def _answers(self, pair) -> None:
        downstream, upstream = pair
        try:
            while True:
                self._flowing.wait()
                data = upstream.recv(65536)
                if not data:
                    break
                with self._lock:
                    swallow = pair in self._swallowing
                if not swallow:
                    downstream.sendall(data)
                elif data.endswith(b"\n"):  # the answer of the dropped request is complete: drop it
                    with self._lock:
                        self._swallowing.discard(pair)
                        if pair in self._open:
                            self._open.remove(pair)
                    self._close(pair)
                    return
        except (OSError, ValueError):
            pass
        try:
            downstream.shutdown(socket.SHUT_WR)
        except OSError:
            pass


@pytest.fixture
def proxy(foliod):
    p = Proxy(foliod.socket, foliod.directory)
    yield p
    p.close()
