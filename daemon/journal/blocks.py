"""Reading the journal file: schema, sealed state, blocks, and verified rows (shared by the writer
:class:`~daemon.journal.store.Journal`, game recall and ``tablesense verify``).

Nothing read from the file is trusted before it is checked against the key:

* ``meta`` (table, epoch, creation time, key id) and ``state`` (the counters, the chain head, the
  bookkeeping the replay and the relay rely on) are one sealed record: :func:`read_header` checks its
  HMAC and that the journal was sealed with this key;
* rows are read a whole block at a time and :func:`verified_rows` recomputes the block's chain from the
  link before it to the link after it (or to the sealed head for the open block at the end): a changed,
  missing, added or reordered row fails, and the stored 4-byte hints name the first row that fails;
  the columns of ``blocks`` the chain does not cover (the round a block completed, its start and end
  times) are checked against those verified rows (:func:`check_block_facts`).

The schema (version 2) is :data:`DDL`. Tables: ``meta`` and ``state`` (one row each), ``blocks`` (one
row per closed block: its entry and ``seq`` ranges, the round it completed, its two links, the archive
unit holding it or 0), ``archive`` (the compressed rows and hints of archived blocks, several blocks per
unit, in parts of at most :data:`ARCHIVE_PART` bytes keyed ``unit id * 256 + part``, so that they pack
SQLite's 4 KiB pages instead of spilling into half-empty overflow pages), ``log`` and ``outbox`` (the
rows of
blocks not archived yet, one SQLite row each), ``pending`` (the ``seq`` of every message the broker has
not acknowledged, with its topic when retained).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from tablesense.daemon.journal.errors import JournalDamaged
from tablesense.daemon.journal.key import key_id
from tablesense.daemon.journal.seal import (
    HINT_BYTES,
    InputRow,
    MarkRow,
    MessageRow,
    PruneRow,
    Row,
    decode_row,
    decode_rows,
    describe,
    hint,
    link,
    row_label,
    seal,
    unpack_unit,
)
from tablesense.daemon.messages import FloorRound

__all__ = [
    "BLOCK_COLS",
    "DDL",
    "ROUND_COMPLETE_SCHEMAS",
    "SCHEMA_NAMES",
    "SCHEMA_VERSION",
    "Block",
    "DeviceFacts",
    "Header",
    "Meta",
    "State",
    "UnitCache",
    "archive_keys",
    "archive_rows",
    "block_of_entry",
    "blocks_after",
    "check_block_facts",
    "encode_state",
    "meta_bytes",
    "open_block",
    "read_header",
    "read_unit",
    "rows_beyond_head",
    "schema_problem",
    "state_seal",
    "verified_rows",
]

ROUND_COMPLETE_SCHEMAS = frozenset({str(FloorRound.__struct_config__.tag)})
"""Message schemas that mark their round complete (the floor record is published once a round ends): the
block of the input that emits one is closed, labelled with its ``(shoe, round)``."""

SCHEMA_VERSION = 2
"""``PRAGMA user_version`` of a sealed journal (version 1 was the unsealed CRC-32 journal)."""

DDL = """
CREATE TABLE meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version INTEGER NOT NULL,
    table_id TEXT NOT NULL,
    epoch TEXT NOT NULL,
    created_at TEXT NOT NULL,
    key_id TEXT NOT NULL
);
CREATE TABLE state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    data BLOB NOT NULL,
    seal BLOB NOT NULL
);
CREATE TABLE blocks (
    id INTEGER PRIMARY KEY,
    last_entry INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    shoe INTEGER,
    round INTEGER,
    started_ts TEXT NOT NULL,
    ended_ts TEXT NOT NULL,
    link_before BLOB NOT NULL,
    link_after BLOB NOT NULL,
    unit INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX blocks_round ON blocks(shoe, round) WHERE round IS NOT NULL;
CREATE INDEX blocks_done ON blocks(id) WHERE round IS NOT NULL;
CREATE INDEX blocks_seq ON blocks(last_seq);
CREATE INDEX blocks_raw ON blocks(id) WHERE unit = 0;
CREATE TABLE archive (
    id INTEGER PRIMARY KEY,
    part BLOB NOT NULL
);
CREATE TABLE log (
    id INTEGER PRIMARY KEY,
    row BLOB NOT NULL,
    hint BLOB NOT NULL
);
CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY,
    row BLOB NOT NULL,
    hint BLOB NOT NULL
);
CREATE TABLE pending (
    seq INTEGER PRIMARY KEY,
    topic TEXT
);
"""
"""Schema version 2."""

SCHEMA_NAMES = ("meta", "state", "blocks", "blocks_round", "blocks_done", "blocks_seq", "blocks_raw",
                "archive", "log", "outbox", "pending")
"""Every table and index of :data:`DDL` (checked at open: a dropped one is damage)."""

ARCHIVE_PART = 1000
"""Bytes per archive row: four fill a 4 KiB page."""
ARCHIVE_PARTS = 256
"""Archive rows per block at most (the key is ``block id * 256 + part``)."""

BLOCK_COLS = ("id, last_entry, first_seq, last_seq, shoe, round, started_ts, ended_ts, "
              "CAST(link_before AS BLOB), CAST(link_after AS BLOB), unit")


class Meta(msgspec.Struct, frozen=True):
    """The journal's identity, fixed at creation: table id, 8-hex-digit epoch, creation time, key id."""

    schema_version: int
    table: str
    epoch: str
    created_at: str
    key_id: str


class DeviceFacts(msgspec.Struct, frozen=True, array_like=True):
    """What the state machine knows of one device, kept from its inputs for a machine rebuilt from a later
    replay start (:meth:`Journal.devices_before_replay`, :class:`~daemon.table.inputs.DeviceSeed`). A
    *frame* is an input with the device's sequence number: a device event, or a rejected one (entry ids
    below; 0: none).

    * ``seq``: its last sequence number (``State.devices`` as it stood); ``session``: the session of its
      latest identity frame; ``link``: its latest link state (``DeviceState``); ``lost``: its latest
      ``disconnected`` link state, lost until a device event after it; ``cards``: it sent a card or a
      burn frame;
    * ``frames``: how many frames it sent (since the journal keeps these facts); ``last``: its latest
      device event, ``last_rejected``: its latest rejected frame;
    * ``first``: from it to its latest frame, its frames include at least its last
      :data:`~daemon.table.inputs.RESEND_WINDOW` (all of them while it has sent fewer): the frames it may
      resend; ``first_session``: the session before ``first``;
    * to move ``first`` on without keeping every frame's entry: ``next``, a later frame (``first`` once
      the frames from it on reach the window), ``next_session`` (the session before it) and
      ``next_frames`` (``frames`` at it).

    The writer keeps them in memory, a few assignments per device input (nothing scanned, nothing more
    sealed per transaction), and rebuilds them when it opens the journal from their snapshot at the
    current shoe's start and the inputs since (rows it verifies at open anyway); it snapshots them in
    the sealed state at each shoe start, like the pads (``State.anchor_device_facts``,
    ``State.replay_device_facts``). Only the frames are read back, and only while a rebuilt machine may
    still remember them (the device sent fewer than a window of frames since the snapshot)."""

    device: str
    seq: int | None = None
    session: str | None = None
    link: str | None = None
    lost: int = 0
    cards: bool = False
    frames: int = 0
    last: int = 0
    last_rejected: int = 0
    first: int = 0
    first_session: str | None = None
    next: int = 0
    next_session: str | None = None
    next_frames: int = 0


class State(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the journal keeps besides rows, sealed in one record (rewritten by every transaction).

    Chain: ``entry`` (the last entry id), ``head`` (the link after the last row), ``last_seq``;
    ``delivered`` (messages the broker acknowledged, ever: ``pending`` holds ``last_seq - delivered``
    rows); ``base`` (below this entry id retention may have deleted blocks); the open block:
    ``open_entry``, ``open_seq``, ``open_link`` (its first entry and seq, the link before it),
    ``open_entries``, ``open_bytes``, ``open_ts``; ``rounds``: rounds completed.

    Replay bookkeeping (the machine's own judgement, see :meth:`Journal.replay_inputs`): ``round``
    (``(shoe, round)`` of the latest message that had one), ``shoe``, ``shoe_anchor`` (entry that
    started the current shoe), ``replay_anchor`` and ``replay_shoe``; ``devices`` (latest device seq
    per device); ``spots`` (``(device, spot, entry)`` of the latest ``SpotChanged`` per spot) and the
    same as it stood before the current shoe (``anchor_spots``) and before the replay (``replay_spots``);
    the devices' facts (:class:`DeviceFacts`, one per device) as they stood before the current shoe
    (``anchor_device_facts``) and before the replay (``replay_device_facts``); ``topics``:
    ``(channel, device, seq)`` of the latest *delivered* retained message per topic.

    Encoded as a map: a field added later takes its default when an older journal is read (the device
    facts: ``None``, not kept then), and an older tablesense ignores it.
    """

    entry: int = 0
    head: bytes = b""
    last_seq: int = 0
    delivered: int = 0
    base: int = 1
    open_entry: int = 1
    open_seq: int = 1
    open_link: bytes = b""
    open_entries: int = 0
    open_bytes: int = 0
    open_ts: str = ""
    rounds: int = 0
    round: tuple[Any, Any] | None = None
    shoe: Any = None
    shoe_anchor: int | None = None
    replay_anchor: int | None = None
    replay_shoe: Any = None
    devices: dict[str, int] = {}
    spots: tuple[tuple[str, str, int], ...] = ()
    anchor_spots: tuple[tuple[str, str, int], ...] = ()
    replay_spots: tuple[tuple[str, str, int], ...] = ()
    topics: tuple[tuple[str, str | None, int], ...] = ()
    anchor_device_facts: tuple[DeviceFacts, ...] | None = None
    replay_device_facts: tuple[DeviceFacts, ...] | None = None


_META_ENC = msgspec.msgpack.Encoder()
_STATE_DEC = msgspec.msgpack.Decoder(State)
_STATE_LABEL = b"tablesense journal state v2"


@functools.lru_cache(maxsize=8)
def meta_bytes(meta: Meta) -> bytes:
    """The meta record as sealed (inside every state seal)."""
    return _META_ENC.encode(meta)


def encode_state(state: State) -> bytes:
    """The state record's bytes."""
    return _META_ENC.encode(state)


def state_seal(key: bytes, meta: Meta, data: bytes) -> bytes:
    """The state record's seal: HMAC-SHA256 over the meta record and the state bytes."""
    return seal(key, _STATE_LABEL, meta_bytes(meta), data)


@dataclass(frozen=True, slots=True)
class Header:
    """The checked meta and state of a journal."""

    meta: Meta
    state: State


@functools.cache
def _expected_schema() -> frozenset[tuple[str, str, str, str | None]]:
    """``(type, name, tbl_name, sql)`` of every schema object :data:`DDL` creates, as SQLite stores them."""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in DDL.split(";"):
            if statement.strip():
                conn.execute(statement)
        return frozenset(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema"))
    finally:
        conn.close()


def schema_problem(conn: sqlite3.Connection, where: str) -> str | None:
    """Why the journal's schema is not exactly :data:`DDL`, else ``None``: a table or index missing, or
    any object the DDL does not create (a trigger, a view, another table or index) or one whose
    definition was changed (``PRAGMA writable_schema``).

    The schema is not sealed, and SQLite runs a file's triggers inside the writer's own transactions: a
    ``BEFORE INSERT ON outbox ... RAISE(IGNORE)`` trigger planted by a person with file access silently
    drops rows the daemon believes it journaled (and then publishes), an ``AFTER INSERT ON pending``
    trigger hides messages from the relay. Hence no foreign object is tolerated (docs/journal.md
    "Threat model"). Pure over ``conn`` (reads ``sqlite_schema`` only)."""
    present = set(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema"))
    expected = _expected_schema()
    names = {name for _, name, _, _ in present}
    missing = [name for name in SCHEMA_NAMES if name not in names]
    if missing:
        return f"journal {where}: {', '.join(missing)} missing from the schema"
    foreign = sorted(present - expected, key=lambda r: (str(r[0]), str(r[1])))
    if foreign:
        shown = ", ".join(f"{kind} {str(name)[:64]!r}" for kind, name, _, _ in foreign[:5])
        return (f"journal {where}: schema objects the journal does not create or whose definition was "
                f"changed: {shown}{' ...' if len(foreign) > 5 else ''}")
    return None


def rows_beyond_head(conn: sqlite3.Connection, state: State, where: str) -> str | None:
    """Why rows lie beyond the sealed head, else ``None``: an entry after ``state.entry`` in ``log`` or a
    message after ``state.last_seq`` in ``outbox``. No transaction leaves such rows (rows and the state
    commit together), so they were inserted without the key; left in place they are covered by no seal
    and the writer's next append collides with them (every append then fails as if the disk were
    full, for ever). Reads two indexed maxima."""
    top_entry = conn.execute("SELECT max(id) FROM log").fetchone()[0]
    if top_entry is not None and int(top_entry) > state.entry:
        return (f"journal {where}: entry row(s) after the sealed head (entry {state.entry}, found "
                f"{int(top_entry)}): inserted without the key")
    top_seq = conn.execute("SELECT max(seq) FROM outbox").fetchone()[0]
    if top_seq is not None and int(top_seq) > state.last_seq:
        return (f"journal {where}: outbox row(s) after the sealed head (seq {state.last_seq}, found "
                f"{int(top_seq)}): inserted without the key")
    return None


def read_header(conn: sqlite3.Connection, key: bytes, where: str) -> Header:
    """Read and check ``meta`` and ``state``: schema version, key id, the state's seal.

    Raises :class:`JournalDamaged` (schema version, a missing record, a failed seal; a journal sealed
    with another key says so with both key ids)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version != SCHEMA_VERSION:
        extra = (" (an unsealed journal of an older tablesense: move it aside, keep it for the records, "
                 "and restart: a new sealed journal is created)") if version == 1 else ""
        raise JournalDamaged(f"journal {where} has schema version {version}; this tablesense reads version "
                             f"{SCHEMA_VERSION}{extra}")
    row = conn.execute("SELECT schema_version, table_id, epoch, created_at, key_id FROM meta WHERE id = 1"
                       ).fetchone()
    if row is None:
        raise JournalDamaged(f"journal {where}: meta record missing")
    try:
        meta = Meta(int(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]))
    except (TypeError, ValueError):
        raise JournalDamaged(f"journal {where}: meta record malformed") from None
    if meta.key_id != key_id(key):
        raise JournalDamaged(f"journal {where} was sealed with another key (key id {meta.key_id}; the key "
                             f"given has id {key_id(key)}): wrong key file, or the journal was replaced")
    srow = conn.execute("SELECT CAST(data AS BLOB), CAST(seal AS BLOB) FROM state WHERE id = 1").fetchone()
    if srow is None:
        raise JournalDamaged(f"journal {where}: state record missing")
    data, stored = bytes(srow[0]), bytes(srow[1])
    if state_seal(key, meta, data) != stored:
        raise JournalDamaged(f"journal {where}: the state record (counters, chain head, replay bookkeeping) "
                             "fails its seal: altered without the key")
    try:
        state = _STATE_DEC.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise JournalDamaged(f"journal {where}: state record unreadable: {exc}") from None
    return Header(meta, state)


@dataclass(frozen=True, slots=True)
class Block:
    """A run of chained rows: entries ``id..last_entry`` and messages ``first_seq..last_seq`` (none when
    ``last_seq < first_seq``), the round it completed (``shoe``, ``round``; ``None`` for a block closed
    by size, and for the open block), its time span, the links before and after it, and the archive
    ``unit`` holding its rows (0: its rows are in ``log`` and ``outbox``). ``is_open``: the block still
    being written (its ``link_after`` is the sealed chain head)."""

    id: int
    last_entry: int
    first_seq: int
    last_seq: int
    shoe: Any
    round: Any
    started_ts: str
    ended_ts: str
    link_before: bytes
    link_after: bytes
    unit: int
    is_open: bool = False

    @property
    def label(self) -> str:
        """``block 1234 (round 3-17)`` or ``open block 1300``."""
        what = f" (round {self.shoe}-{self.round})" if self.round is not None else ""
        return f"{'open block' if self.is_open else 'block'} {self.id}{what}"


def _block(r: tuple[Any, ...]) -> Block:
    return Block(int(r[0]), int(r[1]), int(r[2]), int(r[3]), r[4], r[5], str(r[6]), str(r[7]), bytes(r[8]),
                 bytes(r[9]), int(r[10]))


def open_block(state: State) -> Block:
    """The block being written: from ``state.open_entry`` to the head."""
    return Block(state.open_entry, state.entry, state.open_seq, state.last_seq, None, None, state.open_ts,
                 "", state.open_link, state.head, 0, True)


def block_of_entry(conn: sqlite3.Connection, state: State, entry: int) -> Block | None:
    """The block holding entry ``entry`` (the open block for entries at or after its start), ``None``
    when no block holds it (pruned)."""
    if entry >= state.open_entry:
        return open_block(state) if entry <= state.entry else None
    r = conn.execute(f"SELECT {BLOCK_COLS} FROM blocks WHERE id <= ? ORDER BY id DESC LIMIT 1",
                     (entry,)).fetchone()
    if r is None:
        return None
    block = _block(r)
    return block if block.last_entry >= entry else None


def blocks_after(conn: sqlite3.Connection, state: State, first: int, *, chunk: int = 256) -> Iterator[Block]:
    """Every closed block with ``id >= first`` in order, then the open block (read ``chunk`` at a time)."""
    last = first - 1
    while True:
        rows = conn.execute(f"SELECT {BLOCK_COLS} FROM blocks WHERE id > ? ORDER BY id LIMIT ?",
                            (last, chunk)).fetchall()
        for r in rows:
            yield _block(r)
        if len(rows) < chunk:
            break
        last = int(rows[-1][0])
    yield open_block(state)


def block_of_seq(conn: sqlite3.Connection, state: State, seq: int) -> Block | None:
    """The block holding message ``seq`` (``None``: not held)."""
    if seq >= state.open_seq:
        return open_block(state) if seq <= state.last_seq else None
    r = conn.execute(f"SELECT {BLOCK_COLS} FROM blocks INDEXED BY blocks_seq WHERE last_seq >= ? "
                     "ORDER BY last_seq LIMIT 1", (seq,)).fetchone()
    if r is None:
        return None
    block = _block(r)
    return block if block.first_seq <= seq else None


def _raw_blobs(conn: sqlite3.Connection, block: Block) -> tuple[list[bytes], bytes]:
    entries = conn.execute("SELECT id, CAST(row AS BLOB), CAST(hint AS BLOB) FROM log "
                           "WHERE id BETWEEN ? AND ? ORDER BY id", (block.id, block.last_entry)).fetchall()
    messages = conn.execute("SELECT seq, CAST(row AS BLOB), CAST(hint AS BLOB) FROM outbox "
                            "WHERE seq BETWEEN ? AND ? ORDER BY seq",
                            (block.first_seq, block.last_seq)).fetchall()
    ids = [int(e[0]) for e in entries]
    if ids != list(range(block.id, block.last_entry + 1)):
        missing = sorted(set(range(block.id, block.last_entry + 1)) - set(ids))
        raise JournalDamaged(f"{block.label}: entry row(s) {_ranges(missing)} missing (deleted)")
    seqs = [int(m[0]) for m in messages]
    if seqs != list(range(block.first_seq, block.last_seq + 1)):
        missing = sorted(set(range(block.first_seq, block.last_seq + 1)) - set(seqs))
        raise JournalDamaged(f"{block.label}: outbox row(s) seq {_ranges(missing)} missing (deleted)")
    # chain order: each entry, then the messages whose row names it (in seq order)
    by_entry: dict[int, list[tuple[bytes, bytes]]] = {}
    for m in messages:
        row = decode_row(bytes(m[1]), f"{block.label}: outbox seq {m[0]}")
        if not isinstance(row, MessageRow) or row.seq != int(m[0]):
            raise JournalDamaged(f"{block.label}: outbox seq {m[0]} holds {row_label(row)}")
        by_entry.setdefault(row.entry, []).append((bytes(m[1]), bytes(m[2])))
    blobs: list[bytes] = []
    hints: list[bytes] = []
    for e in entries:
        blobs.append(bytes(e[1]))
        hints.append(bytes(e[2]))
        for blob, h in by_entry.pop(int(e[0]), []):
            blobs.append(blob)
            hints.append(h)
    if by_entry:
        entry = min(by_entry)
        raise JournalDamaged(f"{block.label}: messages of entry {entry} outside the block")
    return blobs, b"".join(hints)


def _ranges(values: list[int]) -> str:
    if not values:
        return ""
    out: list[str] = []
    start = prev = values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
        if len(out) >= 3:
            break
    return ", ".join(out)


_Unpacked = tuple[dict[int, bytes], list[tuple[bytes, Row]], dict[int, int]]
"""An unpacked archive unit: hints by block id, rows in chain order, and the position of each entry."""


class UnitCache:
    """The last few unpacked archive units (reading the blocks of one unit unpacks it once)."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._units: dict[int, _Unpacked] = {}

    def get(self, unit: int) -> _Unpacked | None:
        return self._units.get(unit)

    def put(self, unit: int, value: _Unpacked) -> None:
        self._units.pop(unit, None)
        self._units[unit] = value
        while len(self._units) > self.size:
            del self._units[next(iter(self._units))]

    def drop(self, unit: int) -> None:
        self._units.pop(unit, None)


def read_unit(conn: sqlite3.Connection, unit: int, where: str) -> _Unpacked:
    """The hints, rows and entry positions of archive unit ``unit`` (unverified). :class:`JournalDamaged`
    when its rows are missing or unreadable."""
    parts = conn.execute("SELECT id, CAST(part AS BLOB) FROM archive WHERE id BETWEEN ? AND ? ORDER BY id",
                         archive_keys(unit)).fetchall()
    keys = [int(p[0]) for p in parts]
    if not keys or keys != list(range(unit * ARCHIVE_PARTS, unit * ARCHIVE_PARTS + len(keys))):
        raise JournalDamaged(f"{where}: archived rows missing (deleted)")
    hints, rows = unpack_unit(b"".join(bytes(p[1]) for p in parts), where)
    positions = {row.entry: i for i, (_, row) in enumerate(rows) if not isinstance(row, MessageRow)}
    return hints, rows, positions


def block_blobs(conn: sqlite3.Connection, block: Block, cache: UnitCache | None = None
                ) -> tuple[list[bytes], bytes]:
    """The block's row bytes in chain order and their hints (unverified)."""
    blobs, hints, _ = _block_contents(conn, block, cache)
    return blobs, hints


def _block_contents(conn: sqlite3.Connection, block: Block, cache: UnitCache | None
                    ) -> tuple[list[bytes], bytes, list[Row] | None]:
    """:func:`block_blobs` and, for an archived block, the rows already decoded."""
    if not block.unit:
        blobs, raw_hints = _raw_blobs(conn, block)
        return blobs, raw_hints, None
    unpacked = cache.get(block.unit) if cache is not None else None
    if unpacked is None:
        unpacked = read_unit(conn, block.unit, block.label)
        if cache is not None:
            cache.put(block.unit, unpacked)
    hints, rows, positions = unpacked
    start = positions.get(block.id)
    if start is None:
        raise JournalDamaged(f"{block.label}: not in its archive unit {block.unit}")
    end = positions.get(block.last_entry + 1, len(rows))
    mine = rows[start:end]
    return [blob for blob, _ in mine], hints.get(block.id, b""), [row for _, row in mine]


def archive_keys(unit: int) -> tuple[int, int]:
    """The first and last archive row keys of unit ``unit``."""
    return unit * ARCHIVE_PARTS, unit * ARCHIVE_PARTS + ARCHIVE_PARTS - 1


def archive_rows(unit: int, packed: bytes) -> list[tuple[int, bytes]]:
    """The archive rows storing a packed unit, cut in parts of :data:`ARCHIVE_PART` bytes (larger when
    needed to stay within :data:`ARCHIVE_PARTS` parts)."""
    size = max(ARCHIVE_PART, -(-len(packed) // ARCHIVE_PARTS))
    return [(unit * ARCHIVE_PARTS + i, packed[off:off + size])
            for i, off in enumerate(range(0, len(packed), size))]


def verified_rows(conn: sqlite3.Connection, key: bytes, block: Block, cache: UnitCache | None = None
                  ) -> list[Row]:
    """The block's rows in chain order, decoded, after recomputing its chain.

    Checks: the rows' entry ids and seqs are exactly the block's ranges, in chain order, and the chain
    from ``link_before`` over every row ends at ``link_after``, and a closed block's round and times match
    its rows (:func:`check_block_facts`; block 1's start is read from ``meta``). Raises
    :class:`JournalDamaged` naming the first row whose link differs from its stored hint (the first row
    altered, inserted or removed), or the block when only its closing link differs, or its altered
    round or times."""
    blobs, hints, decoded = _block_contents(conn, block, cache)
    if len(hints) != HINT_BYTES * len(blobs):
        raise JournalDamaged(f"{block.label}: {len(blobs)} rows but {len(hints) // HINT_BYTES} hints")
    current = block.link_before
    first_bad: int | None = None
    for i, blob in enumerate(blobs):
        current = link(key, current, blob)
        if first_bad is None and hint(current) != hints[i * HINT_BYTES:(i + 1) * HINT_BYTES]:
            first_bad = i
    if current != block.link_after:
        if first_bad is not None:
            what = describe(blobs[first_bad], f"row {first_bad + 1} of the block")
            raise JournalDamaged(f"{block.label}: {what} fails its seal (altered, inserted or a row before "
                                 "it removed, without the key)")
        raise JournalDamaged(f"{block.label}: its rows do not end at the block's sealed link (a row removed "
                             "or altered at its end, or the link itself altered)")
    rows = decoded if decoded is not None else decode_rows(blobs, block.label)
    created_at: str | None = None
    if block.id == 1 and not block.is_open:
        meta = conn.execute("SELECT created_at FROM meta WHERE id = 1").fetchone()
        created_at = str(meta[0]) if meta is not None else None
    _check_order(block, rows, created_at)
    return rows


class _RoundOf(msgspec.Struct):
    """The fields of a message payload (JSON) that say which round it completes."""

    schema: str = ""
    shoe: Any = None
    round: Any = None


_ROUND_OF = msgspec.json.Decoder(_RoundOf)


def _closing_round(row: MessageRow) -> tuple[Any, Any] | None:
    """``(shoe, round)`` when ``row`` is a round-complete message (:data:`ROUND_COMPLETE_SCHEMAS`) of a
    round, else ``None`` (as the writer labels the block its input closes)."""
    try:
        msg = _ROUND_OF.decode(row.payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if msg.schema not in ROUND_COMPLETE_SCHEMAS or msg.round is None or msg.round == "" \
            or isinstance(msg.round, bool):
        return None
    return msg.shoe, msg.round


def check_block_facts(block: Block, rows: list[Row], created_at: str | None) -> None:
    """Check a closed block's unsealed columns against its verified ``rows`` (chain order); raise
    :class:`JournalDamaged` when they differ (changed in the file without the key).

    The writer derives them from the rows (docs/journal.md "Blocks"): ``shoe`` and ``round`` from the
    round-complete message of the block's last entry (``None`` for a block closed by size or by a prune or
    mark entry); ``ended_ts`` is the ``ts`` of the last entry; ``started_ts`` is the ``ts`` of the first
    entry (of the input after it when the first is a mark entry written with that input), and for block 1
    the journal's creation time ``created_at`` (``None``: not checked). Retention by age and by round
    count and recall by round rely on these columns, so they are trusted only once checked here. The
    open block is not checked (its facts are in the sealed state)."""
    if block.is_open:
        return
    last: InputRow | MarkRow | PruneRow | None = None
    closing: tuple[Any, Any] | None = None
    starts: list[str] = []
    for row in rows:
        if isinstance(row, MessageRow):
            if isinstance(last, InputRow):
                key = _closing_round(row)
                if key is not None:
                    closing = key
            continue
        last, closing = row, None
        if len(starts) < 2 and (not starts or isinstance(rows[0], MarkRow)):
            starts.append(row.ts)
    if last is None:
        raise JournalDamaged(f"{block.label}: holds no entry")
    problems = []
    if (block.shoe, block.round) != (closing or (None, None)):
        shown = "none" if closing is None else f"{closing[0]}-{closing[1]}"
        problems.append(f"round {block.shoe}-{block.round} recorded, its rows complete {shown}")
    if block.ended_ts != last.ts:
        problems.append(f"ended {block.ended_ts!r} recorded, its last entry is of {last.ts!r}")
    if block.id == 1:
        if created_at is not None and block.started_ts != created_at:
            problems.append(f"started {block.started_ts!r} recorded, the journal was created {created_at!r}")
    elif block.started_ts not in starts:
        problems.append(f"started {block.started_ts!r} recorded, its first entry is of {starts[0]!r}")
    if problems:
        raise JournalDamaged(f"{block.label}: {'; '.join(problems)} (the block's round or times altered "
                             "without the key)")


def _check_order(block: Block, rows: list[Row], created_at: str | None = None) -> None:
    entry, seq = block.id - 1, block.first_seq - 1
    current_input: int | None = None
    for row in rows:
        if isinstance(row, MessageRow):
            if row.seq != seq + 1 or row.entry != current_input:
                raise JournalDamaged(f"{block.label}: {row_label(row)} out of order")
            seq = row.seq
        else:
            if row.entry != entry + 1:
                raise JournalDamaged(f"{block.label}: {row_label(row)} out of order")
            entry = row.entry
            current_input = row.entry if isinstance(row, InputRow) else None
    if entry != block.last_entry or seq != block.last_seq:
        raise JournalDamaged(f"{block.label}: holds entries to {entry} and seq to {seq}, not "
                             f"{block.last_entry} and {block.last_seq}")
    check_block_facts(block, rows, created_at)
