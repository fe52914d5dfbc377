"""folio_client: a Python client of foliod, blocking (`connect`) and asyncio (`folio_client.aio.connect`).

    import folio_client
    with folio_client.connect() as folio:
        task = folio.create("Task", {"title": "Buy milk", "due": datetime(2026, 12, 1, tzinfo=timezone.utc)})
        for t in folio.iter_list("Task", where={"done": False}, sort=["title"]):
            print(t["id"], t["title"])
"""

from .binding import Pending
from .client import Client, LiveQuery, Pipeline, Watch, connect
from .errors import (BadRequest, CannotConnect, Conflict, ConnectionLost, FolioError, Forbidden, Internal, Lagging,
                     NotFound, TooLarge, Unavailable, UnknownOp)
from .operations import create_op, delete_op, update_op
from .paths import socket_candidates
from .results import BatchResult, EventPage, Page
from .streams import LiveUpdate, apply_change
from .values import FileRef, Ref, Result, format_datetime, parse_datetime

__version__ = "0.1.0"

__all__ = [
    "connect", "Client", "Pipeline", "Pending", "Watch", "LiveQuery", "LiveUpdate", "apply_change",
    "FolioError", "BadRequest", "UnknownOp", "NotFound", "Conflict", "TooLarge", "Unavailable", "Forbidden",
    "Internal", "Lagging", "ConnectionLost", "CannotConnect",
    "Ref", "FileRef", "Result", "parse_datetime", "format_datetime",
    "Page", "EventPage", "BatchResult", "create_op", "update_op", "delete_op", "socket_candidates",
]
