"""The asyncio client against the real foliod."""

import asyncio
import time
from datetime import datetime, timezone

import pytest

import folio_client
from folio_client import BadRequest, Conflict, NotFound, Ref, Result, create_op, update_op
from folio_client import aio


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def test_crud_typed_values_and_errors(foliod):
    async def main():
        async with aio.AsyncClient(foliod.socket) as c:
            due = datetime(2026, 12, 1, 9, tzinfo=timezone.utc)
            task = await c.create("Task", {"title": "a", "due": due, "owner": Ref("User", "ann")}, id="t1")
            assert task["due"] == due and task["owner"] == Ref("User", "ann")
            assert (await c.get("Task", "t1"))["version"] == 1
            assert (await c.update("Task", "t1", {"title": "b"}, if_version=1))["version"] == 2
            with pytest.raises(Conflict) as stale:
                await c.update("Task", "t1", {"title": "c"}, if_version=1)
            assert stale.value.current_version == 2
            await c.delete("Task", "t1")
            with pytest.raises(NotFound):
                await c.get("Task", "t1")
            batch = await c.batch([create_op("Cat", {"items": []}, id="c"),
                                   update_op("Cat", "c", ops={"items": {"$push": [Result(0)]}})])
            assert batch[1]["items"] == [Ref("Cat", "c")]
            assert await c.count("Task") == 0
            assert [v["name"] for v in await c.view.list()] == []
    run(main())


def test_a_request_foliod_cannot_read_fails_instead_of_waiting(foliod):
    async def main():
        async with aio.AsyncClient(foliod.socket) as c:
            with pytest.raises(BadRequest, match="out of range"):
                await asyncio.wait_for(c.create("Task", {"n": 10**400}), 10)
            assert (await c.create("Task", {"n": 1}, id="after"))["id"] == "after"
    run(main())


def test_gathered_requests_are_pipelined_and_matched(foliod):
    async def main():
        c = await aio.connect(foliod.socket, timeout=30)
        try:
            created = await asyncio.gather(*(c.create("Note", {"i": i}, id=f"n{i:03d}") for i in range(300)))
            assert [o["i"] for o in created] == list(range(300))
            fetched = await asyncio.gather(*(c.get("Note", f"n{i:03d}") for i in reversed(range(300))))
            assert [o["i"] for o in fetched] == list(reversed(range(300)))
            async with c.pipeline() as p:
                total = p.count("Note")
                missing = p.get("Note", "nope")
            assert total.result() == 300 and isinstance(missing.exception(), NotFound)
            assert [o["i"] async for o in c.iter_list("Note", sort=["-i"], limit=64)] == list(range(299, -1, -1))
            assert len([e async for e in c.iter_events(limit=128)]) == 300
            assert await c.file_put("a.txt", b"x" * 700_000) and await c.file_read("a.txt") == b"x" * 700_000
        finally:
            await c.close()
    run(main())


def test_watch_under_concurrent_writes(foliod):
    async def main():
        c = await aio.connect(foliod.socket, timeout=30)
        writer = await aio.connect(foliod.socket)
        try:
            async with c.watch(collection="Note") as watch:
                async def write(k):
                    for i in range(20):
                        await writer.create("Note", {"k": k, "i": i})
                await asyncio.gather(*(write(k) for k in range(5)))
                events = []
                async for event in watch:
                    events.append(event)
                    if len(events) == 100:
                        break
            assert sorted((e["data"]["k"], e["data"]["i"]) for e in events) == [(k, i) for k in range(5)
                                                                               for i in range(20)]
            assert [e["seq"] for e in events] == list(range(1, 101))
            with pytest.raises(StopAsyncIteration):
                await watch.get(timeout=1)
        finally:
            await c.close()
            await writer.close()
    run(main())


def test_lost_write_is_replayed(proxy):
    async def main():
        c = await aio.connect(proxy.path, timeout=30)
        try:
            proxy.drop_when(lambda line: b'"op":"create"' in line)
            created = await c.create("Task", {"title": "once"}, id="t1")
            assert created["replayed"] is True
            assert await c.count("Task") == 1
            with pytest.raises(folio_client.ConnectionLost):
                watch = await c.watch()
                proxy.drop_all()
                await watch.get(timeout=10)
        finally:
            await c.close()
    run(main())


def restart_later(foliod):
    time.sleep(0.5)
    foliod.start()


def test_a_request_made_while_foliod_is_down_waits_for_it_to_come_back(foliod):
    """As the blocking client's test: after a loss, a new request waits for foliod's restart."""
    async def main():
        async with aio.AsyncClient(foliod.socket, reconnect_timeout=30) as c:
            await c.create("Task", {"n": 1}, id="before")
            foliod.process.kill()
            foliod.process.wait()
            for _ in range(1000):  # the reading task sees the end of the socket
                if not c._conn.alive:
                    break
                await asyncio.sleep(0.01)
            assert not c._conn.alive
            restart = asyncio.get_running_loop().run_in_executor(None, restart_later, foliod)
            assert (await c.create("Task", {"n": 2}, id="after"))["version"] == 1
            assert (await c.get("Task", "before"))["n"] == 1
            await restart
    run(main())
