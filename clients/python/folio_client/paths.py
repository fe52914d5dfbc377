"""Where foliod listens, as PROTOCOL.md §1 "Default paths" says for the `folio` CLI."""

from __future__ import annotations

import os
from typing import List, Mapping, Optional

SYSTEM_SOCKET = "/run/folio/folio.sock"


def socket_candidates(environ: Optional[Mapping[str, str]] = None, uid: Optional[int] = None) -> List[str]:
    """The sockets to try, in order: `FOLIO_SOCKET` alone if set and not empty; for root the system
    socket; for anyone else `$XDG_RUNTIME_DIR/folio/folio.sock` (or `/tmp/folio-$UID/folio.sock`), then
    the system socket."""
    environ = os.environ if environ is None else environ
    uid = os.getuid() if uid is None else uid
    if environ.get("FOLIO_SOCKET"):
        return [environ["FOLIO_SOCKET"]]
    if uid == 0:
        return [SYSTEM_SOCKET]
    runtime = environ.get("XDG_RUNTIME_DIR")
    own = f"{runtime}/folio/folio.sock" if runtime else f"/tmp/folio-{uid}/folio.sock"
    return [own, SYSTEM_SOCKET]
