"""What reads and batches return, beyond plain objects (dicts)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Union

from .errors import FolioError, error_from_wire

__all__ = ["Page", "EventPage", "BatchResult"]


class Page:
    """One page of `list`, `links`, `backlinks` or `file.list`: `items`, the cursor `next` (None on the
    last page), `total` (all matches, not only this page), and `plan` when `explain` was asked."""

    __slots__ = ("items", "next", "total", "plan", "include_truncated")

    def __init__(self, result: Dict[str, Any]):
        self.items: List[dict] = result.get("items", [])
        self.next: Optional[str] = result.get("next")
        self.total: Optional[int] = result.get("total")
        self.plan: Optional[dict] = result.get("plan")
        self.include_truncated: bool = result.get("includeTruncated", False)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict:
        return self.items[index]

    @property
    def has_more(self) -> bool:
        return self.next is not None

    def __repr__(self) -> str:
        return f"Page({len(self.items)} items, total={self.total}, next={self.next!r})"


class EventPage:
    """One page of `history` or `events`: `events` (§7 wire form), `next` (the `after` of the next page,
    None when there is none), and for `events` the log's `last_seq` at the time of the read."""

    __slots__ = ("events", "next", "last_seq")

    def __init__(self, result: Dict[str, Any]):
        self.events: List[dict] = result.get("events", [])
        self.next: Optional[int] = result.get("next")
        self.last_seq: Optional[int] = result.get("lastSeq")

    def __iter__(self) -> Iterator[dict]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    @property
    def has_more(self) -> bool:
        if self.last_seq is None:  # history
            return self.next is not None
        return self.next is not None and self.next < self.last_seq

    def __repr__(self) -> str:
        return f"EventPage({len(self.events)} events, next={self.next!r}, last_seq={self.last_seq!r})"


class BatchResult:
    """The answer of a batch: `results[i]` is what op i wrote (an object, or `{id, version}` for a
    delete), or, in a batch that is not atomic, the `FolioError` it failed with (not raised).
    `replayed` is true when foliod answered a request key it had seen (§5.19)."""

    __slots__ = ("results", "replayed")

    def __init__(self, result: Dict[str, Any]):
        self.results: List[Union[dict, FolioError]] = [
            entry["result"] if entry.get("ok") else error_from_wire(entry["error"]) for entry in result["results"]
        ]
        self.replayed: bool = result.get("replayed", False)

    @property
    def errors(self) -> Dict[int, FolioError]:
        return {i: r for i, r in enumerate(self.results) if isinstance(r, FolioError)}

    def __iter__(self):
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int):
        return self.results[index]

    def __repr__(self) -> str:
        return f"BatchResult({self.results!r}, replayed={self.replayed})"
