"""Live queries (notes/live-queries.md). `apply_change` is checked here without a daemon; the tests
marked `live` need a foliod that serves live queries (`pytest -m live`)."""

import asyncio
import json
import os
import random
import socket
import threading
import time

import pytest

import folio_client
from folio_client import aio, apply_change
from folio_client.streams import LiveWindowMismatch

from conftest import Proxy


def obj(id, version=1):
    return {"id": id, "version": version}


def change_between(old, new, seq=1, total=None):
    """A change as the server may send it: removed, inserted, the common items off a longest increasing
    subsequence moved, and every common item whose version changed updated."""
    old_index = {o["id"]: i for i, o in enumerate(old)}
    new_index = {o["id"]: i for i, o in enumerate(new)}
    common = [o["id"] for o in new if o["id"] in old_index]  # in new order
    # Longest increasing subsequence of their old indices: those stay; the rest move.
    tails, previous = [], {}
    for id in common:
        lo, hi = 0, len(tails)
        while lo < hi:
            mid = (lo + hi) // 2
            if old_index[tails[mid]] < old_index[id]:
                lo = mid + 1
            else:
                hi = mid
        previous[id] = tails[lo - 1] if lo else None
        tails[lo:lo + 1] = [id]
    stay, id = set(), tails[-1] if tails else None
    while id is not None:
        stay.add(id)
        id = previous[id]
    return {
        "seq": seq,
        "removed": [{"index": old_index[o["id"]], "id": o["id"]} for o in old if o["id"] not in new_index],
        "inserted": [{"index": new_index[o["id"]], "object": o} for o in new if o["id"] not in old_index],
        "moved": [{"from": old_index[id], "to": new_index[id], "id": id} for id in common if id not in stay],
        "updated": [{"index": new_index[o["id"]], "object": o} for o in new
                    if o["id"] in old_index and old[old_index[o["id"]]]["version"] != o["version"]],
        "total": len(new) if total is None else total,
    }


def test_apply_change_follows_the_spec_order():
    old = [obj("a"), obj("b"), obj("c"), obj("d"), obj("e")]
    change = {"seq": 9, "removed": [{"index": 1, "id": "b"}, {"index": 3, "id": "d"}],
              "inserted": [{"index": 0, "object": obj("x")}, {"index": 4, "object": obj("y")}],
              "moved": [{"from": 4, "to": 1, "id": "e"}], "updated": [{"index": 3, "object": obj("c", 2)}],
              "total": 40}
    assert apply_change(old, change) == [obj("x"), obj("e"), obj("a"), obj("c", 2), obj("y")]
    assert old == [obj("a"), obj("b"), obj("c"), obj("d"), obj("e")]  # the old window is left alone
    with pytest.raises(LiveWindowMismatch):
        apply_change(old, {"removed": [], "inserted": [], "updated": [], "moved": [{"from": 0, "to": 1, "id": "z"}]})
    with pytest.raises(LiveWindowMismatch):
        apply_change(old, {"removed": [{"index": 5, "id": "f"}], "inserted": [], "updated": [], "moved": []})


def test_apply_change_against_random_windows():
    rng = random.Random(7)
    for _ in range(2000):
        pool = [obj(f"o{i}", rng.randint(1, 2)) for i in range(12)]
        old = rng.sample(pool, rng.randint(0, 8))
        new = [dict(o, version=o["version"] + rng.randint(0, 1)) for o in rng.sample(pool, rng.randint(0, 8))]
        assert apply_change(old, change_between(old, new)) == new


class ScriptedServer:
    """A stand-in for foliod that answers as a test script says, to check what the client sends when a
    live query resumes, resets or finds a change that does not fit, before foliod serves live queries."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "scripted.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(8)
        self.listener.settimeout(10)
        self.conn = None

    def accept(self):
        if self.conn is not None:
            self.conn.close()
        self.conn, _ = self.listener.accept()
        self.lines = self.conn.makefile("rb")

    def expect(self, **fields):
        request = json.loads(self.lines.readline())
        for key, value in fields.items():
            assert request.get(key) == value, (key, request)
        return request

    def send(self, *messages):
        self.conn.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    def drop(self):
        self.conn.shutdown(socket.SHUT_RDWR)

    def close(self):
        for s in (self.conn, self.listener):
            if s is not None:
                s.close()


def test_live_driver_resumes_resets_and_restarts_fresh(tmp_path):
    server = ScriptedServer(str(tmp_path))
    query = {"collection": "Task", "where": {"done": False}, "sort": ["n"], "limit": 3}

    def script():
        server.accept()
        start = server.expect(op="watch", query=query)
        assert "resumeAfter" not in start
        tag = start["tag"]
        server.send({"tag": tag, "ok": True, "result": {"watching": True, "seq": 5, "items": [obj("a"), obj("b")],
                                                           "total": 2}},
                    {"tag": tag, "change": change_between([obj("a"), obj("b")], [obj("c"), obj("a"), obj("b")], 6)})
        server.drop()  # the connection goes: the client resumes after seq 6 on a new one
        server.accept()
        resume = server.expect(op="watch", query=query, resumeAfter=6)
        server.send({"tag": resume["tag"], "ok": True, "result": {
            "watching": True, "seq": 8, "resumed": True,
            "change": change_between([obj("c"), obj("a"), obj("b")], [obj("a"), obj("c", 2)], 8)}})
        server.send({"tag": resume["tag"], "ok": False, "error": {"code": "lagging", "message": "behind",
                                                                   "lastSeq": 8}})
        again = server.expect(op="watch", query=query, resumeAfter=8)
        server.send({"tag": again["tag"], "ok": True, "result": {"watching": True, "seq": 200000, "reset": True,
                                                                  "items": [obj("z")], "total": 1}},
                    {"tag": again["tag"], "change": {"seq": 200001, "removed": [{"index": 4, "id": "q"}],
                                                     "inserted": [], "moved": [], "updated": [], "total": 0}})
        server.expect(op="unwatch", watch=again["tag"])  # the change did not fit: that stream is abandoned
        fresh = server.expect(op="watch", query=query)
        assert "resumeAfter" not in fresh
        server.send({"tag": fresh["tag"], "ok": True, "result": {"watching": True, "seq": 200002,
                                                                  "items": [obj("y")], "total": 1}})
        final = server.expect(op="unwatch", watch=fresh["tag"])
        server.send({"tag": final["tag"], "ok": True, "result": {"watch": fresh["tag"], "lastSeq": 200002}})

    thread = threading.Thread(target=script, daemon=True)
    thread.start()
    try:
        with folio_client.connect(server.path, timeout=10) as c:
            live = c.live("Task", where={"done": False}, sort="n", limit=3)
            updates = [live.get(timeout=10) for _ in range(5)]
            assert [(u.kind, u.seq, [o["id"] for o in u.items]) for u in updates] == [
                ("snapshot", 5, ["a", "b"]),
                ("change", 6, ["c", "a", "b"]),
                ("change", 8, ["a", "c"]),
                ("snapshot", 200000, ["z"]),
                ("snapshot", 200002, ["y"]),
            ]
            assert updates[2].items[1]["version"] == 2 and live.total == 1
            live.close()
        thread.join(10)
        assert not thread.is_alive()
    finally:
        server.close()


# --- against foliod ---

QUERY = dict(where={"done": False}, sort=["n", "-title"], limit=10)


def random_writes(socket_path, seed, steps):
    rng = random.Random(seed)
    with folio_client.connect(socket_path) as c:
        for step in range(steps):
            id = f"t{rng.randint(0, 59)}"
            choice = rng.random()
            try:
                if choice < 0.4:
                    c.create("Task", {"n": rng.randint(0, 30), "done": rng.random() < 0.3, "title": f"s{seed}-{step}"},
                             id=id)
                elif choice < 0.8:
                    c.update("Task", id, {"n": rng.randint(0, 30), "done": rng.random() < 0.3})
                else:
                    c.delete("Task", id)
            except (folio_client.NotFound, folio_client.Conflict):
                pass


def seed_tasks(c):
    c.batch([folio_client.create_op("Task", {"n": i % 30, "done": i % 4 == 0, "title": f"seed{i}"}, id=f"t{i}")
             for i in range(40)])


def wait_for_marker(live, marker_id, timeout=30):
    """Takes updates until the marker object (n = -1, first in the window) is in it."""
    deadline = time.monotonic() + timeout
    while not any(o["id"] == marker_id for o in live.items):
        live.get(timeout=max(0.1, deadline - time.monotonic()))


def assert_window_is_list(live, c, **query):
    page = c.list("Task", **query) if "view" not in query else c.list(**query)
    assert live.items == page.items
    assert live.total == page.total


@pytest.mark.live
def test_live_window_equals_list_after_concurrent_writes(foliod, client):
    seed_tasks(client)
    with client.live("Task", **QUERY) as live:
        first = next(live)
        assert first.kind == "snapshot" and first.items == client.list("Task", **QUERY).items
        writers = [threading.Thread(target=random_writes, args=(foliod.socket, seed, 150)) for seed in range(3)]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        client.create("Task", {"n": -1, "done": False, "title": "marker"}, id="marker")
        wait_for_marker(live, "marker")
        assert_window_is_list(live, client, **QUERY)
        assert live.seq <= client.hello()["lastSeq"]


@pytest.mark.live
def test_live_resumes_after_a_lost_connection(foliod, proxy, client):
    seed_tasks(client)
    with folio_client.connect(proxy.path, timeout=30) as c, c.live("Task", **QUERY) as live:
        assert next(live).kind == "snapshot"
        kinds = []
        proxy.drop_all()
        random_writes(foliod.socket, 1, 120)
        client.create("Task", {"n": -1, "done": False, "title": "marker"}, id="marker")
        deadline = time.monotonic() + 30
        while not any(o["id"] == "marker" for o in live.items):
            kinds.append(live.get(timeout=max(0.1, deadline - time.monotonic())).kind)
        assert proxy.connections == 2
        assert "snapshot" not in kinds  # resumed with resumeAfter, not started afresh
        assert_window_is_list(live, client, **QUERY)


@pytest.mark.live
def test_live_query_of_a_view_resumes_after_lagging(make_foliod):
    daemon = make_foliod("--watch-buffer", "1024")
    proxy = Proxy(daemon.socket, daemon.directory)
    try:
        with folio_client.connect(daemon.socket) as writer, folio_client.connect(proxy.path, timeout=30) as c:
            writer.view.define("open", "Task", where={"done": False}, sort=["n"])
            writer.batch([folio_client.create_op("Task", {"n": i, "done": False}, id=f"t{i}") for i in range(10)])
            live = c.live(view="open", limit=5)
            assert next(live).kind == "snapshot"
            proxy.pause()  # foliod's change lines pile up: each holds an object of 20 kB, 2 MB in all
            for i in range(100):
                writer.update("Task", f"t{i % 5}", {"note": "y" * 20000, "k": i})
            proxy.resume()
            writer.create("Task", {"n": -1, "done": False}, id="marker")
            wait_for_marker(live, "marker")
            page = writer.list(view="open", limit=5)
            assert live.items == page.items and live.total == page.total == 11
            watches = [r for r in proxy.requests if r["op"] == "watch"]
            assert len(watches) >= 2 and watches[1]["resumeAfter"] > 0  # it lagged, then resumed
            live.close()
    finally:
        proxy.close()


@pytest.mark.live
def test_live_query_with_asyncio(foliod):
    async def main():
        c = await aio.connect(foliod.socket, timeout=30)
        try:
            await c.batch([folio_client.create_op("Task", {"n": i, "done": False}, id=f"t{i}") for i in range(20)])
            async with c.live("Task", where={"done": False}, sort=["-n"], limit=5) as live:
                assert [o["n"] for o in live.items] == [19, 18, 17, 16, 15]
                assert (await live.get(timeout=30)).kind == "snapshot"  # the first page comes first
                await c.update("Task", "t3", {"n": 100})
                await c.delete("Task", "t19")
                while live.items[0]["id"] != "t3" or any(o["id"] == "t19" for o in live.items):
                    update = await live.get(timeout=30)
                    assert update.kind == "change"
                assert [o["n"] for o in live.items] == [100, 18, 17, 16, 15] and live.total == 19
        finally:
            await c.close()
    asyncio.run(main())
