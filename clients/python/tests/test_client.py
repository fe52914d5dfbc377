"""The blocking client against the real foliod."""

import functools
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

import folio_client
from folio_client import (BadRequest, CannotConnect, Conflict, ConnectionLost, FileRef, NotFound, Ref, Result,
                          UnknownOp, create_op, delete_op, update_op)
from folio_client.operations import Call


def test_crud(client):
    task = client.create("Task", {"title": "Buy milk", "done": False, "n": 3}, id="t1")
    assert (task["collection"], task["id"], task["version"], task["title"]) == ("Task", "t1", 1, "Buy milk")
    assert client.get("Task", "t1") == task
    updated = client.update("Task", "t1", {"done": True}, if_version=1)
    assert (updated["version"], updated["done"], updated["n"]) == (2, True, 3)
    bumped = client.update("Task", "t1", ops={"n": {"$inc": 2}, "tags": {"$push": ["a"]}})
    assert (bumped["n"], bumped["tags"]) == (5, ["a"])
    assert client.delete("Task", "t1") == {"id": "t1", "version": 4}
    with pytest.raises(NotFound):
        client.get("Task", "t1")
    assert client.get("Task", "t1", at_seq=2)["done"] is True
    generated = client.create("Task", {"title": "no id"})
    assert len(generated["id"]) == 26


def test_typed_values_round_trip(client):
    due = datetime(2026, 12, 1, 9, 30, 15, 123456, timezone(timedelta(hours=1)))
    data = {"due": due, "owner": Ref("User", "ann"), "photo": FileRef("photos/a.jpg"),
            "nested": {"when": [due, {"ref": Ref("User", "bob")}]}}
    created = client.create("Task", data, id="t1")
    fetched = client.get("Task", "t1")
    for obj in (created, fetched):
        assert obj["due"] == due and obj["due"].utcoffset() == timedelta(hours=1)
        assert obj["owner"] == Ref("User", "ann") and isinstance(obj["owner"], Ref)
        assert obj["photo"] == FileRef("photos/a.jpg")
        assert obj["nested"] == {"when": [due, {"ref": Ref("User", "bob")}]}
    # Typed values in where clauses and patches.
    assert client.count("Task", where={"due": {"$gt": due - timedelta(microseconds=1)}}) == 1
    assert client.count("Task", where={"due": due.astimezone(timezone.utc)}) == 1  # the same instant
    assert client.count("Task", where={"owner": Ref("User", "ann")}) == 1
    later = datetime(2027, 1, 1, tzinfo=timezone.utc)
    assert client.update("Task", "t1", {"due": later})["due"] == later
    assert client.get("Task", "t1", as_of=created["createdAt"])["due"] == due
    # Dates with more digits than Python keeps come back truncated to microseconds.
    client.batch([create_op("Task", {"d": {"$date": "2026-12-01T09:00:00.987654321Z"}}, id="t2")])
    assert client.get("Task", "t2")["d"] == datetime(2026, 12, 1, 9, 0, 0, 987654, timezone.utc)
    with pytest.raises(ValueError, match="naive"):
        client.create("Task", {"due": datetime(2026, 1, 1)})


def test_errors_carry_their_codes_and_details(client):
    client.create("Task", {"n": 1}, id="t1")
    client.update("Task", "t1", {"n": 2})
    with pytest.raises(Conflict) as stale:
        client.update("Task", "t1", {"n": 3}, if_version=1)
    assert (stale.value.code, stale.value.expected_version, stale.value.current_version) == ("conflict", 1, 2)
    with pytest.raises(Conflict) as exists:
        client.create("Task", {"n": 1}, id="t1")
    assert exists.value.current_version is None and "already exists" in exists.value.message
    with pytest.raises(BadRequest, match="reserved"):
        client.create("Task", {"_x": 1})
    with pytest.raises(BadRequest, match="out of range"):
        client.list("Task", limit=1001)
    with pytest.raises(NotFound):
        client.list(view="nope")
    with pytest.raises(UnknownOp):
        client._call(Call("frobnicate", {}))
    client.view.define("byN", "Task", sort=["n"], unique=True)
    with pytest.raises(Conflict) as unique:
        client.create("Task", {"n": 2})
    assert (unique.value.view, unique.value.key, unique.value.existing_id) == ("byN", [2], "t1")
    with pytest.raises(Conflict) as reused:
        client.create("Task", {"n": 7}, request_key="k1")
        client.create("Task", {"n": 8}, request_key="k1")
    assert reused.value.request_key == "k1"
    assert isinstance(reused.value, folio_client.FolioError)


def test_a_request_foliod_cannot_read_fails_instead_of_waiting(client):
    # A number beyond a double: foliod cannot read the line, so neither its tag; its answer, untagged,
    # is the oldest request's (answers come in order). It waited for good before.
    with pytest.raises(BadRequest, match="out of range"):
        client.create("Task", {"n": 10**400})
    with pytest.raises(BadRequest):
        client.create("Task", {"deep": functools.reduce(lambda inner, _: [inner], range(200), 1)})
    assert client.create("Task", {"n": 1}, id="after")["id"] == "after"


def test_a_watch_given_up_on_while_starting_is_ended(foliod):
    # A timeout too short for any answer: the watch may start on the server all the same. It is no
    # longer routed (its lines would pile up in a queue no one reads) and is ended there.
    with folio_client.connect(foliod.socket, timeout=1e-9) as hasty:
        with pytest.raises(TimeoutError):
            hasty.watch(after=0)
        conn = hasty._conn
        assert conn is not None and not conn.router._streams
        deadline = time.monotonic() + 10
        with folio_client.connect(foliod.socket, timeout=30) as other:
            while other.stats()["watches"] != 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert other.stats()["watches"] == 0


def test_cannot_connect_names_the_paths(tmp_path):
    with pytest.raises(CannotConnect, match="nothing.sock"):
        folio_client.connect(str(tmp_path / "nothing.sock"))


def test_paging_iterators_cover_every_object(client):
    for start in range(0, 260, 130):
        client.batch([create_op("Item", {"n": i}, id=f"i{i:03d}") for i in range(start, start + 130)])
    pages = list(client.pages("Item", sort=["-n"], limit=100))
    assert [len(p) for p in pages] == [100, 100, 60] and pages[0].total == 260 and pages[-1].next is None
    assert [o["n"] for o in client.iter_list("Item", sort=["-n"], limit=100)] == list(range(259, -1, -1))
    assert len(list(client.iter_list("Item", where={"n": {"$gte": 10}}, limit=7))) == 250
    client.view.define("odd", "Item", where={"n": {"$in": list(range(1, 260, 2))}}, sort=["n"])
    assert [o["n"] for o in client.iter_list(view="odd", limit=40)] == list(range(1, 260, 2))
    assert client.count(view="odd") == 130
    events = list(client.iter_events(limit=100))
    assert [e["seq"] for e in events] == list(range(1, 262))  # 260 creates and the view
    for _ in range(3):
        client.update("Item", "i000", ops={"n": {"$inc": 1}})
    assert [e["version"] for e in client.iter_history("Item", "i000", limit=2)] == [1, 2, 3, 4]


def test_batch_with_result_references(client):
    client.create("Category", {"title": "Home", "items": []}, id="home")
    result = client.batch([
        create_op("Item", {"title": "Mop"}, id="mop"),
        update_op("Category", "home", ops={"items": {"$push": [Result(0)]}}),
        create_op("Item", {"title": "Broom", "category": Ref("Category", "home")}),
        update_op("Item", Result(2), {"done": True}),
    ])
    assert not result.replayed and not result.errors
    assert result[1]["items"] == [Ref("Item", "mop")]
    assert result[3]["done"] is True and result[3]["id"] == result[2]["id"]
    assert [o["title"] for o in client.iter_links("Category/home", "items")] == ["Mop"]
    assert [o["id"] for o in client.backlinks(Ref("Category", "home"), "Item.category")] == [result[2]["id"]]
    with pytest.raises(Conflict) as failed:
        client.batch([create_op("Item", {"title": "x"}, id="x"), create_op("Item", {"title": "again"}, id="mop")])
    assert failed.value.index == 1
    with pytest.raises(NotFound):
        client.get("Item", "x")  # atomic: nothing stored
    mixed = client.batch([create_op("Item", {}, id="x"), delete_op("Item", "nope")], atomic=False)
    assert mixed[0]["id"] == "x" and isinstance(mixed[1], NotFound) and list(mixed.errors) == [1]


def test_writes_are_sent_again_with_their_key_after_a_lost_answer(proxy, foliod):
    with folio_client.connect(proxy.path, timeout=30) as c:
        proxy.drop_when(lambda line: b'"op":"create"' in line)
        created = c.create("Task", {"title": "once"}, id="t1")
        assert created["replayed"] is True and created["version"] == 1
        assert proxy.connections == 2
        proxy.drop_when(lambda line: b'"op":"batch"' in line)
        batch = c.batch([update_op("Task", "t1", ops={"n": {"$inc": 1}}), create_op("Task", {"title": "more"})])
        assert batch.replayed and batch[0]["n"] == 1
        proxy.drop_when(lambda line: b'"op":"update"' in line)
        assert c.update("Task", "t1", ops={"n": {"$inc": 1}})["n"] == 2  # applied once
        proxy.drop_when(lambda line: b'"op":"get"' in line)
        assert c.get("Task", "t1")["n"] == 2  # reads are sent again too
    with folio_client.connect(foliod.socket) as direct:
        assert direct.count("Task") == 2 and direct.get("Task", "t1")["version"] == 3


def test_without_request_keys_a_lost_write_is_not_sent_again(proxy):
    with folio_client.connect(proxy.path, timeout=30, request_keys=False) as c:
        proxy.drop_when(lambda line: b'"op":"create"' in line)
        with pytest.raises(ConnectionLost):
            c.create("Task", {"title": "maybe"}, id="t1")
        assert c.get("Task", "t1")["title"] == "maybe"  # applied; only the answer was lost
        proxy.drop_when(lambda line: b'"op":"update"' in line)
        assert c.update("Task", "t1", {"n": 1}, request_key="explicit")["replayed"] is True


def test_pipelining_matches_answers_to_requests(client):
    with client.pipeline() as p:
        writes = [p.create("Note", {"i": i}, id=f"n{i}") for i in range(300)]
        reads = [p.get("Note", f"n{i}") for i in range(300)]
        missing = p.get("Note", "nope")
        count = p.count("Note")
    assert [w.result()["i"] for w in writes] == list(range(300))
    assert [r.result()["id"] for r in reads] == [f"n{i}" for i in range(300)]
    assert isinstance(missing.exception(), NotFound)
    assert count.result() == 300
    p2 = client.pipeline()
    p2.count("Note")
    p2.get("Note", "nope")
    with pytest.raises(NotFound):
        p2.execute()

    # Many threads on one client: their requests share the connection, each gets its own answer.
    results, failures = {}, []

    def work(k):
        try:
            for i in range(40):
                results[(k, i)] = client.update("Note", f"n{k}", {"by": k, "i": i})["i"]
        except Exception as error:  # pragma: no cover - reported below
            failures.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures and all(results[(k, i)] == i for k in range(8) for i in range(40))


def test_watch_sees_every_event_of_concurrent_writers(client, foliod):
    client.create("Note", {"before": True})
    with client.watch(collection="Note") as watch:
        def writer(k):
            with folio_client.connect(foliod.socket) as c:
                for i in range(25):
                    c.create("Note", {"k": k, "i": i})
                    c.create("Other", {"k": k})

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        events = [watch.get(timeout=30) for _ in range(100)]
        for t in threads:
            t.join()
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == 100
    assert all(e["collection"] == "Note" and e["type"] == "created" for e in events)
    assert sorted((e["data"]["k"], e["data"]["i"]) for e in events) == [(k, i) for k in range(4) for i in range(25)]
    assert watch.last_seq >= seqs[-1]  # unwatch reports the events it skipped (Other) too
    with pytest.raises(StopIteration):
        watch.get(timeout=1)

    catch_up = client.watch(after=0)
    assert [next(catch_up)["seq"] for _ in range(3)] == [1, 2, 3]
    catch_up.close()


def test_watch_resumes_after_a_lost_connection(proxy, foliod):
    with folio_client.connect(proxy.path, timeout=30) as c, folio_client.connect(foliod.socket) as writer:
        watch = c.watch(after=0, resume=True)
        writer.create("Note", {"i": 0})
        assert watch.get(timeout=10)["seq"] == 1
        proxy.drop_all()
        for i in range(1, 5):
            writer.create("Note", {"i": i})
        assert [watch.get(timeout=10)["seq"] for _ in range(4)] == [2, 3, 4, 5]
        assert proxy.connections == 2
        watch.close()
        plain = c.watch()
        proxy.drop_all()
        with pytest.raises(ConnectionLost):
            plain.get(timeout=10)


def test_lagging_ends_a_watch_with_last_seq_or_resumes_it(make_foliod):
    daemon = make_foliod("--watch-buffer", "1024")
    proxy = Proxy(daemon.socket, daemon.directory)
    try:
        with folio_client.connect(proxy.path, timeout=30) as c, folio_client.connect(daemon.socket) as writer:
            strict = c.watch(after=0)
            resuming = c.watch(after=0, resume=True)
            proxy.pause()  # neither watch's lines get through: foliod's output piles up
            for b in range(4):
                writer.batch([create_op("Note", {"text": "x" * 200, "b": b, "i": i}) for i in range(1000)])
            proxy.resume()
            seen = []
            with pytest.raises(folio_client.Lagging) as lagging:
                for event in strict:
                    seen.append(event["seq"])
            assert lagging.value.last_seq == seen[-1] and seen == list(range(1, len(seen) + 1))
            assert len(seen) < 4000
            assert [resuming.get(timeout=30)["seq"] for _ in range(4000)] == list(range(1, 4001))
    finally:
        proxy.close()


def test_files_inline_and_in_pieces(client, tmp_path):
    small = client.file_put("docs/hello.txt", b"hello", content_type="text/plain")
    assert (small["size"], small["contentType"]) == (5, "text/plain")
    assert client.file_read("docs/hello.txt") == b"hello"
    big = bytes(range(256)) * 5000  # 1.28 MB: three pieces
    path = tmp_path / "big.bin"
    path.write_bytes(big)
    meta = client.file_put("docs/big.bin", path=str(path))
    assert meta["size"] == len(big)
    assert client.file_read("docs/big.bin") == big
    assert [f["name"] for f in client.iter_files(prefix="docs/", limit=1)] == ["docs/big.bin", "docs/hello.txt"]
    client.create("Report", {"file": FileRef("docs/hello.txt")}, id="r1")
    with pytest.raises(Conflict) as referred:
        client.file_delete("docs/hello.txt")
    assert referred.value.referrers
    assert client.get("Report", "r1", include=["file"])["file"]["size"] == 5


def test_hello_stats_views_schemas(client):
    assert client.hello()["protocol"] == 1
    client.schema.define("Item", {"title": {"type": "string", "required": True}})
    assert client.schema.get("Item")["fields"]["title"]["required"] is True
    assert [s["collection"] for s in client.schema.list()] == ["Item"]
    with pytest.raises(BadRequest, match="required"):
        client.create("Item", {})
    client.schema.drop("Item")
    client.view.define("v", "Item", sort="title")
    assert [v["name"] for v in client.view.list()] == ["v"]
    assert client.view.drop("v")["dropped"] is True
    assert client.stats()["lastSeq"] == 4
    assert "folio_requests_total" in client.metrics()


from conftest import Proxy  # noqa: E402  (the lagging test builds its own proxy)


def test_a_line_over_max_line_is_refused_before_it_closes_the_connection(make_foliod):
    daemon = make_foliod("--max-line", "1024")
    with folio_client.connect(daemon.socket, timeout=30) as c:
        watch = c.watch()
        c.create("Note", {"text": "x" * 900})  # a line just under the limit goes
        with pytest.raises(folio_client.TooLarge) as refused:
            c.create("Note", {"text": "x" * 2000})
        assert refused.value.details["maxLine"] == 1024
        assert watch.get(timeout=10)["data"]["text"] == "x" * 900
        c.create("Note", {"text": "after"})
        assert watch.get(timeout=10)["data"]["text"] == "after"  # the same watch, the same connection
        assert c.count("Note") == 2


def test_a_request_made_while_foliod_is_down_waits_for_it_to_come_back(foliod):
    """The connection was lost (foliod killed) before the request was made: a write and a read made
    then wait for foliod to come back, for up to `reconnect_timeout` from the loss, instead of
    failing with `CannotConnect` (as they did when a writer thread made its next request between the
    kill and the restart)."""

    client = folio_client.connect(foliod.socket, timeout=30, reconnect_timeout=30)
    client.create("Task", {"n": 1}, id="before")
    foliod.process.kill()
    foliod.process.wait()
    deadline = time.monotonic() + 10
    while client._conn.alive and time.monotonic() < deadline:  # the reader sees the end of the socket
        time.sleep(0.01)
    assert not client._conn.alive
    restarter = threading.Timer(0.5, foliod.start)
    restarter.start()
    try:
        assert client.create("Task", {"n": 2}, id="after")["version"] == 1
        assert client.get("Task", "before")["n"] == 1
    finally:
        restarter.join()
    client.close()

    short = folio_client.connect(foliod.socket, reconnect_timeout=0.3)
    foliod.process.kill()
    foliod.process.wait()
    started = time.monotonic()
    with pytest.raises(folio_client.CannotConnect):
        short.get("Task", "before")
    assert time.monotonic() - started < 5, "gave up after reconnect_timeout, not later"
    short.close()
    foliod.start()


def test_writes_in_flight_across_a_kill_are_applied_once(foliod):
    """foliod killed (SIGKILL) and started again with writes in flight on one shared connection:
    each write is sent again with its request key, waiting for foliod to come back, and applied once.
    (A killed foliod may also accept a new connection on its way out and drop it: the client keeps
    sending for `reconnect_timeout`, not once.)"""

    client = folio_client.connect(foliod.socket, timeout=30, reconnect_timeout=30)
    answered = []
    errors = []

    def write(worker):
        try:
            for i in range(200):
                client.create("Task", {"worker": worker, "i": i}, id=f"w{worker}-{i}")
                answered.append(1)
        except Exception as error:  # the test fails below, naming it
            errors.append(error)

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    while len(answered) < 50:
        time.sleep(0.001)
    foliod.process.kill()
    foliod.process.wait()
    before = len(answered)
    foliod.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert before < 1600, "the kill came with writes in flight"
    assert client.count("Task") == 1600
    client.close()
