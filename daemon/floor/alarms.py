"""The floor's own alarms (not table alarms): what the floor found wrong with what it received.

Stored in ``floor_alarms`` (one row per ``alarm_key``, raised once, updated while it lasts, ``cleared``
when the condition is over), logged, and shown on the floor page. Codes:

=====================  ==========  ==============================================================
code                   severity    meaning
=====================  ==========  ==============================================================
``SEQ_GAP``            critical    seqs of a table's journal are missing at the floor; ``cmd/replay``
                                   is requested until they arrive (cleared then)
``SEQ_LOST``           critical    a missing range the table no longer holds (pruned), or of a journal
                                   the table replaced (an older epoch): it cannot be replayed
``EPOCH_CHANGED``      warning     the table's journal epoch changed (a new journal file: seq restarts)
``CHAIN_DISCONTINUITY`` critical   a floor record carried a different chain head for a chain seq
                                   another floor record carried, or the status reports a chain/last seq
                                   lower than a record the floor holds (the journal was rewritten or
                                   restored from a backup); the status's own head is never compared (it
                                   moves with delivery marks)
``SEQ_CONFLICT``       critical    a message for a place in the sequence the floor already holds under
                                   another ``msg_id`` (quarantined)
``MSG_ID_REUSED``      critical    a ``msg_id`` the floor holds arrived with different content
                                   (quarantined; the first content is kept)
``QUARANTINED``        warning     a message failed its schema (kept in ``quarantine`` with the reason)
=====================  ==========  ==============================================================
"""

from __future__ import annotations

from datetime import UTC, datetime

from tablesense.daemon.floor.store import Tx
from tablesense.daemon.logging import get_logger

__all__ = ["FLOOR_ALARM_CODES", "clear_floor_alarm", "now_iso", "raise_floor_alarm"]

log = get_logger(component="floor")

FLOOR_ALARM_CODES: dict[str, str] = {
    "SEQ_GAP": "critical",
    "SEQ_LOST": "critical",
    "EPOCH_CHANGED": "warning",
    "CHAIN_DISCONTINUITY": "critical",
    "SEQ_CONFLICT": "critical",
    "MSG_ID_REUSED": "critical",
    "QUARANTINED": "warning",
}
"""Floor alarm code -> severity."""


def now_iso() -> str:
    """The current UTC time as ISO 8601 with microseconds and ``Z`` (the floor's timestamps)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def raise_floor_alarm(tx: Tx, key: str, table: str, code: str, text: str) -> bool:
    """Raise (or update the text of) the floor alarm ``key``; ``True`` when it was not raised before.

    Raises ``KeyError`` for a code not in :data:`FLOOR_ALARM_CODES`.
    """
    severity = FLOOR_ALARM_CODES[code]
    now = now_iso()
    rows = await tx.fetchall("SELECT state FROM floor_alarms WHERE alarm_key = ?", (key,))
    if rows and rows[0][0] == "raised":
        await tx.execute("UPDATE floor_alarms SET text = ?, updated_at = ? WHERE alarm_key = "
                         "?", (text, now, key))
        return False
    await tx.execute(
        "INSERT INTO floor_alarms (alarm_key, table_id, code, severity, text, state, raised_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, 'raised', ?, ?) ON CONFLICT (alarm_key) DO UPDATE SET text = excluded.text, "
        "state = 'raised', updated_at = excluded.updated_at, cleared_at = NULL",
        (key, table, code, severity, text, now, now))
    getattr(log, "critical" if severity == "critical" else "warning")(
        "floor_alarm", table=table, code=code, text=text, key=key)
    return True


async def clear_floor_alarm(tx: Tx, key: str, text: str | None = None) -> bool:
    """Clear the floor alarm ``key`` (``text`` replaces its text); ``True`` when it was raised."""
    now = now_iso()
    n = await tx.execute(
        "UPDATE floor_alarms SET state = 'cleared', cleared_at = ?, updated_at = ?, text = COALESCE(?, text) "
        "WHERE alarm_key = ? AND state = 'raised'", (now, now, text, key))
    if n:
        log.info("floor_alarm_cleared", key=key, text=text)
    return n > 0
