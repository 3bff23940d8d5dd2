"""The write-ahead journal and transactional outbox (docs/journal.md).

One SQLite file, ``journal.sqlite``, in the configured journal directory, in WAL mode with
``synchronous=FULL`` so that a committed append survives power loss, not only a process crash
(https://www.sqlite.org/pragma.html#pragma_synchronous). For each input the app calls
:meth:`Journal.append` with the input and the messages the state machine emitted for it; the input row
and one outbox row per message are written in ONE transaction *before* anything is published. A single
relay publishes :meth:`Journal.pending` in order and calls :meth:`Journal.mark_delivered` only on the
broker's acknowledgement, so after a reconnect or restart it resumes from the first undelivered row with
the same ``msg_id`` (at-least-once; consumers drop duplicates by ``msg_id``).

Only one process may write a journal (an exclusive ``flock`` on ``journal.lock``); any number may read it
(:mod:`daemon.journal.recall`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from tablesense.daemon.journal.codec import decode_event, encode_event, event_device
from tablesense.daemon.journal.errors import JournalDamaged, JournalUnwritable, classify_sqlite_error
from tablesense.daemon.journal.schema import DDL, SCHEMA_VERSION, input_crc, outbox_crc
from tablesense.daemon.messages import FloorRound
from tablesense.daemon.table.inputs import Emit, TimedInput
from tablesense.drivers.events import SpotChanged

__all__ = [
    "JOURNAL_FILE",
    "MIN_RETENTION_ROUNDS",
    "ROUND_COMPLETE_SCHEMAS",
    "Journal",
    "OutboxRow",
    "message_round",
    "message_schema",
]

JOURNAL_FILE = "journal.sqlite"
"""The database file inside the journal directory."""
LOCK_FILE = "journal.lock"
MIN_RETENTION_ROUNDS = 10
"""Game recall keeps the current round and at least the 9 before it (AGCO "most recent game plus 9
prior", Fla. Admin. Code 75-14.043 "last 10 games")."""
ROUND_COMPLETE_SCHEMAS = frozenset({str(FloorRound.__struct_config__.tag)})
"""Message schemas that mark their round complete (the floor record is published once a round ends)."""

_READ_CHUNK = 512


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One message waiting for (or past) delivery.

    ``row_id`` and ``seq`` are equal: the table-wide sequence number, monotonic across restarts.
    ``msg_id`` is ``"{table}-{epoch}-{seq}"`` (``epoch``: 8 hex digits drawn when the journal file was
    created, so ids stay unique even if a journal is ever replaced). ``channel`` is the state machine's
    channel value (``"round"``, ``"settlements"``...), ``device`` the device name for ``devices/{name}``,
    ``payload`` the message JSON with ``seq`` and ``msg_id`` filled in.
    """

    row_id: int
    seq: int
    msg_id: str
    channel: str
    device: str | None
    payload: bytes
    retain: bool
    qos: int


def message_schema(message: Any) -> str:
    """The ``schema`` tag of a msgspec message Struct (its class name unless the model sets a tag)."""
    config = getattr(type(message), "__struct_config__", None)
    tag = getattr(config, "tag", None)
    return str(tag) if tag is not None else type(message).__name__


def message_round(message: Any) -> tuple[Any, Any] | None:
    """``(shoe, round)`` of a message, or ``None`` when it belongs to no round (round unset)."""
    rnd = getattr(message, "round", None)
    if rnd is None or rnd == "" or isinstance(rnd, bool):
        return None
    shoe = getattr(message, "shoe", None)
    return (shoe, rnd)


def _channel_name(channel: Any) -> str:
    value = getattr(channel, "value", channel)
    return str(value)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class _Shoes:
    """Shoe bookkeeping: the current shoe number and the input that started it (``None``: the journal's
    first shoe), and where the replay starts (the input that started the previous shoe, ``None``: the
    journal's first input) with the shoe number in play there."""

    current: Any
    anchor: int | None
    replay_anchor: int | None
    replay_shoe: Any

    def after(self, input_id: int, shoes: Sequence[Any]) -> _Shoes:
        """The bookkeeping after input ``input_id`` whose messages carry the shoe numbers ``shoes``: the
        input whose messages first carry a new shoe number started that shoe (the machine's judgement)."""
        out = self
        for shoe in shoes:
            if shoe is None or shoe == out.current:
                continue
            if out.current is None:  # the first shoe: replay from the journal's beginning
                out = _Shoes(shoe, out.anchor, out.replay_anchor, shoe)
            elif out.anchor is None:  # the second shoe: the replay still covers the first from the beginning
                out = _Shoes(shoe, input_id, None, out.replay_shoe)
            else:
                out = _Shoes(shoe, input_id, out.anchor, out.current)
        return out


@dataclass(slots=True)
class _Prepared:
    row_id: int
    msg_id: str
    schema: str
    channel: str
    device: str | None
    retain: bool
    qos: int
    payload: bytes
    shoe: Any
    round_key: tuple[Any, Any] | None
    complete: bool


class Journal:
    """The table's write-ahead journal and outbox.

    ``Journal(directory, table, retention_rounds=1000, retention_days=None, max_size_bytes=None)`` creates
    ``directory/journal.sqlite`` (and the directory) if missing, or opens it and checks it: SQLite's
    ``PRAGMA integrity_check``, the schema version and every table and index of it, that it belongs to
    ``table``, the CRC-32 of every row, and that ``inputs.id`` and ``outbox.row_id`` run without a hole
    up to the counters in ``meta`` from the prune marks on (retention deletes rows only below them).
    Raises :class:`JournalDamaged` when any check fails, :class:`JournalUnwritable` when the file
    cannot be created/written or another process holds it, ``ValueError`` for ``retention_rounds < 10``.
    Retention (:meth:`prune`): a round is deleted once it is older than the last ``retention_rounds``
    complete rounds *and*, when ``retention_days`` is set (the config's ``journal.retention_days``), it
    ended more than that many days ago. ``max_size_bytes`` caps the file (SQLite ``max_page_count``); an
    append past it raises :class:`JournalUnwritable` like a full disk.

    All methods are thread-safe (one internal lock); the connection is not shared with other processes.
    """

    def __init__(self, directory: Path | str, table: str, *, retention_rounds: int = 1000,
                 retention_days: float | None = None, max_size_bytes: int | None = None) -> None:
        if retention_rounds < MIN_RETENTION_ROUNDS:
            raise ValueError(f"retention_rounds must be at least {MIN_RETENTION_ROUNDS} (game recall keeps "
                             f"the current round and the 9 before it), got {retention_rounds}")
        if not table:
            raise ValueError("table id must not be empty")
        self._dir = Path(directory)
        self._table = table
        if retention_days is not None and retention_days < 0:
            raise ValueError(f"retention_days must not be negative, got {retention_days}")
        self._retention = retention_rounds
        self._retention_days = retention_days
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        self._conn: sqlite3.Connection | None = None
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self._dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            self._release()
            raise JournalUnwritable(f"journal directory {self._dir} is not writable: {exc}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._release()
            raise JournalUnwritable(f"journal {self.path} is in use by another tablesense process") from None
        try:
            self._open(max_size_bytes)
        except sqlite3.Error as exc:
            self._release()
            if re.search(r"no such (table|column|index)|has no column", str(exc)):  # an altered schema
                raise JournalDamaged(f"journal {self.path}: schema altered: {exc}") from None
            raise classify_sqlite_error(exc, "open") from None
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------------ open / check

    @property
    def path(self) -> Path:
        """The database file."""
        return self._dir / JOURNAL_FILE

    @property
    def table(self) -> str:
        """The table id this journal belongs to."""
        return self._table

    @property
    def epoch(self) -> str:
        """8 hex digits drawn when the journal file was created (part of every ``msg_id``)."""
        return self._epoch

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the latest outbox row (0 for a new journal)."""
        return self._last_seq

    def _open(self, max_size_bytes: int | None) -> None:
        existed = self.path.exists() and self.path.stat().st_size > 0
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10.0)
        self._conn = conn
        conn.execute("PRAGMA busy_timeout=10000")
        if existed:
            self._integrity_check(conn)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise JournalUnwritable(f"journal {self.path}: cannot switch to WAL mode (got {mode!r})")
        conn.execute("PRAGMA synchronous=FULL")
        if max_size_bytes is not None:
            page = int(conn.execute("PRAGMA page_size").fetchone()[0])
            conn.execute(f"PRAGMA max_page_count={max(1, max_size_bytes // page)}")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        has_tables = conn.execute("SELECT count(*) FROM sqlite_schema WHERE type='table'").fetchone()[0]
        if version == 0 and not has_tables:
            self._create(conn)
        elif version != SCHEMA_VERSION:
            raise JournalDamaged(f"journal {self.path} has schema version {version}; this tablesense reads "
                                 f"version {SCHEMA_VERSION}")
        self._check_schema(conn)
        self._marks = self._prune_marks(conn, fresh=not existed)
        row = conn.execute("SELECT schema_version, table_id, epoch, last_seq, last_input, current_round, "
                           "shoe_anchor, current_shoe, replay_anchor, replay_shoe FROM meta WHERE id = 1"
                           ).fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            raise JournalDamaged(f"journal {self.path}: meta record missing or inconsistent")
        if row[1] != self._table:
            raise JournalDamaged(f"journal {self.path} belongs to table {row[1]!r}, not {self._table!r}")
        self._epoch = str(row[2])
        self._last_seq, self._last_input = int(row[3]), int(row[4])
        self._current_round: int | None = row[5]
        self._shoes = _Shoes(current=row[7], anchor=row[6], replay_anchor=row[8], replay_shoe=row[9])
        if existed:
            self._verify_rows(conn)

    def _create(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:  # statement by statement: executescript() would COMMIT on its own
            for statement in DDL.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO meta VALUES (1, ?, ?, ?, ?, 0, 0, NULL, NULL, NULL, NULL, NULL)",
                         (SCHEMA_VERSION, self._table, secrets.token_hex(4), _now()))
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        """Every table and index of the schema is there (``DROP TABLE devices`` passes SQLite's own
        integrity check but leaves a journal the daemon cannot use)."""
        present = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type IN ('table', 'index')")}
        missing = [name for name in _SCHEMA_NAMES if name not in present]
        if missing:
            raise JournalDamaged(f"journal {self.path}: {', '.join(missing)} missing from the schema")

    def _prune_marks(self, conn: sqlite3.Connection, *, fresh: bool) -> tuple[int, int]:
        """``(outbox_below, inputs_below)``: :meth:`prune` deleted rows below these ids only, so from
        them on ``outbox.row_id`` and ``inputs.id`` must be contiguous up to the counters in ``meta``.

        Created with ``(1, 1)`` for a new journal. A journal written before the marks existed gets
        marks above its current rows (its older rows cannot be told apart from pruned ones), so holes
        are detected in rows written from then on.
        """
        if conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'prune_marks'"
                        ).fetchone():
            row = conn.execute("SELECT outbox_below, inputs_below FROM prune_marks WHERE id = 1").fetchone()
            if row is None or not all(isinstance(v, int) and v >= 1 for v in row):
                raise JournalDamaged(f"journal {self.path}: prune marks missing or inconsistent")
            return int(row[0]), int(row[1])
        if fresh:
            marks = (1, 1)
        else:
            top = conn.execute("SELECT (SELECT max(row_id) FROM outbox), (SELECT max(id) FROM inputs)"
                               ).fetchone()
            marks = ((top[0] or 0) + 1, (top[1] or 0) + 1)
        conn.execute(_PRUNE_MARKS_DDL)
        conn.execute("INSERT INTO prune_marks VALUES (1, ?, ?)", marks)
        return marks

    def _check_contiguous(self, conn: sqlite3.Connection, what: str, table: str, key: str, below: int,
                          last: int) -> None:
        """Rows ``below..last`` of ``table`` all present (a deleted row in the middle is damage), none
        beyond ``last`` (the counter in ``meta``)."""
        start = max(below, 1)
        count, top = conn.execute(f"SELECT count(*), max({key}) FROM {table} WHERE {key} >= ?",
                                  (start,)).fetchone()
        expected = max(0, last - start + 1)
        if top is not None and top > last:
            raise JournalDamaged(f"journal {self.path}: {what} {top} beyond the recorded counter {last}")
        if count != expected:
            raise JournalDamaged(f"journal {self.path}: {expected - count} {what} row(s) missing between "
                                 f"{start} and {last} (deleted, or the counter in meta was altered)")

    def _integrity_check(self, conn: sqlite3.Connection) -> None:
        try:
            problems = [r[0] for r in conn.execute("PRAGMA integrity_check(20)")]
        except sqlite3.DatabaseError as exc:
            raise JournalDamaged(f"journal {self.path} is damaged: {exc}") from None
        if problems != ["ok"]:
            raise JournalDamaged(f"journal {self.path} failed its integrity check: {'; '.join(problems[:3])}")

    def _verify_rows(self, conn: sqlite3.Connection) -> None:
        """Check the CRC-32 of every row and that ``seq`` never exceeds the stored counter."""
        last = 0
        while True:
            rows = conn.execute("SELECT id, ts, kind, device, device_seq, payload, crc FROM inputs "
                                "WHERE id > ? ORDER BY id LIMIT ?", (last, _READ_CHUNK)).fetchall()
            if not rows:
                break
            for r in rows:
                if input_crc(r[0], r[1], r[2], r[3], r[4], r[5]) != r[6]:
                    raise JournalDamaged(f"journal {self.path}: input {r[0]} fails its checksum")
            last = rows[-1][0]
        if last > self._last_input:
            raise JournalDamaged(f"journal {self.path}: input {last} beyond the recorded counter")
        last = 0
        while True:
            rows = conn.execute(f"SELECT {_OUTBOX_COLS} FROM outbox WHERE row_id > ? ORDER BY row_id LIMIT ?",
                                (last, _READ_CHUNK)).fetchall()
            if not rows:
                break
            for r in rows:
                self._checked_row(r)
            last = rows[-1][0]
        if last > self._last_seq:
            raise JournalDamaged(f"journal {self.path}: seq {last} beyond the recorded counter")
        self._check_contiguous(conn, "input", "inputs", "id", self._marks[1], self._last_input)
        self._check_contiguous(conn, "outbox", "outbox", "row_id", self._marks[0], self._last_seq)

    def _checked_row(self, r: tuple[Any, ...]) -> OutboxRow:
        row_id, msg_id, schema, channel, device, retain, qos, created_ts, payload, crc = r
        if outbox_crc(row_id, msg_id, schema, channel, device, bool(retain), qos, created_ts, payload) != crc:
            raise JournalDamaged(f"journal {self.path}: outbox row {row_id} fails its checksum")
        return OutboxRow(row_id=row_id, seq=row_id, msg_id=msg_id, channel=channel, device=device,
                         payload=bytes(payload), retain=bool(retain), qos=int(qos))

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise JournalUnwritable(f"journal {self.path} is closed")
        return self._conn

    # ------------------------------------------------------------------ append

    def append(self, inp: TimedInput, emits: Sequence[Emit]) -> list[OutboxRow]:
        """Journal ``inp`` and one outbox row per emitted message, in ONE transaction.

        Each message gets the next table-wide ``seq`` and its ``msg_id`` (the stored JSON has both filled,
        via ``msgspec.structs.replace``). Returns the new outbox rows in order. On any failure the
        transaction is rolled back whole and :class:`JournalUnwritable` (disk full, read-only, I/O error,
        size cap) or :class:`JournalDamaged` (corruption found while writing) is raised; counters do not
        advance. ``TypeError`` for an input type that cannot be journaled (before anything is written).
        """
        kind, in_payload = encode_event(inp.event)
        device, device_seq = event_device(inp.event)
        ts = str(inp.ts)
        with self._lock:
            conn = self._db()
            input_id = self._last_input + 1
            prepared: list[_Prepared] = []
            for i, emit in enumerate(emits):
                seq = self._last_seq + 1 + i
                msg_id = f"{self._table}-{self._epoch}-{seq}"
                message = msgspec.structs.replace(emit.message, seq=seq, msg_id=msg_id)
                schema = message_schema(message)
                prepared.append(_Prepared(
                    row_id=seq, msg_id=msg_id, schema=schema, channel=_channel_name(emit.channel),
                    device=emit.device, retain=bool(emit.retain), qos=int(emit.qos),
                    payload=msgspec.json.encode(message), shoe=getattr(message, "shoe", None),
                    round_key=message_round(message),
                    complete=schema in ROUND_COMPLETE_SCHEMAS))
            current = self._current_round
            shoes = self._shoes.after(input_id, [p.shoe for p in prepared])
            try:
                if conn.in_transaction:  # a previous failure left one open
                    conn.execute("ROLLBACK")
                conn.execute("BEGIN IMMEDIATE")
                refs: list[int | None] = []
                for p in prepared:
                    ref = None if p.round_key is None else self._round_ref(conn, p, input_id, ts)
                    refs.append(ref)
                    if ref is not None:
                        current = ref
                input_round = next((r for r in refs if r is not None), self._current_round)
                conn.execute("INSERT INTO inputs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             (input_id, ts, kind, device, device_seq, input_round, in_payload,
                              input_crc(input_id, ts, kind, device, device_seq, in_payload)))
                if prepared:
                    conn.executemany(
                        "INSERT INTO outbox VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                        [(p.row_id, p.msg_id, input_id, ref, p.schema, p.channel, p.device, int(p.retain),
                          p.qos, p.payload,
                          outbox_crc(p.row_id, p.msg_id, p.schema, p.channel, p.device, p.retain, p.qos, ts,
                                     p.payload), ts)
                         for p, ref in zip(prepared, refs, strict=True)])
                for p, ref in zip(prepared, refs, strict=True):
                    if p.complete and ref is not None:
                        conn.execute("UPDATE rounds SET complete = 1, ended_ts = ? WHERE id = ?", (ts, ref))
                if shoes.anchor != self._shoes.anchor:  # pads as they stood before the new shoe's first input
                    conn.execute("DELETE FROM anchor_spots WHERE which = 0")
                    if self._shoes.anchor is not None:
                        conn.execute("UPDATE anchor_spots SET which = 0 WHERE which = 1")
                    conn.execute("DELETE FROM anchor_spots WHERE which = 1")
                    conn.execute("INSERT INTO anchor_spots SELECT 1, device, spot, input_id FROM spots")
                if isinstance(inp.event, SpotChanged):
                    conn.execute("INSERT INTO spots VALUES (?, ?, ?) ON CONFLICT(device, spot) DO UPDATE SET "
                                 "input_id = excluded.input_id", (inp.event.device, inp.event.spot, input_id))
                if device is not None and device_seq is not None:
                    conn.execute("INSERT INTO devices VALUES (?, ?, ?) ON CONFLICT(device) DO UPDATE SET "
                                 "last_seq = excluded.last_seq, input_id = excluded.input_id",
                                 (device, device_seq, input_id))
                last_seq = self._last_seq + len(prepared)
                conn.execute("UPDATE meta SET last_seq = ?, last_input = ?, current_round = ?, "
                             "shoe_anchor = ?, current_shoe = ?, replay_anchor = ?, replay_shoe = ? "
                             "WHERE id = 1",
                             (last_seq, input_id, current, shoes.anchor, shoes.current, shoes.replay_anchor,
                              shoes.replay_shoe))
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise classify_sqlite_error(exc, "append") from None
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            self._last_seq, self._last_input = last_seq, input_id
            self._current_round, self._shoes = current, shoes
        return [OutboxRow(row_id=p.row_id, seq=p.row_id, msg_id=p.msg_id, channel=p.channel, device=p.device,
                          payload=p.payload, retain=p.retain, qos=p.qos) for p in prepared]

    def _round_ref(self, conn: sqlite3.Connection, p: _Prepared, input_id: int, ts: str) -> int:
        assert p.round_key is not None
        shoe, rnd = p.round_key
        row = conn.execute("SELECT id FROM rounds WHERE shoe IS ? AND round IS ?", (shoe, rnd)).fetchone()
        if row is not None:
            return int(row[0])
        cur = conn.execute("INSERT INTO rounds (shoe, round, first_input, first_row, started_ts) "
                           "VALUES (?, ?, ?, ?, ?)", (shoe, rnd, input_id, p.row_id, ts))
        assert cur.lastrowid is not None
        return cur.lastrowid

    # ------------------------------------------------------------------ relay side

    def pending(self, limit: int = 100, after_row: int = 0) -> list[OutboxRow]:
        """Up to ``limit`` undelivered rows with ``row_id > after_row``, in ``seq`` order.

        Memory is bounded by ``limit`` (an indexed range query, never a full load). Raises
        :class:`JournalDamaged` if a row fails its checksum, ``ValueError`` for ``limit < 1``.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        with self._lock:
            try:
                rows = self._db().execute(
                    f"SELECT {_OUTBOX_COLS} FROM outbox INDEXED BY outbox_pending "
                    "WHERE delivered_at IS NULL AND row_id > ? ORDER BY row_id LIMIT ?",
                    (after_row, limit)).fetchall()
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
            return [self._checked_row(r) for r in rows]

    def mark_delivered(self, row_id: int) -> None:
        """Record the broker's acknowledgement of row ``row_id`` (idempotent).

        The mark is committed without an fsync of its own (``synchronous=NORMAL`` for this one statement):
        losing it to a power cut only means the row is published once more after restart, which
        consumers drop by ``msg_id``; the next append's fsync makes it durable anyway. Raises ``KeyError``
        for a row the journal does not hold, :class:`JournalUnwritable` when the write fails.
        """
        with self._lock:
            conn = self._db()
            try:
                conn.execute("PRAGMA synchronous=NORMAL")
                try:
                    cur = conn.execute("UPDATE outbox SET delivered_at = ? WHERE row_id = ? "
                                       "AND delivered_at IS NULL", (_now(), row_id))
                finally:
                    conn.execute("PRAGMA synchronous=FULL")
                if cur.rowcount == 0 and conn.execute("SELECT 1 FROM outbox WHERE row_id = ?",
                                                      (row_id,)).fetchone() is None:
                    raise KeyError(f"journal holds no outbox row {row_id}")
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "mark_delivered") from None

    def pending_count(self) -> int:
        """How many rows await the broker's acknowledgement."""
        with self._lock:
            try:
                return int(self._db().execute(
                    "SELECT count(*) FROM outbox INDEXED BY outbox_pending WHERE delivered_at IS NULL"
                ).fetchone()[0])
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None

    def retained_latest(self) -> list[OutboxRow]:
        """The latest *delivered* row of every retained ``(channel, device)``, in ``seq`` order: what the
        relay republishes after a reconnect (the broker may have lost retained messages: a broker
        restarted without persistence, or from an old persistence file). Undelivered retained rows are
        not included: the relay publishes them in order
        anyway, and republishing them early would break the table-wide ``seq`` order."""
        with self._lock:
            try:
                rows = self._db().execute(
                    f"SELECT {_OUTBOX_COLS} FROM outbox WHERE row_id IN ({_LATEST_RETAINED}) ORDER BY row_id"
                ).fetchall()
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
            return [self._checked_row(r) for r in rows]

    # ------------------------------------------------------------------ recovery

    def replay_inputs(self) -> Iterator[TimedInput]:
        """The journaled inputs needed to rebuild the state machine after a crash, in arrival order,
        decoded back into ``TimedInput(ts, event)`` with the real event types (``CardDrawn``...,
        ``DeviceState``, ``Command``): every input since the start of the PREVIOUS shoe (since the
        journal's first input while it holds fewer than three shoes).

        A shoe starts at the input whose messages first carried its number (the machine's own judgement:
        normally the shoe's ``NEW_SHOE`` event or a ``new_shoe`` command). One shoe back, not just the
        current shoe, because the machine carries state across a shoe change (cards set aside and spot
        changes between rounds go into the next round's record, the shoe number advances only when the
        old shoe had cards out): replaying from the current shoe's first input would rebuild a different
        first round. Rebuild with ``TableMachine(config, shoe=journal.replay_shoe)``, seed its pads with
        :meth:`pads_before_replay`, then feed these (emits discarded: they are already in the outbox).
        :meth:`prune` never deletes inputs from the replay start on. Reads in chunks of 512 (bounded
        memory). Raises :class:`JournalDamaged` for a row failing its checksum or its decoding.
        """
        with self._lock:
            last = (self._shoes.replay_anchor or 1) - 1
        while True:
            with self._lock:
                try:
                    rows = self._db().execute(
                        "SELECT id, ts, kind, device, device_seq, payload, crc FROM inputs WHERE id > ? "
                        "ORDER BY id LIMIT ?", (last, _READ_CHUNK)).fetchall()
                except sqlite3.Error as exc:
                    raise classify_sqlite_error(exc, "read") from None
            if not rows:
                return
            for r in rows:
                if input_crc(r[0], r[1], r[2], r[3], r[4], r[5]) != r[6]:
                    raise JournalDamaged(f"journal {self.path}: input {r[0]} fails its checksum")
                yield TimedInput(ts=r[1], event=decode_event(r[2], bytes(r[5])))
            last = rows[-1][0]

    def pads_before_replay(self) -> list[TimedInput]:
        """The latest ``SpotChanged`` of every bet-pad spot as it stood just before the first input of
        :meth:`replay_inputs` (in arrival order), for seeding a rebuilt machine's pads: chips left on a
        spot are locked round after round without a new event, so theirs may precede the replay.
        Empty when the replay starts at the journal's beginning.
        Raises :class:`JournalDamaged` for a row failing its checksum."""
        with self._lock:
            if self._shoes.replay_anchor is None:
                return []
            try:
                rows = self._db().execute(
                    "SELECT i.id, i.ts, i.kind, i.device, i.device_seq, i.payload, i.crc FROM anchor_spots a "
                    "JOIN inputs i ON i.id = a.input_id WHERE a.which = 0 ORDER BY i.id").fetchall()
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
        out: list[TimedInput] = []
        for r in rows:
            if input_crc(r[0], r[1], r[2], r[3], r[4], r[5]) != r[6]:
                raise JournalDamaged(f"journal {self.path}: input {r[0]} fails its checksum")
            out.append(TimedInput(ts=r[1], event=decode_event(r[2], bytes(r[5]))))
        return out

    def current_round(self) -> tuple[Any, Any] | None:
        """``(shoe, round)`` of the latest round any message was about (the round in progress, or the one
        opened for betting), ``None`` before the first round."""
        with self._lock:
            if self._current_round is None:
                return None
            try:
                row = self._db().execute("SELECT shoe, round FROM rounds WHERE id = ?",
                                         (self._current_round,)).fetchone()
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
        return None if row is None else (row[0], row[1])

    @property
    def current_shoe(self) -> Any:
        """The shoe number of the latest message that carried one (``None`` before the first)."""
        return self._shoes.current

    @property
    def replay_shoe(self) -> Any:
        """The shoe number to build the machine with before :meth:`replay_inputs`: the shoe in play at
        the replay's first input (``None`` before the first shoe: use the machine's default)."""
        return self._shoes.replay_shoe

    def last_device_seq(self, device: str) -> int | None:
        """The device ``seq`` of the latest journaled event from ``device`` (``None`` if never heard), so
        the app can tell cards were missed while it was down (crash recovery, docs/journal.md)."""
        with self._lock:
            try:
                row = self._db().execute("SELECT last_seq FROM devices WHERE device = ?",
                                         (device,)).fetchone()
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
        return None if row is None else int(row[0])

    # ------------------------------------------------------------------ retention

    def prune(self, now: datetime | None = None) -> int:
        """Delete what retention no longer needs; returns the number of rows deleted.

        Whole rounds are deleted (their outbox rows, inputs and round entry) once they are older than
        the last ``retention_rounds`` complete rounds and, with ``retention_days``, completed more than
        that many days before ``now`` (default: the current UTC time; a round whose completion time
        cannot be read is kept). A round is kept whole while any of its messages is undelivered, while
        it holds the latest delivered row of a retained ``(channel, device)``, or while it has inputs
        the replay needs (from the current shoe's start on). Messages and inputs that belong to no round
        (device and table status) go when they are older than the oldest round kept, except the latest
        delivered retained row per topic. So the current round and at least the 9 before it always stay
        available to recall, and undelivered rows are never deleted.
        """
        with self._lock:
            conn = self._db()
            try:
                cutoff = conn.execute(
                    "SELECT id, first_input, first_row FROM rounds INDEXED BY rounds_complete "
                    "WHERE complete = 1 ORDER BY id DESC LIMIT 1 OFFSET ?", (self._retention - 1,)).fetchone()
                if cutoff is not None and self._retention_days is not None:
                    moment = (now or datetime.now(UTC)).timestamp() / 86400.0 + 2440587.5  # Julian day
                    cutoff = conn.execute(
                        "SELECT id, first_input, first_row FROM rounds INDEXED BY rounds_complete "
                        "WHERE complete = 1 AND id <= ? AND julianday(ended_ts) <= ? "
                        "ORDER BY id DESC LIMIT 1",
                        (cutoff[0], moment - self._retention_days)).fetchone()
                if cutoff is None:
                    return 0
                cutoff_round, first_input, first_row = cutoff
                anchor = self._shoes.replay_anchor if self._shoes.replay_anchor is not None else 1
                conn.execute("BEGIN IMMEDIATE")
                doomed = [r[0] for r in conn.execute(
                    "SELECT id FROM rounds r WHERE id < ? "
                    "AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.round_ref = r.id "
                    "AND o.delivered_at IS NULL) "
                    "AND NOT EXISTS (SELECT 1 FROM inputs i WHERE i.round_ref = r.id AND i.id >= ?) "
                    f"AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.round_ref = r.id AND o.row_id IN "
                    f"({_LATEST_RETAINED}))", (cutoff_round, anchor))]
                deleted = 0
                gone_rows: list[int] = []
                gone_inputs: list[int] = []
                for ref in doomed:
                    gone_rows += [r[0] for r in conn.execute(
                        "DELETE FROM outbox WHERE round_ref = ? RETURNING row_id", (ref,)).fetchall()]
                    gone_inputs += [r[0] for r in conn.execute(
                        f"DELETE FROM inputs WHERE round_ref = ? AND {_NOT_PADS} RETURNING id", (ref,)
                    ).fetchall()]
                    deleted += conn.execute("DELETE FROM rounds WHERE id = ?", (ref,)).rowcount
                oldest_row = conn.execute("SELECT min(first_row), min(first_input) FROM rounds").fetchone()
                keep_row = min(first_row, oldest_row[0] if oldest_row[0] is not None else first_row)
                keep_input = min(first_input, anchor,
                                 oldest_row[1] if oldest_row[1] is not None else first_input)
                gone_rows += [r[0] for r in conn.execute(
                    "DELETE FROM outbox WHERE round_ref IS NULL AND row_id < ? AND delivered_at IS NOT NULL "
                    f"AND row_id NOT IN ({_LATEST_RETAINED}) RETURNING row_id", (keep_row,)).fetchall()]
                gone_inputs += [r[0] for r in conn.execute(  # also a pad input a deleted round kept while
                    "DELETE FROM inputs WHERE (round_ref IS NULL OR round_ref NOT IN "  # it anchored the pads
                    f"(SELECT id FROM rounds)) AND id < ? AND {_NOT_PADS} RETURNING id", (keep_input,)
                ).fetchall()]
                deleted += len(gone_rows) + len(gone_inputs)
                marks = (max(self._marks[0], max(gone_rows, default=0) + 1),
                         max(self._marks[1], max(gone_inputs, default=0) + 1))
                if marks != self._marks:
                    conn.execute("UPDATE prune_marks SET outbox_below = ?, inputs_below = ? WHERE id = 1",
                                 marks)
                conn.execute("COMMIT")
                self._marks = marks
                return deleted
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise classify_sqlite_error(exc, "prune") from None

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Close the database and release the writer lock (idempotent)."""
        with self._lock:
            self._release()

    def _release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SCHEMA_NAMES = tuple(re.findall(r"CREATE (?:UNIQUE )?(?:TABLE|INDEX) (\w+)", DDL))
"""The tables and indexes of the schema, checked at open (:meth:`Journal._check_schema`)."""

_PRUNE_MARKS_DDL = ("CREATE TABLE IF NOT EXISTS prune_marks (id INTEGER PRIMARY KEY CHECK (id = 1), "
                    "outbox_below INTEGER NOT NULL, inputs_below INTEGER NOT NULL)")
"""Retention watermarks (:meth:`Journal._prune_marks`); added beside schema version 1, created at open."""

_NOT_PADS = ("id NOT IN (SELECT input_id FROM spots) AND id NOT IN (SELECT input_id FROM anchor_spots)")
_OUTBOX_COLS = "row_id, msg_id, schema, channel, device, retain, qos, created_ts, payload, crc"
_LATEST_RETAINED = ("SELECT max(row_id) FROM outbox INDEXED BY outbox_retained WHERE retain = 1 "
                    "AND delivered_at IS NOT NULL GROUP BY channel, device")
