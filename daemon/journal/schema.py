"""The journal's SQLite schema (version 1) and row checksums (pure: no I/O).

Tables:

* ``meta``: one row: schema version, table id, journal epoch, counters (last ``seq``, last input id),
  the current round and shoe, the input that started the current shoe, and the replay start (the
  input that started the previous shoe) with its shoe number.
* ``rounds``: one row per ``(shoe, round)`` seen in a message, in the order rounds began, with the
  first input / outbox row that belongs to it and a ``complete`` flag (set by the ``FloorRound`` message,
  the complete round record on ``floor/rounds``).
* ``inputs``: every input in arrival order: ``ts``, ``kind``, ``device``, ``device_seq``, the round it
  belongs to, the msgspec JSON payload and a CRC-32.
* ``outbox``: one row per message; ``row_id`` *is* the table-wide ``seq``; ``msg_id``, channel, device
  (for ``devices/{name}``), retain, qos, the JSON payload with ``seq`` and ``msg_id`` filled, a CRC-32,
  the input that caused it and ``delivered_at`` (``NULL`` until the broker acknowledged it).
* ``devices``: the latest device ``seq`` per device (so cards missed while the daemon was down show).
* ``spots``: the input holding the latest ``SpotChanged`` of every bet-pad spot; ``anchor_spots``: the
  same as it stood just before the current shoe's first input (``which = 1``) and just before the
  replay start (``which = 0``): chips stay on the layout across shoe changes without a new event.
  :meth:`~daemon.journal.Journal.prune` keeps those inputs.

The CRC-32 of each row (its key fields and payload) is checked at every open and on every read, which
catches damage inside row contents that SQLite's ``PRAGMA integrity_check`` (a structural check) does
not see.
"""

from __future__ import annotations

import zlib

__all__ = ["DDL", "SCHEMA_VERSION", "input_crc", "outbox_crc"]

SCHEMA_VERSION = 1
"""Stored in ``PRAGMA user_version`` and ``meta.schema_version``."""

DDL = """
CREATE TABLE meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version INTEGER NOT NULL,
    table_id TEXT NOT NULL,
    epoch TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_seq INTEGER NOT NULL,
    last_input INTEGER NOT NULL,
    current_round INTEGER,
    current_shoe ANY,
    shoe_anchor INTEGER,
    replay_anchor INTEGER,
    replay_shoe ANY
);
CREATE TABLE rounds (
    id INTEGER PRIMARY KEY,
    shoe ANY,
    round ANY,
    first_input INTEGER NOT NULL,
    first_row INTEGER NOT NULL,
    started_ts TEXT NOT NULL,
    ended_ts TEXT,
    complete INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX rounds_key ON rounds(shoe, round);
CREATE INDEX rounds_complete ON rounds(id) WHERE complete = 1;
CREATE TABLE inputs (
    id INTEGER PRIMARY KEY,
    ts TEXT NOT NULL,
    kind TEXT NOT NULL,
    device TEXT,
    device_seq INTEGER,
    round_ref INTEGER,
    payload BLOB NOT NULL,
    crc INTEGER NOT NULL
);
CREATE INDEX inputs_round ON inputs(round_ref);
CREATE TABLE outbox (
    row_id INTEGER PRIMARY KEY,
    msg_id TEXT NOT NULL,
    input_id INTEGER NOT NULL,
    round_ref INTEGER,
    schema TEXT NOT NULL,
    channel TEXT NOT NULL,
    device TEXT,
    retain INTEGER NOT NULL,
    qos INTEGER NOT NULL,
    payload BLOB NOT NULL,
    crc INTEGER NOT NULL,
    created_ts TEXT NOT NULL,
    delivered_at TEXT
);
CREATE INDEX outbox_pending ON outbox(row_id) WHERE delivered_at IS NULL;
CREATE INDEX outbox_round ON outbox(round_ref);
CREATE INDEX outbox_retained ON outbox(channel, device, row_id) WHERE retain = 1;
CREATE TABLE spots (
    device TEXT NOT NULL,
    spot TEXT NOT NULL,
    input_id INTEGER NOT NULL,
    PRIMARY KEY (device, spot)
) WITHOUT ROWID;
CREATE TABLE anchor_spots (
    which INTEGER NOT NULL,
    device TEXT NOT NULL,
    spot TEXT NOT NULL,
    input_id INTEGER NOT NULL,
    PRIMARY KEY (which, device, spot)
) WITHOUT ROWID;
CREATE TABLE devices (
    device TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL,
    input_id INTEGER NOT NULL
) WITHOUT ROWID;
"""
"""Schema version 1."""

_US = "\x1f"


def _opt(value: object) -> str:
    return "\x00" if value is None else str(value)


def input_crc(row_id: int, ts: str, kind: str, device: str | None, device_seq: int | None,
              payload: bytes) -> int:
    """CRC-32 of an ``inputs`` row: its id, ts, kind, device, device seq and payload."""
    head = _US.join((str(row_id), ts, kind, _opt(device), _opt(device_seq))) + "\x1e"
    return zlib.crc32(payload, zlib.crc32(head.encode()))


def outbox_crc(row_id: int, msg_id: str, schema: str, channel: str, device: str | None, retain: bool,
               qos: int, created_ts: str, payload: bytes) -> int:
    """CRC-32 of an ``outbox`` row: seq, msg_id, schema, channel, device, retain, qos, ts and payload."""
    head = _US.join((str(row_id), msg_id, schema, channel, _opt(device), str(int(retain)), str(qos),
                     created_ts)) + "\x1e"
    return zlib.crc32(payload, zlib.crc32(head.encode()))
