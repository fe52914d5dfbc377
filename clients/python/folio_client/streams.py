"""What a watch and a live query do with their lines, apart from any I/O: the state of the stream, the
request that (re)starts it, and what each answer and line turns into. The blocking and the asyncio
clients drive these the same way (`Client.watch`, `Client.live`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .errors import ConnectionLost, FolioError, Lagging

__all__ = ["LiveUpdate", "LiveWindowMismatch", "apply_change"]


class LiveWindowMismatch(FolioError):
    """A change line did not fit the window it was applied to; the live query restarts fresh."""

    code = "live_window_mismatch"

    def __init__(self, message: str):
        super().__init__(self.code, message)


def apply_change(window: List[dict], change: Dict[str, Any]) -> List[dict]:
    """The window after `change`, as live-queries.md says: removals (and `moved.from`) from the highest
    index down, insertions (and `moved.to`) from the lowest up, then updates. Returns a new list."""
    new = list(window)
    taking = [(r["index"], None) for r in change.get("removed", ())]
    taking += [(m["from"], m["id"]) for m in change.get("moved", ())]
    taken: Dict[str, dict] = {}
    for index, moved_id in sorted(taking, key=lambda entry: entry[0], reverse=True):
        if not 0 <= index < len(new):
            raise LiveWindowMismatch(f"change {change.get('seq')}: index {index} is outside a window of {len(new)}")
        item = new.pop(index)
        if moved_id is not None:
            if item.get("id") != moved_id:
                raise LiveWindowMismatch(f"change {change.get('seq')}: index {index} holds {item.get('id')!r}, "
                                         f"not the moved {moved_id!r}")
            taken[moved_id] = item
    putting = [(i["index"], i["object"]) for i in change.get("inserted", ())]
    putting += [(m["to"], taken[m["id"]]) for m in change.get("moved", ())]
    for index, item in sorted(putting, key=lambda entry: entry[0]):
        if not 0 <= index <= len(new):
            raise LiveWindowMismatch(f"change {change.get('seq')}: insertion at {index} into a window of {len(new)}")
        new.insert(index, item)
    for u in change.get("updated", ()):
        if not 0 <= u["index"] < len(new):
            raise LiveWindowMismatch(f"change {change.get('seq')}: update at {u['index']} in a window of {len(new)}")
        new[u["index"]] = u["object"]
    return new


class LiveUpdate:
    """What a live query yields: `kind` is `"snapshot"` (a whole window: the first one, or after a
    `reset` or a fresh restart) or `"change"` (`change` turned the previous window into `items`)."""

    __slots__ = ("kind", "items", "total", "seq", "change")

    def __init__(self, kind: str, items: List[dict], total: Optional[int], seq: int,
                 change: Optional[Dict[str, Any]] = None):
        self.kind = kind
        self.items = items
        self.total = total
        self.seq = seq
        self.change = change

    def __repr__(self) -> str:
        return f"LiveUpdate({self.kind!r}, seq={self.seq}, total={self.total}, {len(self.items)} items)"


class WatchState:
    """A watch of the log (§5.14): yields events; on `lagging` or a lost connection, with `resume`,
    starts again after the last event delivered."""

    def __init__(self, after: Optional[int], collection: Optional[str], resume: bool):
        self.last_seq = after
        self.collection = collection
        self.resume = resume

    def request(self) -> Dict[str, Any]:
        return {"op": "watch", "after": self.last_seq, "collection": self.collection}

    def started(self, result: Dict[str, Any]) -> List[Any]:
        if self.last_seq is None:
            self.last_seq = result.get("after")
        return []

    def line(self, message: Dict[str, Any]) -> List[Any]:
        event = message.get("event")
        if event is None:
            return []
        self.last_seq = event["seq"]
        return [event]

    def restartable(self, error: FolioError) -> bool:
        if isinstance(error, Lagging) and error.last_seq is not None:
            self.last_seq = max(self.last_seq or 0, error.last_seq)
        return self.resume and isinstance(error, (Lagging, ConnectionLost))

    def ended(self, result: Dict[str, Any]) -> None:
        if result.get("lastSeq") is not None:
            self.last_seq = result["lastSeq"]


class LiveState:
    """A live query (notes/live-queries.md): keeps the window `items`, `total` and `seq`; resumes after
    `seq` on `lagging` or a lost connection, and starts fresh when a change does not fit."""

    def __init__(self, query: Dict[str, Any], resume: bool):
        self.query = {k: v for k, v in query.items() if v is not None}
        self.resume = resume
        self.items: List[dict] = []
        self.total: Optional[int] = None
        self.seq: Optional[int] = None

    def request(self) -> Dict[str, Any]:
        return {"op": "watch", "query": self.query, "resumeAfter": self.seq}

    def started(self, result: Dict[str, Any]) -> List[LiveUpdate]:
        self.seq = result["seq"]
        if "items" in result:
            self.items = result["items"]
            self.total = result.get("total")
            return [LiveUpdate("snapshot", self.items, self.total, self.seq)]
        change = result.get("change")
        if change is None:
            return []
        return [self._apply(change)]

    def line(self, message: Dict[str, Any]) -> List[LiveUpdate]:
        change = message.get("change")
        if change is None:
            return []
        return [self._apply(change)]

    def _apply(self, change: Dict[str, Any]) -> LiveUpdate:
        self.items = apply_change(self.items, change)
        self.total = change.get("total", self.total)
        self.seq = change.get("seq", self.seq)
        return LiveUpdate("change", self.items, self.total, self.seq, change)

    def restartable(self, error: FolioError) -> bool:
        if isinstance(error, LiveWindowMismatch):
            self.seq = None  # the window is wrong: ask for a fresh one
            return True
        return self.resume and isinstance(error, (Lagging, ConnectionLost))

    def ended(self, result: Dict[str, Any]) -> None:
        pass
