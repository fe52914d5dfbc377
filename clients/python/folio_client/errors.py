"""Errors as exceptions: one class per stable code of PROTOCOL.md §3, each carrying the code and details.

Match on the class (`except NotFound`) or on `code`; `message` is for humans. An unknown code from a
newer server is a plain `FolioError` whose `code` keeps it.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

__all__ = [
    "FolioError", "BadRequest", "UnknownOp", "NotFound", "Conflict", "TooLarge", "Unavailable",
    "Forbidden", "Internal", "Lagging", "ConnectionLost", "CannotConnect", "error_from_wire",
]


class FolioError(Exception):
    """An error answer of foliod: `code` (stable), `message` (for humans), `details` (the other fields)."""

    code: str = ""

    def __init__(self, code: str, message: str, details: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: Dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, {self.details!r})"

    @property
    def index(self) -> Optional[int]:
        """On the error of an atomic batch: the position of the op that failed (§5.18)."""
        return self.details.get("index")

    @property
    def last_seq(self) -> Optional[int]:
        """On the end of a watch or live query (`lagging`, a dropped view): where to resume."""
        return self.details.get("lastSeq")


class BadRequest(FolioError):
    code = "bad_request"


class UnknownOp(FolioError):
    code = "unknown_op"


class NotFound(FolioError):
    code = "not_found"


class Conflict(FolioError):
    """A precondition failed; nothing changed. Which details it carries depends on the cause (§3)."""

    code = "conflict"

    @property
    def expected_version(self) -> Optional[int]:
        return self.details.get("expectedVersion")

    @property
    def current_version(self) -> Optional[int]:
        return self.details.get("currentVersion")

    @property
    def request_key(self) -> Optional[str]:
        return self.details.get("requestKey")

    @property
    def referrers(self) -> Optional[list]:
        return self.details.get("referrers")

    @property
    def view(self) -> Optional[str]:
        return self.details.get("view")

    @property
    def key(self) -> Optional[list]:
        return self.details.get("key")

    @property
    def existing_id(self) -> Optional[str]:
        return self.details.get("existingId")


class TooLarge(FolioError):
    code = "too_large"


class Unavailable(FolioError):
    code = "unavailable"


class Forbidden(FolioError):
    code = "forbidden"

    @property
    def op(self) -> Optional[str]:
        return self.details.get("op")

    @property
    def role(self) -> Optional[str]:
        return self.details.get("role")

    @property
    def collection(self) -> Optional[str]:
        return self.details.get("collection")


class Internal(FolioError):
    code = "internal"


class Lagging(FolioError):
    """A watch or live query fell behind and ended; resume after `last_seq`."""

    code = "lagging"


class ConnectionLost(FolioError, ConnectionError):
    """The connection closed before the answer came (client-side; no server code).

    A write sent with a request key, and any read, is sent once more on a new connection before
    this reaches the caller. `cause` is the last untagged error line foliod sent, if any.
    """

    code = "connection_lost"

    def __init__(self, message: str, cause: Optional[FolioError] = None):
        super().__init__("connection_lost", message)
        self.cause = cause


class CannotConnect(FolioError, ConnectionError):
    """No foliod answers on any of the socket paths tried (client-side; no server code)."""

    code = "cannot_connect"

    def __init__(self, message: str):
        super().__init__("cannot_connect", message)


_BY_CODE = {cls.code: cls for cls in (BadRequest, UnknownOp, NotFound, Conflict, TooLarge, Unavailable,
                                       Forbidden, Internal, Lagging)}


def error_from_wire(error: Dict[str, Any]) -> FolioError:
    """The exception for an `error` object of an answer."""
    code = error.get("code", "")
    message = error.get("message", "")
    details = {k: v for k, v in error.items() if k not in ("code", "message")}
    return _BY_CODE.get(code, FolioError)(code, message, details)
