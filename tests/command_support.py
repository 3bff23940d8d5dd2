"""Command bodies as the floor system sends them (docs/mqtt.md, "Commands"), for the tests."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tablesense.daemon.mqtt import CommandRequest, parse_command

_ids = itertools.count(1)


def now_iso(offset: float = 0.0) -> str:
    """The current UTC time (plus ``offset`` seconds) as ISO 8601 with milliseconds and ``Z``."""
    t = datetime.now(UTC) + timedelta(seconds=offset)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id(prefix: str = "t") -> str:
    """A fresh command id."""
    return f"{prefix}-{next(_ids)}"


def body(operator: str = "pit boss 4", args: dict[str, Any] | None = None, *, command_id: str | None = None,
         issued_at: str | None = "now", **extra: Any) -> bytes:
    """A command body: ``operator``, a fresh ``command_id`` (unless given), ``issued_at`` now (``None``:
    left out), ``args`` and any ``extra`` top-level keys."""
    doc: dict[str, Any] = {"operator": operator, "command_id": command_id or new_id()}
    if issued_at is not None:
        doc["issued_at"] = now_iso() if issued_at == "now" else issued_at
    if args is not None:
        doc["args"] = args
    doc.update(extra)
    return json.dumps(doc).encode()


def request(name: str, args: dict[str, Any] | None = None, operator: str = "pit boss 4", *,
            command_id: str | None = None, issued_at: str | None = "now", retained: bool = False,
            message_expiry: int | None = None) -> CommandRequest:
    """A request as the relay hands it to the daemon (through :func:`parse_command`, so it is one the
    parser accepts)."""
    return parse_command(name, body(operator, args, command_id=command_id, issued_at=issued_at),
                         retained=retained, message_expiry=message_expiry)
