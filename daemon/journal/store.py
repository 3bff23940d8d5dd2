"""The write-ahead journal and transactional outbox, sealed (docs/journal.md).

One SQLite file, ``journal.sqlite``, in the configured journal directory, in WAL mode with
``synchronous=FULL`` so that a committed append survives power loss, not only a process crash
(https://www.sqlite.org/pragma.html#pragma_synchronous). For each input the app calls
:meth:`Journal.append` with the input and the messages the state machine emitted for it; the input row
and one row per message are written in ONE transaction *before* anything is published. A single relay
publishes :meth:`Journal.pending` in order and calls :meth:`Journal.mark_delivered` on the broker's
acknowledgement, so after a reconnect or restart it resumes from the first undelivered row with the same
``msg_id`` (at-least-once; consumers drop duplicates by ``msg_id``).

Every row (inputs, messages, delivery marks, retention) is sealed in one HMAC-SHA256 hash chain under
the table's key, and the counters and bookkeeping in one sealed state record
(:mod:`daemon.journal.seal`, :mod:`daemon.journal.blocks`): a person with the file but not the key
cannot change, add, remove or reorder a row, nor lower a counter, without the journal saying so.

Only one process may write a journal (an exclusive ``flock`` on ``journal.lock``); any number may read it
(:mod:`daemon.journal.recall`, ``tablesense verify``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from tablesense.daemon.journal import blocks as bk
from tablesense.daemon.journal.blocks import Block, DeviceFacts, Header, Meta, State
from tablesense.daemon.journal.codec import decode_event, encode_event, event_device
from tablesense.daemon.journal.errors import JournalDamaged, JournalUnwritable, classify_sqlite_error
from tablesense.daemon.journal.key import DEFAULT_KEY_FILE, key_id, load_key
from tablesense.daemon.journal.seal import (
    BLOCK_MAX_BYTES,
    BLOCK_MAX_ENTRIES,
    UNIT_BLOCKS,
    InputRow,
    Linker,
    MarkRow,
    MessageRow,
    PruneRow,
    Row,
    decode_row,
    encode_row,
    genesis,
    hint,
    link,
    pack_unit,
    seal,
)
from tablesense.daemon.messages import FloorRound
from tablesense.daemon.table.inputs import RESEND_WINDOW, DeviceSeed, Emit, TimedInput
from tablesense.drivers.events import LinkState, ShoeStatusKind, SpotChanged

__all__ = [
    "HEAD_RECORD_BYTES",
    "JOURNAL_FILE",
    "LOCK_FILE",
    "MIN_RETENTION_ROUNDS",
    "OFF_LOOP",
    "ROUND_COMPLETE_SCHEMAS",
    "Journal",
    "OutboxRow",
    "check_head_record",
    "head_record",
    "message_round",
    "message_schema",
]

JOURNAL_FILE = "journal.sqlite"
"""The database file inside the journal directory."""
LOCK_FILE = "journal.lock"
"""The writer's lock file; it also holds the last chain head this writer committed (:meth:`_record_head`)."""
MIN_RETENTION_ROUNDS = 10
"""Game recall keeps the current round and at least the 9 before it (AGCO "most recent game plus 9
prior", Fla. Admin. Code 75-14.043 "last 10 games")."""
ROUND_COMPLETE_SCHEMAS = bk.ROUND_COMPLETE_SCHEMAS
"""Message schemas that mark their round complete (the floor record is published once a round ends)."""

MARK_BATCH = 256
"""Acknowledgements recorded together: a mark entry is written once this many are waiting, ..."""
MARK_DELAY = 5.0
"""... or once the oldest has waited this long (seconds), or with the next append, whichever is first."""
UNACKED_MAX = 100_000
"""Messages appended by this process and not yet acknowledged that are tracked in memory (beyond it,
:meth:`Journal.mark_delivered` asks the file)."""
RECENT_BYTES = 8 << 20
"""Messages this process appended are kept in memory (up to this many payload bytes) so the relay
reads what it was just handed without a round trip to the file."""
PRUNE_BATCH = 16
"""Blocks deleted per retention transaction (one archive unit: the lock is held for a few ms)."""
VACUUM_STEP = 64
"""Pages freed per ``PRAGMA incremental_vacuum`` step (256 KiB with 4 KiB pages)."""
WAL_LIMIT = 8 << 20
"""``PRAGMA journal_size_limit``: the WAL file is truncated to this size when it restarts."""
WAL_CHECKPOINT_AT = 64 << 20
"""A WAL this large is checkpointed by the next write itself (normally :meth:`Journal.prune` does it
in the background long before: the writer's automatic checkpoint is off, so no append pays for one)."""

OFF_LOOP = "off-loop"
"""What a maintenance step yields (:meth:`Journal.maintenance`) when the step after it may take long
(a retention step looking through many messages awaiting the broker, an archive unit of unusually large
blocks to compress): a caller running the steps on an event loop runs that one in a worker thread."""
LONG_PENDING = 2_000
"""Messages awaiting the broker above which a retention step is announced :data:`OFF_LOOP` (finding
their blocks costs a few microseconds each)."""
LONG_UNIT_BYTES = 2 << 20
"""Raw bytes of an archive unit above which compressing it is announced :data:`OFF_LOOP` (a 17-spot
baccarat unit is 0.6-1.0 MB, growing with the shoe's scoreboard, and compresses in about 1.5 ms)."""

_YIELD_ROWS = 32
"""Rows a maintenance loop handles between two looks for appends in flight (:meth:`_after_appends`)."""

_WAL_MAGIC = (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83")
"""The first 4 bytes of a WAL file (https://www.sqlite.org/fileformat.html#wal_file_format)."""

HEAD_MAGIC = b"TSJ2"
HEAD_RECORD_BYTES = 4 + 8 + 8 + 8 + 32 + 32
"""The head record in ``journal.lock``: magic, epoch, entry, last seq, chain head, seal."""

_CHECKED_TABLES = ("meta", "state", "blocks", "pending", "log", "outbox")
"""Tables ``PRAGMA quick_check`` covers at every open (all but the archive, whose rows are sealed and
read whole; docs/journal.md "Start-up")."""


def head_record(key: bytes, epoch: str, state: State) -> bytes:
    """The head record written into ``journal.lock`` after every commit: magic, the journal's epoch, the
    last entry, the last seq, the chain head, and an HMAC of all of it."""
    body = (HEAD_MAGIC + epoch.encode().ljust(8, b"\0")[:8] + state.entry.to_bytes(8, "big")
            + state.last_seq.to_bytes(8, "big") + state.head)
    return body + seal(key, b"tablesense journal head", body)


def check_head_record(data: bytes, key: bytes, epoch: str | None, state: State | None, where: str,
                      conn: sqlite3.Connection | None = None) -> None:
    """Raise :class:`JournalDamaged` when the head record ``data`` (read from ``journal.lock``) was sealed
    with this table's key and does not match the journal: ahead of ``state`` (committed rows lost: the WAL
    deleted, the file restored from an older copy), of another journal (``epoch`` differs: the file was
    replaced), or of a journal that is gone (``state`` ``None``: the file was deleted or emptied); and,
    given the journal's connection ``conn``, when the file is further ahead but its chain does not pass
    through the recorded head at the recorded entry and seq (the file replaced by a diverged copy of the
    same journal: a cloned disk, same epoch and key). That check recomputes the one block holding the
    recorded entry (start-up stays bounded); an entry below the retention base was deleted legitimately
    and is not checked. A missing or unreadable record, or one sealed with another key, says nothing and
    passes (docs/journal.md "Lost rows")."""
    if len(data) != HEAD_RECORD_BYTES or not data.startswith(HEAD_MAGIC):
        return
    body, mac = data[:-32], data[-32:]
    if seal(key, b"tablesense journal head", body) != mac:
        return
    recorded = body[4:12].rstrip(b"\0").decode(errors="replace")
    entry = int.from_bytes(body[12:20], "big")
    last_seq = int.from_bytes(body[20:28], "big")
    head = body[28:60]
    move = f"if that was intended, move {LOCK_FILE} aside with it"
    if state is None or epoch is None:
        raise JournalDamaged(
            f"{where} holds no journal, but {LOCK_FILE} records journal epoch {recorded} written up to seq "
            f"{last_seq}: the journal file was deleted or lost its rows; {move}")
    if recorded != epoch:
        raise JournalDamaged(
            f"{where} is journal epoch {epoch}, but {LOCK_FILE} records journal epoch {recorded} written up "
            f"to seq {last_seq}: the journal file was replaced; {move}")
    if entry > state.entry or (entry == state.entry and head != state.head):
        raise JournalDamaged(
            f"{where} is behind the last head its writer recorded in {LOCK_FILE} (entry {entry}, seq "
            f"{last_seq}; the file holds entry {state.entry}, seq {state.last_seq}): committed rows were "
            "lost (its WAL file deleted, or the file restored from an older copy)")
    if conn is not None and entry < state.entry and entry >= state.base:
        at = _link_after_entry(conn, key, state, entry)
        if at != (last_seq, head):
            raise JournalDamaged(
                f"{where} does not pass through the head its writer recorded in {LOCK_FILE} (entry {entry}, "
                f"seq {last_seq}; the file holds entry {state.entry}, seq {state.last_seq}): the journal "
                f"file was replaced by a diverged copy of this journal; {move}")


def _link_after_entry(conn: sqlite3.Connection, key: bytes, state: State, entry: int
                      ) -> tuple[int, bytes] | None:
    """``(seq, link)`` of the file's chain just after entry ``entry`` and its messages (what the writer's
    head was when it committed it), recomputed over the block holding it; ``None`` when no block does."""
    block = bk.block_of_entry(conn, state, entry)
    if block is None:
        return None
    blobs, _ = bk.block_blobs(conn, block)
    current, seq = block.link_before, block.first_seq - 1
    found: tuple[int, bytes] | None = None
    for blob in blobs:
        row = decode_row(blob, block.label)
        if isinstance(row, MessageRow):
            seq = row.seq
        elif row.entry > entry:
            break
        current = link(key, current, blob)
        if row.entry == entry:
            found = (seq, current)
    return found


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One message waiting for (or past) delivery.

    ``row_id`` and ``seq`` are equal: the table-wide sequence number, monotonic across restarts.
    ``msg_id`` is ``"{table}-{epoch}-{seq}-{8 random hex digits}"``, drawn when the message is journaled
    and stored with it (so never reused for other content, whatever happens to the file).
    ``channel`` is the state machine's channel value (``"round"``, ``"settlements"``...), ``device`` the
    device name for ``devices/{name}``, ``payload`` the message JSON with ``seq`` and ``msg_id`` filled in.
    """

    row_id: int
    seq: int
    msg_id: str
    channel: str
    device: str | None
    payload: bytes
    retain: bool
    qos: int


def _outbox_row(row: MessageRow) -> OutboxRow:
    return OutboxRow(row_id=row.seq, seq=row.seq, msg_id=row.msg_id, channel=row.channel, device=row.device,
                     payload=row.payload, retain=row.retain, qos=row.qos)


def message_schema(message: Any) -> str:
    """The ``schema`` tag of a msgspec message Struct (its class name unless the model sets a tag),
    looked up once per message class (asked for every message journaled)."""
    cls = type(message)
    schema = _SCHEMAS.get(cls)
    if schema is None:
        config = getattr(cls, "__struct_config__", None)
        tag = getattr(config, "tag", None)
        schema = _SCHEMAS[cls] = str(tag) if tag is not None else cls.__name__
    return schema


_SCHEMAS: dict[type, str] = {}


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


def _topic(channel: str, device: str | None) -> str:
    return channel if device is None else f"{channel}\x1f{device}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _iso(moment: float) -> str:
    """A ``time.time()`` value as ISO 8601 UTC with milliseconds and ``Z``."""
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# The fields of DeviceFacts after ``device``, as the writer keeps them (a list per device)
(_SEQ, _SESSION, _LINK, _LOST, _CARDS, _FRAMES, _LAST, _LAST_REJECTED, _FIRST, _FIRST_SESSION, _NEXT,
 _NEXT_SESSION, _NEXT_FRAMES) = range(13)
_NEW_FACTS: tuple[Any, ...] = msgspec.structs.astuple(DeviceFacts(""))[1:]
_NOTED_KINDS = frozenset({"RejectedInput", "DeviceIdentity", "CardDrawn", "CardUnreadable", "ShoeStatus"})
"""Frame kinds that change more of a device's facts than its frame count and latest entry."""


class _Working:
    """The fields of :class:`State` that most inputs change, kept mutable while a batch is chained (one
    tuple and one dict built per transaction instead of per input): ``spots`` maps ``(device, spot)`` to
    the entry of its latest ``SpotChanged``, in the order of those changes (``State.spots``), ``devices``
    each device's latest seq; and ``facts``, the :class:`DeviceFacts` (as lists) of each device with an
    input in the batch, copied from the writer's (``live``), which the batch's commit updates."""

    __slots__ = ("_live", "devices", "facts", "spots")

    def __init__(self, state: State, live: dict[str, list[Any]]) -> None:
        self.spots: dict[tuple[str, str], int] = {(d, s): e for d, s, e in state.spots}
        self.devices: dict[str, int] = dict(state.devices)
        self.facts: dict[str, list[Any]] | None = None
        self._live = live

    def spot_rows(self) -> tuple[tuple[str, str, int], ...]:
        """``State.spots`` as it stands now."""
        return tuple((d, s, e) for (d, s), e in self.spots.items())

    def fact_rows(self) -> tuple[DeviceFacts, ...]:
        """The devices' facts as they stand now."""
        return _fact_rows(self._live if not self.facts else {**self._live, **self.facts}, self.devices)

    def note_device(self, device: str, seq: int | None, entry: int, kind: str, event: Any) -> None:
        """Input ``entry`` (of ``kind``) came from ``device``, with its sequence number ``seq`` (a frame)
        or without (a ``DeviceState``; any other input without a number is not the device's): its latest
        seq and its :class:`DeviceFacts`, as the machine's bookkeeping takes them (``_on_device_event``,
        ``_on_device_state``, ``_on_rejected``). A few assignments per input, nothing scanned."""
        facts = self.facts
        if facts is None:
            facts = self.facts = {}
        f = facts.get(device)
        if f is None:  # its first input of the batch: a copy (a failed commit changes nothing)
            live = self._live.get(device)
            f = facts[device] = live.copy() if live is not None else list(_NEW_FACTS)
        if seq is None:
            if kind == "DeviceState":
                f[_LINK] = event.state.value
                if event.state is LinkState.DISCONNECTED:
                    f[_LOST] = entry
            return
        self.devices[device] = seq
        frames = f[_FRAMES] = f[_FRAMES] + 1
        if frames - f[_NEXT_FRAMES] > RESEND_WINDOW:  # the frames from `next` on fill a window: move on
            f[_FIRST], f[_FIRST_SESSION] = f[_NEXT], f[_NEXT_SESSION]
            f[_NEXT], f[_NEXT_SESSION], f[_NEXT_FRAMES] = entry, f[_SESSION], frames
        elif frames == 1:  # its first frame: the frames from it on are all of them
            f[_FIRST] = f[_NEXT] = entry
            f[_FIRST_SESSION] = f[_NEXT_SESSION] = f[_SESSION]
            f[_NEXT_FRAMES] = 1
        if kind not in _NOTED_KINDS:  # most frames: chips, buttons, heartbeats
            f[_LAST] = entry
        elif kind == "RejectedInput":  # counts as received, nothing of it applied
            f[_LAST_REJECTED] = entry
        else:
            f[_LAST] = entry
            if kind == "DeviceIdentity":
                f[_SESSION] = event.session
            elif kind != "ShoeStatus" or event.kind is ShoeStatusKind.BURN:
                f[_CARDS] = True

    def state(self, state: State) -> State:
        """``state`` with the batch's pads and device numbers."""
        return msgspec.structs.replace(state, spots=self.spot_rows(), devices=self.devices)


def _fact_rows(facts: dict[str, list[Any]], devices: dict[str, int]) -> tuple[DeviceFacts, ...]:
    """:class:`DeviceFacts` records of the lists the writer keeps, with each device's last sequence number
    from ``devices`` (``State.devices``)."""
    return tuple(DeviceFacts(device, devices.get(device), *f[1:]) for device, f in facts.items())


def _after_shoes(state: State, entry: int, shoes: Sequence[Any], spots: tuple[tuple[str, str, int], ...],
                 facts: tuple[DeviceFacts, ...] | None) -> dict[str, Any]:
    """Shoe bookkeeping after input ``entry`` whose messages carry the shoe numbers ``shoes``: the input
    whose messages first carry a new shoe number started that shoe (the machine's judgement). ``spots``
    and ``facts``: ``State.spots`` and the devices' facts before this input. Returns the changed
    :class:`State` fields (the pads and the device facts as they stood are snapshotted at each new
    shoe)."""
    current, anchor, replay_anchor, replay_shoe = (state.shoe, state.shoe_anchor, state.replay_anchor,
                                                   state.replay_shoe)
    anchor_spots, replay_spots = state.anchor_spots, state.replay_spots
    anchor_facts, replay_facts = state.anchor_device_facts, state.replay_device_facts
    for shoe in shoes:
        if shoe is None or shoe == current:
            continue
        if current is None:  # the first shoe: replay from the journal's beginning
            current, replay_shoe = shoe, shoe
        elif anchor is None:  # the second shoe: the replay still covers the first from the beginning
            current, anchor, anchor_spots, anchor_facts = shoe, entry, spots, facts
        else:
            replay_anchor, replay_shoe = anchor, current
            replay_spots, replay_facts = anchor_spots, anchor_facts
            current, anchor, anchor_spots, anchor_facts = shoe, entry, spots, facts
    return {"shoe": current, "shoe_anchor": anchor, "replay_anchor": replay_anchor,
            "replay_shoe": replay_shoe, "anchor_spots": anchor_spots, "replay_spots": replay_spots,
            "anchor_device_facts": anchor_facts, "replay_device_facts": replay_facts}


def _window_needed(facts: DeviceFacts, now: dict[str, DeviceFacts]) -> bool:
    """The frames of ``facts``' window (a snapshot, or the facts ``now``) may still be in a rebuilt machine's
    memory: the device has sent fewer than a window of frames since (any more and the replay refills it)."""
    latest = now.get(facts.device)
    return latest is None or latest.frames - facts.frames < RESEND_WINDOW


def _unarchived(block: Block | None) -> Block | None:
    """``block`` as before archiving (archiving changes only its ``unit``)."""
    return None if block is None else dataclasses.replace(block, unit=0)


def _merge_ranges(seqs: Iterable[int]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for s in sorted(set(seqs)):
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return tuple(out)


class _Batch:
    """Rows of one transaction being chained from the current head (append, mark flush, prune)."""

    def __init__(self, linker: Linker, state: State) -> None:
        self.linker = linker
        self.entry = state.entry
        self.seq = state.last_seq
        self.link = state.head
        self.log: list[tuple[int, bytes, bytes]] = []
        self.outbox: list[tuple[int, bytes, bytes]] = []
        self.new_entries = 0
        self.new_bytes = 0

    def add(self, blob: bytes) -> bytes:
        self.link = self.linker(self.link, blob)
        self.new_bytes += len(blob)
        return hint(self.link)

    def take(self) -> tuple[int, int]:
        """Entries and bytes chained since the last call (for the open block's accounting)."""
        counts = self.new_entries, self.new_bytes
        self.new_entries = self.new_bytes = 0
        return counts

    def entry_row(self, make: Any) -> Row:
        self.new_entries += 1
        self.entry += 1
        row: Row = make(self.entry)
        blob = encode_row(row)
        self.log.append((self.entry, blob, self.add(blob)))
        return row

    def message_row(self, row: MessageRow) -> None:
        blob = encode_row(row)
        self.outbox.append((row.seq, blob, self.add(blob)))


class Journal:
    """The table's sealed write-ahead journal and outbox.

    ``Journal(directory, table, key=None, retention_rounds=1000, retention_days=None, max_size=None,
    max_size_bytes=None)`` creates ``directory/journal.sqlite`` (and the directory) if missing, or opens
    it and checks it (docs/journal.md "Start-up"): the schema and ``PRAGMA quick_check`` of every table
    but the archive, the journal's table and key, the sealed state record, the head recorded in the lock
    file (a journal behind it lost rows: WAL deleted, file restored from a copy), the count of pending
    messages against the sealed counters, and the chain of every block from the replay's start to the
    head. ``key``: the table's sealing key (bytes, at least 32); ``None`` reads the default credential
    (:func:`daemon.journal.key.load_key`).

    Raises :class:`JournalDamaged` when a check fails (incl. a journal sealed with another key),
    :class:`JournalUnwritable` when the file cannot be created/written or another process holds it,
    :class:`~daemon.journal.key.JournalKeyError` when ``key`` is ``None`` and no key can be read,
    ``ValueError`` for ``retention_rounds < 10`` or a short key.

    Retention (:meth:`prune`): a round's block is deleted once it is older than the last
    ``retention_rounds`` complete rounds *and*, when ``retention_days`` is set, it ended more than that
    many days ago; and, when the file's used size exceeds ``max_size`` bytes, older rounds are deleted
    (never the last 10, the replay, or a message not yet acknowledged) until it fits. ``max_size_bytes``
    is a hard cap (SQLite ``max_page_count``): an append past it raises :class:`JournalUnwritable`.

    All methods are thread-safe (one internal lock); the connection is not shared with other processes.
    """

    def __init__(self, directory: Path | str, table: str, *, key: bytes | None = None,
                 retention_rounds: int = 1000, retention_days: float | None = None,
                 max_size: int | None = None, max_size_bytes: int | None = None) -> None:
        if retention_rounds < MIN_RETENTION_ROUNDS:
            raise ValueError(f"retention_rounds must be at least {MIN_RETENTION_ROUNDS} (game recall keeps "
                             f"the current round and the 9 before it), got {retention_rounds}")
        if not table:
            raise ValueError("table id must not be empty")
        if retention_days is not None and retention_days < 0:
            raise ValueError(f"retention_days must not be negative, got {retention_days}")
        if max_size is not None and max_size < 1 << 20:
            raise ValueError(f"max_size must be at least 1 MiB, got {max_size}")
        self._key = load_key(DEFAULT_KEY_FILE) if key is None else bytes(key)
        self._linker = Linker(self._key)
        if len(self._key) < 32:
            raise ValueError("the journal key must be at least 32 bytes")
        self._dir = Path(directory)
        self._table = table
        self._retention = retention_rounds
        self._retention_days = retention_days
        self._max_size = max_size
        self._max_size_bytes = max_size_bytes
        self._lock = threading.RLock()
        self._maintenance = threading.Lock()
        self._stopping = threading.Event()
        self._appending = 0
        self._appending_lock = threading.Lock()
        self._lock_fd: int | None = None
        self._conn: sqlite3.Connection | None = None
        self._recent: OrderedDict[int, OutboxRow] = OrderedDict()
        self._recent_bytes = 0
        self._blocks_cache: OrderedDict[int, list[Row]] = OrderedDict()
        self._units = bk.UnitCache()
        self._startup_rows: dict[int, list[Row]] = {}
        self._facts_checked: dict[int, Block] = {}
        """Closed blocks whose round and times retention checked against their rows, as they were then."""
        self._facts: dict[str, list[Any]] = {}
        """Each device's :class:`DeviceFacts` (as a list of the fields after ``device``) as of the head."""
        self._marked: dict[int, None] = {}
        self._marked_since = 0.0
        self._marked_at = 0.0
        self._unacked: set[int] = set()
        self._db_id: tuple[int, int] | None = None
        self._wal_id: tuple[int, int] | None = None
        self._wal_size = 0
        """The WAL's size after this writer's latest write: only a checkpoint of ours may shrink it."""
        self._wal_lost = False
        """The WAL was truncated under this writer: its frames are gone and must never be checkpointed."""
        self._broken: str | None = None
        try:
            self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # created private (see _open)
            self._lock_fd = os.open(self._dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            self._release()
            raise JournalUnwritable(f"journal directory {self._dir} is not writable: {exc}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._release()
            raise JournalUnwritable(f"journal {self.path} is in use by another tablesense process") from None
        try:
            self._open()
        except sqlite3.Error as exc:
            self._release()
            if re.search(r"no such (table|column|index)|has no column", str(exc)):  # an altered schema
                raise JournalDamaged(f"journal {self.path}: schema altered: {exc}") from None
            raise classify_sqlite_error(exc, "open") from None
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------------ properties

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
        return self._meta.epoch

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the latest message (0 for a new journal)."""
        return self._state.last_seq

    def chain_head(self) -> tuple[int, str]:
        """``(chain_seq, chain_head)``: the highest message ``seq`` the chain head covers, and the head
        (64 lowercase hex digits: the HMAC-SHA256 link after the last row, delivery marks included).
        Never blocks (safe from the event loop); :meth:`messages_by_seq` and the other reads do I/O and
        take the journal's lock: call them from a worker thread."""
        state = self._state  # one immutable record, replaced whole by each commit: no lock needed
        return state.last_seq, state.head.hex()

    # ------------------------------------------------------------------ open / check

    def _open(self) -> None:
        existed = self.path.exists() and self.path.stat().st_size > 0
        if not existed:
            self._check_head_record(None)  # no journal here: was there one? (then nothing is created)
            # created owner-only whatever the umask: it holds every face-down card of the completed
            # rounds (SQLite gives the WAL and its index the journal file's mode)
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            except OSError as exc:
                raise JournalUnwritable(f"journal {self.path} cannot be created: {exc}") from None
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10.0)
        self._conn = conn
        conn.execute("PRAGMA busy_timeout=10000")
        if existed:
            self._quick_check(conn)
        else:
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # before the first table: space is reclaimed
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise JournalUnwritable(f"journal {self.path}: cannot switch to WAL mode (got {mode!r})")
        self._configure(conn)
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        has_tables = conn.execute("SELECT count(*) FROM sqlite_schema WHERE type='table'").fetchone()[0]
        if version == 0 and not has_tables:
            self._check_head_record(None)  # no journal here: was there one?
            self._create(conn)
        header = bk.read_header(conn, self._key, str(self.path))
        problem = bk.schema_problem(conn, str(self.path))  # a planted trigger/view, a redefined table
        if problem is not None:
            raise JournalDamaged(problem)
        if header.meta.table != self._table:
            raise JournalDamaged(f"journal {self.path} belongs to table {header.meta.table!r}, not "
                                 f"{self._table!r}")
        self._meta, self._state = header.meta, header.state
        if existed:
            self._check_head_record(header)
            self._check_pending(conn)
            beyond = bk.rows_beyond_head(conn, self._state, str(self.path))
            if beyond is not None:  # unsealed rows every append would collide with, for ever
                raise JournalDamaged(beyond)
            self._verify_tail(conn)
            self._facts = self._rebuild_facts()
        self._db_name, self._wal_name = str(self.path), str(self._wal_path)
        self._db_id = self._file_id(self._db_name)
        self._wal_id = self._file_id(self._wal_name)
        self._note_wal()

    def _configure(self, conn: sqlite3.Connection) -> None:
        """The writer connection's settings: every commit fsynced; no automatic checkpoint in the commit
        (maintenance checkpoints in the background, :meth:`_checkpoint`); the WAL file truncated when it
        restarts; the hard size cap."""
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")
        if self._max_size_bytes is not None:
            page = int(conn.execute("PRAGMA page_size").fetchone()[0])
            conn.execute(f"PRAGMA max_page_count={max(1, self._max_size_bytes // page)}")

    def _quick_check(self, conn: sqlite3.Connection) -> None:
        """``PRAGMA quick_check`` of every table but the archive (whose rows are sealed and read whole),
        so start-up does not grow with the journal (docs/journal.md "Start-up")."""
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
            for name in _CHECKED_TABLES:
                if name not in tables:
                    continue
                problems = [r[0] for r in conn.execute(f"PRAGMA quick_check({name})")]
                if problems != ["ok"]:
                    raise JournalDamaged(f"journal {self.path} failed its integrity check ({name}): "
                                         f"{'; '.join(problems[:3])}")
        except sqlite3.DatabaseError as exc:
            raise JournalDamaged(f"journal {self.path} is damaged: {exc}") from None

    def _create(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:  # statement by statement: executescript() would COMMIT on its own
            for statement in bk.DDL.split(";"):
                if statement.strip():
                    conn.execute(statement)
            meta = Meta(bk.SCHEMA_VERSION, self._table, secrets.token_hex(4), _now(), key_id(self._key))
            conn.execute("INSERT INTO meta VALUES (1, ?, ?, ?, ?, ?)",
                         (meta.schema_version, meta.table, meta.epoch, meta.created_at, meta.key_id))
            origin = genesis(self._key, meta.table, meta.epoch, meta.created_at)
            state = State(head=origin, open_link=origin, open_ts=meta.created_at)
            data = bk.encode_state(state)
            conn.execute("INSERT INTO state VALUES (1, ?, ?)", (data, bk.state_seal(self._key, meta, data)))
            conn.execute(f"PRAGMA user_version={bk.SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _check_pending(self, conn: sqlite3.Connection) -> None:
        """The pending messages are exactly as many as the sealed counters say (a row marked delivered
        behind the journal's back, or un-marked, changes the count) and none is beyond ``last_seq``."""
        count, top = conn.execute("SELECT count(*), max(seq) FROM pending").fetchone()
        expected = self._state.last_seq - self._state.delivered
        if count != expected or (top is not None and top > self._state.last_seq):
            raise JournalDamaged(f"journal {self.path}: {count} message(s) await delivery, the sealed "
                                 f"counters say {expected}: delivery marks altered without the key")

    def _verify_tail(self, conn: sqlite3.Connection) -> None:
        """Recompute the chain of every block from the one holding the replay's first input to the head,
        and check that the blocks join: start-up is bounded by the replay (about two shoes), not by the
        journal's size. Older blocks are checked when read and by ``tablesense verify``."""
        state = self._state
        start = state.replay_anchor if state.replay_anchor is not None else state.base
        first = bk.block_of_entry(conn, state, max(start, state.base))
        if first is None:
            first = bk.block_of_entry(conn, state, state.open_entry) or bk.open_block(state)
        previous: Block | None = None
        unmarked: set[int] = set()
        for block in bk.blocks_after(conn, state, first.id):
            if previous is not None and (block.id != previous.last_entry + 1
                                         or block.link_before != previous.link_after
                                         or block.first_seq != previous.last_seq + 1):
                raise JournalDamaged(f"journal {self.path}: {block.label} does not follow {previous.label} "
                                     "(a block deleted or its links altered)")
            rows = bk.verified_rows(conn, self._key, block, self._units)
            self._startup_rows[block.id] = rows  # for the replay that follows the open
            for row in rows:
                if isinstance(row, MessageRow):
                    unmarked.add(row.seq)
                elif isinstance(row, MarkRow):
                    for lo, hi in row.ranges:
                        unmarked.difference_update(range(lo, hi + 1))
            previous = block
        # every message of the verified blocks is pending exactly when no mark entry acknowledged it
        held = {int(r[0]) for r in conn.execute("SELECT seq FROM pending WHERE seq >= ?", (first.first_seq,))}
        if held != unmarked:
            wrong = sorted(held ^ unmarked)
            raise JournalDamaged(f"journal {self.path}: delivery state of seq {wrong[0]} (and "
                                 f"{len(wrong) - 1} more) contradicts the sealed delivery marks: altered "
                                 "without the key")

    def _rebuild_facts(self) -> dict[str, list[Any]]:
        """The devices' facts at the head (:class:`DeviceFacts`): their snapshot at the current shoe's
        start, then every input since, taken as each append takes it, from the rows :meth:`_verify_tail`
        has just verified (they begin at the replay's start, at or before the current shoe's). A journal
        written before these facts were kept has no snapshot (``None``): from the replay's start then, as
        far back as the rows verified go. Raises :class:`JournalDamaged` for an input that cannot be
        decoded (the replay would fail on it too)."""
        state = self._state
        anchor: int | None = state.shoe_anchor
        snapshot = state.anchor_device_facts
        if anchor is None or snapshot is None:
            anchor, snapshot = None, ()
        live = {f.device: list(msgspec.structs.astuple(f)[1:]) for f in snapshot}
        work = _Working(state, live)
        for block_id in sorted(self._startup_rows):
            for row in self._startup_rows[block_id]:
                if isinstance(row, InputRow) and (anchor is None or row.entry >= anchor):
                    event = decode_event(row.kind, row.payload)
                    device, seq = event_device(event)
                    if device is not None:
                        work.note_device(device, seq, row.entry, row.kind, event)
        live.update(work.facts or {})
        return live

    # ------------------------------------------------------------------ the head record, file checks

    @property
    def _wal_path(self) -> Path:
        return self._dir / (JOURNAL_FILE + "-wal")

    @staticmethod
    def _file_id(path: Path | str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _record_head(self) -> None:
        """Write the committed head into the lock file (no fsync: it only ever lags the durable journal).
        A journal found *behind* this record at the next open lost committed rows."""
        if self._lock_fd is None:
            return
        with contextlib.suppress(OSError):
            os.pwrite(self._lock_fd, head_record(self._key, self._meta.epoch, self._state), 0)

    def _check_head_record(self, header: Header | None) -> None:
        assert self._lock_fd is not None
        try:
            data = os.pread(self._lock_fd, HEAD_RECORD_BYTES, 0)
        except OSError:
            return
        check_head_record(data, self._key, header.meta.epoch if header else None,
                          header.state if header else None, f"journal {self.path}", self._conn)

    def _note_wal(self) -> None:
        """Remember the WAL's size after a write of ours (0 when there is none), for :meth:`_check_wal`."""
        try:
            self._wal_size = os.stat(self._wal_name).st_size
        except OSError:
            self._wal_size = 0

    def _check_wal(self) -> None:
        """Before writing: the WAL was not truncated in place (same file, so :meth:`_check_files`' device
        and inode comparison cannot tell). Only this writer's own writes and checkpoints change its size
        (a reader or a passive checkpoint never shrinks it), so a WAL smaller than after our latest write,
        or one whose header no longer starts with the WAL magic (truncated, then written past the hole:
        https://www.sqlite.org/fileformat.html#the_write_ahead_log), lost committed frames. Writing on
        would commit (and acknowledge) rows into a WAL SQLite can no longer read, and a checkpoint would
        copy the hole into the journal file; so it raises :class:`JournalDamaged`, every later write too,
        and :meth:`close` keeps the damaged WAL out of the journal file (docs/journal.md "Lost rows")."""
        if self._broken is not None:
            raise JournalDamaged(self._broken)
        try:
            size = os.stat(self._wal_name).st_size
        except OSError:
            return  # deleted: _check_files recovers it
        problem: str | None = None
        if size < self._wal_size:
            problem = f"shrank from {self._wal_size} to {size} bytes"
        elif size >= 4:
            try:
                with open(self._wal_name, "rb") as f:
                    magic = f.read(4)
            except OSError:
                return
            if magic not in _WAL_MAGIC:
                problem = "lost its header"
        if problem is None:
            return
        self._wal_lost = True
        self._broken = (f"journal {self.path}: its WAL file was truncated while tablesense was running "
                        f"({problem}): the committed rows it held since the last checkpoint are lost; "
                        "nothing more is journaled (restart tablesense; the journal file keeps the rows "
                        "checkpointed before)")
        raise JournalDamaged(self._broken)

    def _check_files(self, conn: sqlite3.Connection) -> None:
        """Before writing: the journal file and its WAL are still the ones opened. A deleted or replaced
        WAL (whose committed rows SQLite still reaches through its open descriptor) is checkpointed into
        the journal file at once, so nothing is lost, and the connection is reopened; the write that
        found it raises :class:`JournalDamaged` so the failure is alarmed. A deleted or replaced journal
        file cannot be recovered here: every later write raises. A WAL truncated in place cannot be
        recovered either (:meth:`_check_wal`): every later write raises."""
        if self._broken is not None:
            raise JournalDamaged(self._broken)
        if self._file_id(self._db_name) != self._db_id:
            self._broken = (f"journal {self.path} was deleted or replaced while tablesense was running: "
                            "nothing more is journaled (restart tablesense)")
            raise JournalDamaged(self._broken)
        try:
            st = os.stat(self._wal_name)
            wal: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            st, wal = None, None
        if self._wal_id is None:
            self._wal_id = wal
            return
        if wal == self._wal_id:
            self._check_wal()
            if st is not None and st.st_size > WAL_CHECKPOINT_AT:  # maintenance is not running
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            return
        try:
            saved = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            conn.close()
            self._conn = conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                                timeout=10.0)
            conn.execute("PRAGMA busy_timeout=10000")
            conn.execute("PRAGMA journal_mode=WAL")
            self._configure(conn)
            header = bk.read_header(conn, self._key, str(self.path))
        except sqlite3.Error as exc:
            self._broken = f"journal {self.path}: its WAL file was deleted and recovery failed: {exc}"
            raise JournalDamaged(self._broken) from None
        if header.state != self._state:
            self._broken = (f"journal {self.path}: its WAL file was deleted while running and committed rows "
                            "could not be saved: nothing more is journaled")
            raise JournalDamaged(self._broken)
        self._wal_id = self._file_id(self._wal_path)
        self._note_wal()
        raise JournalDamaged(f"journal {self.path}: its WAL file was deleted or replaced while tablesense "
                             f"was running; the committed rows were saved into the journal file (checkpoint "
                             f"{tuple(saved) if saved else ''}) and the journal reopened; this input was not "
                             "journaled")

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise JournalUnwritable(f"journal {self.path} is closed")
        return self._conn

    # ------------------------------------------------------------------ writing

    def _commit(self, conn: sqlite3.Connection, batch: _Batch, state: State, *,
                pending: Sequence[tuple[int, str | None]] = (), marks: Sequence[tuple[int, int]] = (),
                blocks: Sequence[Block] = (), synchronous: bool = True) -> None:
        """Write ``batch``'s rows, the pending and mark bookkeeping, the closed ``blocks`` and the sealed
        ``state`` in one transaction; on failure roll back and raise the classified error."""
        data = bk.encode_state(state)
        sealed = bk.state_seal(self._key, self._meta, data)
        try:
            if conn.in_transaction:  # a previous failure left one open
                conn.execute("ROLLBACK")
            if not synchronous:
                conn.execute("PRAGMA synchronous=NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                if batch.log:
                    conn.executemany("INSERT INTO log VALUES (?, ?, ?)", batch.log)
                if batch.outbox:
                    conn.executemany("INSERT INTO outbox VALUES (?, ?, ?)", batch.outbox)
                if pending:
                    conn.executemany("INSERT INTO pending VALUES (?, ?)", pending)
                if marks:
                    conn.executemany("DELETE FROM pending WHERE seq BETWEEN ? AND ?", marks)
                if blocks:
                    conn.executemany("INSERT INTO blocks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                                     [(b.id, b.last_entry, b.first_seq, b.last_seq, b.shoe, b.round,
                                       b.started_ts, b.ended_ts, b.link_before, b.link_after)
                                      for b in blocks])
                conn.execute("UPDATE state SET data = ?, seal = ? WHERE id = 1", (data, sealed))
                conn.execute("COMMIT")
                self._note_wal()
            finally:
                if not synchronous:
                    conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.IntegrityError as exc:  # a row already where the sealed head says none can be
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise JournalDamaged(f"journal {self.path}: append collided with a row the sealed state does not "
                                 f"cover (written without the key): {exc}") from None
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise classify_sqlite_error(exc, "append") from None
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _close_block(self, state: State, batch: _Batch, ts: str, rnd: tuple[Any, Any] | None
                     ) -> tuple[State, Block]:
        block = Block(state.open_entry, batch.entry, state.open_seq, batch.seq,
                      rnd[0] if rnd else None, rnd[1] if rnd else None, state.open_ts or ts, ts,
                      state.open_link, batch.link, False)
        state = msgspec.structs.replace(state, open_entry=batch.entry + 1, open_seq=batch.seq + 1,
                                        open_link=batch.link, open_entries=0, open_bytes=0, open_ts="",
                                        rounds=state.rounds + (rnd is not None))
        return state, block

    def _after_batch(self, state: State, batch: _Batch, ts: str, closing: tuple[Any, Any] | None
                     ) -> tuple[State, Block | None]:
        """The state after ``batch`` (entry, head, last seq, open block accounting) and the block it
        closes: the block ends with the entry that completed a round, or when it grew too big."""
        new_entries, new_bytes = batch.take()
        entries = state.open_entries + new_entries
        size = state.open_bytes + new_bytes
        state = msgspec.structs.replace(state, entry=batch.entry, head=batch.link, last_seq=batch.seq,
                                        open_entries=entries, open_bytes=size,
                                        open_ts=state.open_ts or ts)
        if closing is not None or entries >= BLOCK_MAX_ENTRIES or size >= BLOCK_MAX_BYTES:
            return self._close_block(state, batch, ts, closing)
        return state, None

    def _take_marks(self, conn: sqlite3.Connection, batch: _Batch, state: State
                    ) -> tuple[State, list[tuple[int, int]]]:
        """Chain the waiting acknowledgements as one mark entry. Returns the state after it and the
        acknowledged ranges ``(lo, hi)``, which :meth:`_commit` deletes from ``pending``."""
        if not self._marked:
            return state, []
        ranges = _merge_ranges(self._marked)
        ts = _iso(self._marked_at) if self._marked_at else _now()
        batch.entry_row(lambda entry: MarkRow(entry, ts, ranges))
        topics = {(c, d): s for c, d, s in state.topics}
        placeholders = ",".join("?" * len(self._marked))
        for seq, topic in conn.execute(f"SELECT seq, CAST(topic AS BLOB) FROM pending WHERE seq IN "
                                       f"({placeholders})", tuple(self._marked)).fetchall():
            if topic is not None:
                channel, _, device = bytes(topic).decode(errors="replace").partition("\x1f")
                key = (channel, device or None)
                topics[key] = max(topics.get(key, 0), int(seq))
        state = msgspec.structs.replace(
            state, delivered=state.delivered + len(self._marked),
            topics=tuple(sorted(((c, d, s) for (c, d), s in topics.items()), key=lambda t: t[2])))
        return state, list(ranges)

    def append(self, inp: TimedInput, emits: Sequence[Emit]) -> list[OutboxRow]:
        """Journal ``inp`` and one message row per emitted message, in ONE transaction, sealed.

        Each message gets the next table-wide ``seq`` and its ``msg_id`` (the stored JSON has both filled,
        via ``msgspec.structs.replace``); a :class:`~daemon.messages.FloorRound` also gets ``chain_seq``
        and ``chain_head``, the chain state just before its own row. Acknowledgements waiting to be
        recorded are chained first. Returns the new message rows in order. On any failure the transaction
        is rolled back whole and :class:`JournalUnwritable` (disk full, read-only, I/O error, size cap) or
        :class:`JournalDamaged` (corruption, the journal's files deleted or replaced, a row planted after
        the sealed head that the append collides with) is raised; counters
        do not advance. ``TypeError`` for an input type that cannot be journaled (before anything is
        written).
        """
        return self.append_many([(inp, emits)])[0]

    def append_many(self, items: Sequence[tuple[TimedInput, Sequence[Emit]]]) -> list[list[OutboxRow]]:
        """:meth:`append` for several inputs in ONE transaction (one fsync): all or none of them is
        journaled. Returns each input's message rows. For committing several inputs together (group
        commit, bulk loads); the errors are :meth:`append`'s."""
        encoded = [(encode_event(inp.event), event_device(inp.event), str(inp.ts), inp, emits)
                   for inp, emits in items]
        with self._appending_lock:
            self._appending += 1
        try:
            return self._append_encoded(encoded)
        finally:
            with self._appending_lock:
                self._appending -= 1

    def _append_encoded(self, encoded: list[tuple[tuple[str, bytes], tuple[str | None, int | None], str,
                                                  TimedInput, Sequence[Emit]]]) -> list[list[OutboxRow]]:
        with self._lock:
            conn = self._db()
            self._check_files(conn)
            conn = self._db()
            state = self._state
            batch = _Batch(self._linker, state)
            marks: list[tuple[int, int]] = []
            marked: tuple[int, ...] = ()
            if self._marks_due():
                marked = tuple(self._marked)
                state, marks = self._take_marks(conn, batch, state)
            out: list[list[OutboxRow]] = []
            pending: list[tuple[int, str | None]] = []
            blocks: list[Block] = []
            work = _Working(state, self._facts)
            for (kind, payload), (device, device_seq), ts, inp, emits in encoded:
                state, rows, block = self._add_input(batch, state, work, kind, payload, device, device_seq,
                                                     ts, inp, emits, pending)
                out.append(rows)
                if block is not None:
                    blocks.append(block)
            state = work.state(state)
            self._commit(conn, batch, state, pending=pending, marks=marks, blocks=blocks)
            self._committed(state, marked)
            if work.facts:
                self._facts.update(work.facts)
            for rows in out:
                for row in rows:
                    self._remember(row)
                    if len(self._unacked) < UNACKED_MAX:
                        self._unacked.add(row.seq)
        return out

    def _add_input(self, batch: _Batch, state: State, work: _Working, kind: str, payload: bytes,
                   device: str | None, device_seq: int | None, ts: str, inp: TimedInput,
                   emits: Sequence[Emit], pending: list[tuple[int, str | None]]
                   ) -> tuple[State, list[OutboxRow], Block | None]:
        """Chain one input and its messages onto ``batch``; the state after it and the block it closes.
        The pads, device numbers and device facts are kept in ``work`` (:class:`_Working`) until the batch
        ends: the returned state's ``spots`` and ``devices`` are those before the batch."""
        entry = batch.entry_row(lambda e: InputRow(e, ts, kind, payload)).entry
        rows: list[OutboxRow] = []
        closing: tuple[Any, Any] | None = None
        current = state.round
        shoes: list[Any] = []
        prefix = f"{self._table}-{self._meta.epoch}-" if emits else ""
        for emit in emits:
            seq = batch.seq = batch.seq + 1
            msg_id = f"{prefix}{seq}-{secrets.token_hex(4)}"
            message: Any
            if isinstance(emit.message, FloorRound):
                message = msgspec.structs.replace(emit.message, seq=seq, msg_id=msg_id, chain_seq=seq - 1,
                                                  chain_head=batch.link.hex())
            else:
                message = msgspec.structs.replace(emit.message, seq=seq, msg_id=msg_id)
            channel = _channel_name(emit.channel)
            mrow = MessageRow(seq, entry, msg_id, channel, emit.device, bool(emit.retain), int(emit.qos),
                              msgspec.json.encode(message))
            batch.message_row(mrow)
            rows.append(_outbox_row(mrow))
            pending.append((seq, _topic(channel, emit.device) if mrow.retain else None))
            key = message_round(message)
            if key is not None:
                current = key
                if message_schema(message) in ROUND_COMPLETE_SCHEMAS:
                    closing = key
            shoes.append(getattr(message, "shoe", None))
        if shoes and any(shoe is not None and shoe != state.shoe for shoe in shoes):  # a new shoe (rare)
            state = msgspec.structs.replace(state, round=current, **_after_shoes(
                state, entry, shoes, work.spot_rows(), work.fact_rows()))
        elif current != state.round:
            state = msgspec.structs.replace(state, round=current)
        event = inp.event
        if isinstance(event, SpotChanged):
            key = (event.device, event.spot)
            work.spots.pop(key, None)  # the latest change of each spot last: the order of the changes
            work.spots[key] = entry
        if device is not None:
            work.note_device(device, device_seq, entry, kind, event)
        state, block = self._after_batch(state, batch, ts, closing)
        return state, rows, block

    def _committed(self, state: State, marked: Sequence[int]) -> None:
        self._state = state
        self._startup_rows.clear()
        if marked:
            for seq in marked:
                self._marked.pop(seq, None)
            if not self._marked:
                self._marked_since, self._marked_at = 0.0, 0.0
        self._record_head()

    def _remember(self, row: OutboxRow) -> None:
        self._recent[row.seq] = row
        self._recent_bytes += len(row.payload)
        while self._recent_bytes > RECENT_BYTES and self._recent:
            _, old = self._recent.popitem(last=False)
            self._recent_bytes -= len(old.payload)

    def _marks_due(self) -> bool:
        return bool(self._marked) and (len(self._marked) >= MARK_BATCH
                                       or time.monotonic() - self._marked_since >= MARK_DELAY)

    def flush_marks(self) -> None:
        """Record the waiting acknowledgements now (one mark entry, committed without an fsync of its
        own: losing it to a power cut only republishes those messages once; the next append's fsync makes
        it durable). Raises :class:`JournalUnwritable` / :class:`JournalDamaged` like an append."""
        with self._lock:
            if not self._marked:
                return
            conn = self._db()
            self._check_files(conn)
            conn = self._db()
            state = self._state
            batch = _Batch(self._linker, state)
            marked = tuple(self._marked)
            state, marks = self._take_marks(conn, batch, state)
            ts = _iso(self._marked_at) if self._marked_at else _now()
            state, block = self._after_batch(state, batch, ts, None)
            self._commit(conn, batch, state, marks=marks, blocks=[block] if block else [], synchronous=False)
            self._committed(state, marked)

    # ------------------------------------------------------------------ relay side

    def mark_delivered(self, row_id: int) -> None:
        """Record the broker's acknowledgement of message ``row_id`` (idempotent).

        Acknowledgements are sealed in batches, as one mark entry, once :data:`MARK_BATCH` are waiting or
        the oldest has waited :data:`MARK_DELAY` seconds (with the next append or acknowledgement), or by
        :meth:`flush_marks`, :meth:`prune`, :meth:`retained_latest` and :meth:`close`; meanwhile
        :meth:`pending` no longer returns the row. A crash
        before they are recorded only republishes those rows once (consumers drop them by ``msg_id``).
        Raises ``KeyError`` for a ``seq`` the journal never held, :class:`JournalUnwritable` when
        recording a batch fails (the acknowledgements stay waiting).
        """
        with self._lock:
            if row_id in self._marked:
                return
            if not 1 <= row_id <= self._state.last_seq:
                raise KeyError(f"journal holds no outbox row {row_id}")
            if row_id in self._unacked:
                self._unacked.discard(row_id)
            else:  # not appended by this process (or beyond the memory bound): ask the file
                try:
                    waiting = self._db().execute("SELECT 1 FROM pending WHERE seq = ?", (row_id,)).fetchone()
                except sqlite3.Error as exc:
                    raise classify_sqlite_error(exc, "mark_delivered") from None
                if waiting is None:
                    return  # already acknowledged
            if not self._marked:
                self._marked_since = time.monotonic()
            self._marked[row_id] = None
            self._marked_at = time.time()
            if self._marks_due():
                self.flush_marks()

    def try_mark_delivered(self, row_ids: Sequence[int]) -> bool | None:
        """:meth:`mark_delivered` for each of ``row_ids`` when that costs no wait: ``True`` when recorded
        (in memory; :meth:`marks_due` tells when to seal them with :meth:`flush_marks`), ``None``
        (nothing done) when the journal lock is held (maintenance or a read in a worker thread: try
        again once it is released), ``False`` (nothing done) when a row was not appended by this process
        (:meth:`mark_delivered_many` asks the file). For the relay, from the event loop: its
        acknowledgements are recorded without a worker-thread hop, and never by blocking the loop.
        Raises ``KeyError`` like :meth:`mark_delivered`."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            if any(r not in self._unacked and r not in self._marked for r in row_ids):
                return False  # needs the file (or is acknowledged already): the thread path decides
            for row_id in row_ids:
                if row_id in self._marked:
                    continue
                if not 1 <= row_id <= self._state.last_seq:
                    raise KeyError(f"journal holds no outbox row {row_id}")
                self._unacked.discard(row_id)
                if not self._marked:
                    self._marked_since = time.monotonic()
                self._marked[row_id] = None
                self._marked_at = time.time()
            return True
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def lock_if_free(self) -> Iterator[bool]:
        """Hold the journal's lock for the ``with`` block when it is free now: yields ``True`` (appends
        inside it take the same, re-entrant, lock without waiting), or ``False`` at once when another
        thread holds it (a maintenance step, a recall or replay read), nothing held. For the app, which
        commits on the event loop only when that costs no wait for the lock (``App._commit``)."""
        got = self._lock.acquire(blocking=False)
        try:
            yield got
        finally:
            if got:
                self._lock.release()

    def marks_due(self) -> bool:
        """Acknowledgements are waiting to be sealed (:data:`MARK_BATCH` of them, or the oldest waited
        :data:`MARK_DELAY` seconds): :meth:`flush_marks` records them."""
        return self._marks_due()

    def mark_delivered_many(self, row_ids: Iterable[int]) -> None:
        """:meth:`mark_delivered` for each of ``row_ids`` (one lock, at most one batch recorded)."""
        with self._lock:
            for row_id in row_ids:
                self.mark_delivered(row_id)

    def pending(self, limit: int = 100, after_row: int = 0) -> list[OutboxRow]:
        """Up to ``limit`` unacknowledged messages with ``seq > after_row``, in ``seq`` order.

        Memory is bounded by ``limit`` and one block (an indexed range query, never a full load). Rows
        this process appended come from memory; others are read a block at a time and verified against
        the chain. Raises :class:`JournalDamaged` if a block fails its seal, ``ValueError`` for
        ``limit < 1``.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        with self._lock:
            seqs: list[int] = []
            cursor = after_row
            try:
                while len(seqs) < limit:
                    got = [int(r[0]) for r in self._db().execute(
                        "SELECT seq FROM pending WHERE seq > ? ORDER BY seq LIMIT ?",
                        (cursor, limit - len(seqs) + len(self._marked))).fetchall()]
                    if not got:
                        break
                    seqs += [s for s in got if s not in self._marked][: limit - len(seqs)]
                    cursor = got[-1]
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
            return self._rows(seqs)

    def pending_count(self) -> int:
        """How many messages await the broker's acknowledgement."""
        with self._lock:
            try:
                count = int(self._db().execute("SELECT count(*) FROM pending").fetchone()[0])
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
            return count - len(self._marked)

    def retained_latest(self) -> list[OutboxRow]:
        """The latest *delivered* message of every retained ``(channel, device)``, in ``seq`` order: what
        the relay republishes after a reconnect (a broker restarted without persistence has lost its
        retained messages). Undelivered retained rows are not included: the relay publishes them in order
        anyway, and republishing them early would break the table-wide ``seq`` order. Acknowledgements
        not recorded yet count (they are recorded first when the journal can be written)."""
        with self._lock:
            with contextlib.suppress(JournalUnwritable):  # a full disk: read what is there
                self.flush_marks()
            topics = {(c, d): s for c, d, s in self._state.topics}
            if self._marked:
                marked = tuple(self._marked)
                try:
                    found = self._db().execute(
                        f"SELECT seq, CAST(topic AS BLOB) FROM pending WHERE topic IS NOT NULL AND seq IN "
                        f"({','.join('?' * len(marked))})", marked).fetchall()
                except sqlite3.Error as exc:
                    raise classify_sqlite_error(exc, "read") from None
                for seq, topic in found:
                    channel, _, device = bytes(topic).decode(errors="replace").partition("\x1f")
                    key = (channel, device or None)
                    topics[key] = max(topics.get(key, 0), int(seq))
            return self._rows(sorted(topics.values()))

    def retained_topics(self) -> tuple[tuple[str, str | None, int], ...]:
        """``(channel, device, seq)`` of the latest delivered message of every retained topic, as the
        sealed state records it (acknowledgements not recorded yet are not in it: :meth:`flush_marks`
        first). For reading those messages one at a time (:meth:`messages_by_seq`) when
        :meth:`retained_latest` fails on one of them."""
        with self._lock:
            return tuple(self._state.topics)

    def messages_by_seq(self, from_seq: int, to_seq: int, limit: int = 10_000) -> list[OutboxRow]:
        """The journaled messages with ``from_seq <= seq <= to_seq`` (at most ``limit``), delivered or not,
        in ``seq`` order, for replay by ``seq``: the stored payload bytes, original ``seq`` and ``msg_id``.
        Messages retention already deleted are simply absent (:meth:`first_seq`). Raises
        :class:`JournalDamaged` when a block fails its seal, ``ValueError`` for ``limit < 1``."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        out: list[OutboxRow] = []
        with self._lock:
            conn = self._db()
            seq = max(1, from_seq)
            try:
                while seq <= min(to_seq, self._state.last_seq) and len(out) < limit:
                    block = self._block_from_seq(conn, seq)
                    if block is None:
                        break
                    for row in self._block_rows(conn, block):
                        if (isinstance(row, MessageRow) and max(seq, block.first_seq) <= row.seq <= to_seq
                                and len(out) < limit):
                            out.append(self._recent.get(row.seq) or _outbox_row(row))
                    seq = max(seq, block.last_seq + 1)
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
        return out

    def first_seq(self) -> int | None:
        """The lowest message ``seq`` still held (``None`` when none is)."""
        with self._lock:
            try:
                row = self._db().execute(
                    "SELECT first_seq FROM blocks INDEXED BY blocks_seq WHERE last_seq >= first_seq "
                    "ORDER BY last_seq LIMIT 1").fetchone()
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
            if row is not None:
                return int(row[0])
            state = self._state
            return state.open_seq if state.last_seq >= state.open_seq else None

    def _block_from_seq(self, conn: sqlite3.Connection, seq: int) -> Block | None:
        """The block holding ``seq`` or, when it was pruned, the next block holding a later one."""
        state = self._state
        if seq >= state.open_seq:
            return bk.open_block(state) if seq <= state.last_seq else None
        r = conn.execute(f"SELECT {bk.BLOCK_COLS} FROM blocks INDEXED BY blocks_seq WHERE last_seq >= ? "
                         "AND last_seq >= first_seq ORDER BY last_seq LIMIT 1", (seq,)).fetchone()
        if r is None:
            return bk.open_block(state) if state.last_seq >= state.open_seq else None
        return bk._block(r)

    def _rows(self, seqs: Sequence[int]) -> list[OutboxRow]:
        """The messages ``seqs`` (held ones), from memory or verified blocks."""
        conn = self._db()
        found: dict[int, OutboxRow] = {}
        missing = []
        for seq in seqs:
            recent = self._recent.get(seq)
            if recent is not None:
                found[seq] = recent
            else:
                missing.append(seq)
        try:
            for seq in missing:
                if seq in found:
                    continue
                block = bk.block_of_seq(conn, self._state, seq)
                if block is None:
                    continue
                for row in self._block_rows(conn, block):
                    if isinstance(row, MessageRow) and row.seq in missing:
                        found[row.seq] = _outbox_row(row)
        except sqlite3.Error as exc:
            raise classify_sqlite_error(exc, "read") from None
        return [found[s] for s in seqs if s in found]

    def _block_rows(self, conn: sqlite3.Connection, block: Block) -> list[Row]:
        """The verified rows of ``block`` (closed blocks cached; the open block read each time)."""
        startup = self._startup_rows.pop(block.id, None)
        if startup is not None and (not block.is_open or self._state.entry == block.last_entry):
            return startup  # verified when the journal was opened, nothing written since
        if not block.is_open:
            cached = self._blocks_cache.get(block.id)
            if cached is not None:
                self._blocks_cache.move_to_end(block.id)
                return cached
        rows = bk.verified_rows(conn, self._key, block, self._units)
        self._cache_block(block, rows)
        return rows

    def _cache_block(self, block: Block, rows: list[Row]) -> None:
        if block.is_open:
            return
        self._blocks_cache[block.id] = rows
        while len(self._blocks_cache) > 4:
            self._blocks_cache.popitem(last=False)

    # ------------------------------------------------------------------ recovery

    def _inputs_from(self, first: int) -> Iterator[InputRow]:
        """Verified input rows with ``entry >= first``, in order, a block at a time."""
        with self._lock:
            conn = self._db()
            state = self._state
            start = bk.block_of_entry(conn, state, max(first, 1))
            block_ids = [start.id] if start is not None else []
        if not block_ids:
            return
        next_id = block_ids[0]
        while True:
            with self._lock:
                conn = self._db()
                state = self._state
                try:
                    block = bk.block_of_entry(conn, state, next_id)
                    if block is None:
                        return
                    rows = self._block_rows(conn, block)
                except sqlite3.Error as exc:
                    raise classify_sqlite_error(exc, "read") from None
            for row in rows:
                if isinstance(row, InputRow) and row.entry >= first:
                    yield row
            if block.is_open:
                return
            next_id = block.last_entry + 1

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
        :meth:`prune` never deletes inputs from the replay start on. Reads one block at a time (bounded
        memory), each verified against the chain. Raises :class:`JournalDamaged` for a block failing its
        seal or an input that cannot be decoded.
        """
        with self._lock:
            first = self._state.replay_anchor if self._state.replay_anchor is not None else 1
        for row in self._inputs_from(first):
            yield TimedInput(ts=row.ts, event=decode_event(row.kind, row.payload))

    def pads_before_replay(self) -> list[TimedInput]:
        """The latest ``SpotChanged`` of every bet-pad spot as it stood just before the first input of
        :meth:`replay_inputs` (in arrival order), for seeding a rebuilt machine's pads: chips left on a
        spot are locked round after round without a new event, so theirs may precede the replay.
        Empty when the replay starts at the journal's beginning. Raises :class:`JournalDamaged` for a
        block failing its seal."""
        with self._lock:
            if self._state.replay_anchor is None:
                return []
            wanted = sorted({entry for _, _, entry in self._state.replay_spots})
            conn = self._db()
            found: dict[int, InputRow] = {}
            try:
                for entry in wanted:
                    if entry in found:
                        continue
                    block = bk.block_of_entry(conn, self._state, entry)
                    if block is None:
                        raise JournalDamaged(f"journal {self.path}: the pad input {entry} the replay needs "
                                             "is missing")
                    for row in self._block_rows(conn, block):
                        if isinstance(row, InputRow) and row.entry in wanted:
                            found[row.entry] = row
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
        return [TimedInput(ts=found[e].ts, event=decode_event(found[e].kind, found[e].payload))
                for e in wanted if e in found]

    def devices_before_replay(self) -> list[DeviceSeed]:
        """What a rebuilt machine knows of each device before the first input of :meth:`replay_inputs`,
        for seeding it with :meth:`TableMachine.seed_devices
        <daemon.table.machine.TableMachine.seed_devices>`: facts the machine learnt from inputs that may
        be shoes old (an identity frame's session at power-up, a link state unchanged for days, a lost
        link, a last sequence number, a card read). As they stood when the replay's first input came
        (:class:`~daemon.journal.blocks.DeviceFacts`, snapshotted at that shoe's start), with the device's
        last frames before it (at least :data:`~daemon.table.inputs.RESEND_WINDOW`, the frames it may
        resend) while the replay holds fewer than that many of its frames; those frames are read back,
        a few blocks at most, and retention keeps them meanwhile. Empty when the replay starts at the
        journal's beginning; a journal written before these facts were kept has none for the devices last
        heard from before then. Raises :class:`JournalDamaged` for a missing input or a block failing its
        seal."""
        with self._lock:
            state = self._state
            if state.replay_anchor is None:
                return []
            now = {f.device: f for f in _fact_rows(self._facts, state.devices)}
            replay_facts = state.replay_device_facts or ()
            windows = {f.device: (f.first, max(f.last, f.last_rejected)) for f in replay_facts
                       if f.first and _window_needed(f, now)}
            frames: dict[str, list[Any]] = {device: [] for device in windows}
            try:
                conn = self._db()
                decoded: dict[int, Any] = {}
                for device, (first, last) in windows.items():
                    entry = first
                    while entry <= last:  # a block at a time: a window of frames is a few blocks at most
                        block, rows = self._block_holding(conn, state, entry)
                        for row in rows:
                            if not isinstance(row, InputRow) or not first <= row.entry <= last:
                                continue
                            event = decoded.get(row.entry)
                            if event is None:
                                event = decoded[row.entry] = decode_event(row.kind, row.payload)
                            source, seq = event_device(event)
                            if source == device and seq is not None:  # a frame of this device
                                frames[device].append(event)
                        entry = block.last_entry + 1
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "read") from None
        return [DeviceSeed(device=f.device, seq=f.seq,
                           session=f.first_session if f.device in windows else f.session,
                           link=LinkState(f.link) if f.link is not None else None, lost=f.lost > f.last,
                           reads_cards=f.cards, frames=tuple(frames.get(f.device, ())))
                for f in replay_facts]

    def _block_holding(self, conn: sqlite3.Connection, state: State, entry: int) -> tuple[Block, list[Row]]:
        """The block holding ``entry`` and its verified rows; :class:`JournalDamaged` when it is gone."""
        block = bk.block_of_entry(conn, state, entry)
        if block is None:
            raise JournalDamaged(f"journal {self.path}: the device input {entry} the replay needs is missing")
        return block, self._block_rows(conn, block)

    def current_round(self) -> tuple[Any, Any] | None:
        """``(shoe, round)`` of the latest round any message was about (the round in progress, or the one
        opened for betting), ``None`` before the first round."""
        with self._lock:
            rnd = self._state.round
        return None if rnd is None else (rnd[0], rnd[1])

    @property
    def current_shoe(self) -> Any:
        """The shoe number of the latest message that carried one (``None`` before the first)."""
        return self._state.shoe

    @property
    def replay_shoe(self) -> Any:
        """The shoe number to build the machine with before :meth:`replay_inputs`: the shoe in play at
        the replay's first input (``None`` before the first shoe: use the machine's default)."""
        return self._state.replay_shoe

    def last_device_seq(self, device: str) -> int | None:
        """The device ``seq`` of the latest journaled event from ``device`` (``None`` if never heard), so
        the app can tell cards were missed while it was down (crash recovery)."""
        return self._state.devices.get(device)

    # ------------------------------------------------------------------ retention

    def prune(self, now: datetime | None = None) -> int:
        """Maintenance: record waiting acknowledgements, archive closed blocks, apply retention, reclaim
        space. Returns the number of rows deleted by retention.

        Runs in short steps, each holding the journal lock for a few milliseconds (an append waits at
        most one step): compressing a block happens outside the lock. Retention deletes whole blocks,
        oldest first, once they are older than the last ``retention_rounds`` complete rounds and, with
        ``retention_days``, ended more than that many days before ``now`` (default: the current UTC
        time); when the file's used size exceeds ``max_size``, older blocks go regardless of the days,
        down to the last 10 rounds. Never deleted: the blocks the replay needs, a block holding a message
        not yet acknowledged, the latest delivered message of a retained topic or a bet-pad input the
        replay may need. Each deletion is chained as a prune entry. Freed pages are returned to the
        file system (``PRAGMA incremental_vacuum``; the journal is created with ``auto_vacuum =
        INCREMENTAL``).
        """
        with self._maintenance:
            steps = self._steps(now)
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    deleted: int = done.value
                    break
                self._after_appends()
            self.checkpoint()
            return deleted

    @contextlib.contextmanager
    def maintenance(self, now: datetime | None = None) -> Iterator[Generator[str | None, None, int] | None]:
        """:meth:`prune` in steps, for a caller that runs them itself (the app, on its event loop):
        ``with journal.maintenance() as steps:`` gives an iterator (``None`` when a maintenance is
        running already), each ``next(steps)`` one step: a short statement or transaction under the
        journal's lock, verifying or compressing one block or archive unit, a few milliseconds at most,
        except a step announced by the one before it yielding :data:`OFF_LOOP` (``None`` otherwise),
        which may take longer (many messages awaiting the broker, a unit of unusually large blocks);
        ``StopIteration.value`` is the number of rows retention deleted. The steps may be run from any
        thread, one at a time, each holding the journal's (re-entrant) lock or not; ``with`` ends the
        maintenance (leaving it early is safe: what is done stays done, the rest waits for the next). The
        WAL checkpoint (:meth:`checkpoint`, an fsync of the journal file) is not a step: call it after
        the last, from a worker thread."""
        if not self._maintenance.acquire(blocking=False):
            yield None
            return
        steps = self._steps(now)
        try:
            yield steps
        finally:
            steps.close()
            self._maintenance.release()

    def _steps(self, now: datetime | None) -> Generator[str | None, None, int]:
        """The steps of :meth:`prune` but the checkpoint; returns the rows retention deleted."""
        self.flush_marks()
        yield None
        yield from self._archive_closed()
        self._drop_archived_raw_rows()
        yield None
        deleted = yield from self._apply_retention(now or datetime.now(UTC))
        yield from self._vacuum()
        return deleted

    def checkpoint(self) -> None:
        """Copy the WAL into the journal file from a connection of its own, without the journal lock: a
        passive checkpoint never blocks the writer (https://www.sqlite.org/wal.html#ckpt). The writer's
        next commit then restarts the WAL from its beginning. The last part of :meth:`prune`; waits for
        the disk (an fsync of the journal file). The lock is held only to check first that the WAL was
        not truncated under the writer (:meth:`_check_wal`: such a WAL is never copied). Raises
        :class:`JournalUnwritable` / :class:`JournalDamaged` as an append does."""
        if self._stopping.is_set():
            return
        with self._lock:  # a WAL truncated under us is never copied into the journal file (_check_wal)
            self._check_wal()
        try:
            side = sqlite3.connect(self._db_name, timeout=1.0, isolation_level=None)
            try:
                side.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                side.close()
        except sqlite3.Error as exc:
            raise classify_sqlite_error(exc, "checkpoint") from None

    def _after_appends(self) -> None:
        """Maintenance gives way: while an append is in flight in another thread, wait (up to 10 ms a
        time, so that maintenance still makes progress beside a table dealing as fast as it can). Python
        runs one thread at a time, and a thread waiting for the interpreter can wait a whole switch
        interval (5 ms) each time: CPU-bound maintenance beside an append would delay it over and over."""
        deadline = time.monotonic() + 0.01
        while self._appending and time.monotonic() < deadline:
            time.sleep(0.0002)

    def stop_maintenance(self) -> None:
        """Make a running :meth:`prune` return after its current step (shutdown; :meth:`close` does it)."""
        self._stopping.set()

    def _archive_closed(self) -> Generator[str | None, None, None]:
        """Archive closed blocks :data:`UNIT_BLOCKS` at a time (oldest first): read them a block per hold
        of the lock, verify and compress them without it, write the archive rows a few at a time, switch
        the blocks over in one short transaction, then delete the hot rows they replace a block at a
        time. The rows and the chain do not change, only how they are stored. A generator of steps
        (:meth:`maintenance`): it yields after each hold of the lock and each block verified."""
        while not self._stopping.is_set():
            with self._lock:
                conn = self._db()
                try:
                    found = [bk._block(r) for r in conn.execute(
                        f"SELECT {bk.BLOCK_COLS} FROM blocks INDEXED BY blocks_raw WHERE unit = 0 "
                        "ORDER BY id LIMIT ?", (UNIT_BLOCKS,)).fetchall()]
                except sqlite3.Error as exc:
                    raise classify_sqlite_error(exc, "archive") from None
            group = found[:1]
            for block in found[1:]:
                if block.id != group[-1].last_entry + 1:
                    break
                group.append(block)
            if len(group) < UNIT_BLOCKS:
                return
            yield None
            raw = []
            for block in group:  # a block per hold of the lock (closed blocks change only here)
                with self._lock:
                    try:
                        raw.append(bk.block_blobs(self._db(), block))
                    except sqlite3.Error as exc:
                        raise classify_sqlite_error(exc, "archive") from None
                yield None
            parts = []
            for block, (blobs, hints) in zip(group, raw, strict=True):
                rows = yield from self._verify_blobs(block, blobs)
                entries = [b for b, row in zip(blobs, rows, strict=True) if not isinstance(row, MessageRow)]
                messages = [(row.channel, b) for b, row in zip(blobs, rows, strict=True)
                            if isinstance(row, MessageRow)]
                parts.append((block.id, hints, entries, messages))
                yield None
            if sum(len(b) for blobs, _ in raw for b in blobs) > LONG_UNIT_BYTES:
                yield OFF_LOOP
            unit = group[0].id
            rows_of_unit = bk.archive_rows(unit, pack_unit(parts))
            yield None
            for i in range(0, len(rows_of_unit), 16):  # the parts a few at a time, then the switch
                with self._lock:
                    self._write_quietly(self._db(), [("INSERT OR REPLACE INTO archive VALUES (?, ?)",
                                                      rows_of_unit[i:i + 16])], "archive")
                yield None
            with self._lock:
                self._write_quietly(self._db(), [("UPDATE blocks SET unit = ? WHERE id BETWEEN ? AND ?",
                                                  [(unit, group[0].id, group[-1].id)])], "archive")
                for block in group:
                    self._blocks_cache.pop(block.id, None)
            yield None
            for block in group:  # the hot rows they replace, a block per transaction
                if self._stopping.is_set():
                    return
                with self._lock:
                    self._write_quietly(self._db(), [
                        ("DELETE FROM log WHERE id BETWEEN ? AND ?", [(block.id, block.last_entry)]),
                        ("DELETE FROM outbox WHERE seq BETWEEN ? AND ?",
                         [(block.first_seq, block.last_seq)])],
                        "archive")
                yield None

    def _drop_archived_raw_rows(self) -> None:
        """Hot rows below the first block not archived yet belong to archived or deleted blocks (left by
        an archive step cut short): delete them."""
        with self._lock:
            conn = self._db()
            try:
                row = conn.execute(f"SELECT {bk.BLOCK_COLS} FROM blocks INDEXED BY blocks_raw WHERE unit = 0 "
                                   "ORDER BY id LIMIT 1").fetchone()
            except sqlite3.Error as exc:
                raise classify_sqlite_error(exc, "archive") from None
            first = bk._block(row) if row is not None else bk.open_block(self._state)
            self._write_quietly(conn, [("DELETE FROM log WHERE id < ?", [(first.id,)]),
                                       ("DELETE FROM outbox WHERE seq < ?", [(first.first_seq,)])], "archive")

    def _write_quietly(self, conn: sqlite3.Connection, statements: list[tuple[str, list[tuple[Any, ...]]]],
                       what: str) -> None:
        """Run ``statements`` (SQL, parameter rows) in one transaction committed without an fsync of its
        own (maintenance: redone if lost; the next append's fsync makes it durable). Call with the lock."""
        self._check_wal()
        try:
            conn.execute("PRAGMA synchronous=NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                for sql, params in statements:
                    conn.executemany(sql, params)
                conn.execute("COMMIT")
                self._note_wal()
            finally:
                conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise classify_sqlite_error(exc, what) from None

    def _verify_blobs(self, block: Block, blobs: list[bytes]) -> Generator[str | None, None, list[Row]]:
        """The decoded rows of ``block`` once their chain is recomputed (an altered block is never
        archived: :class:`JournalDamaged` naming its first failing row). A generator of steps: it yields
        every :data:`_YIELD_ROWS` rows, so appends go between them (:meth:`maintenance`)."""
        current = block.link_before
        rows: list[Row] = []
        linker, label = self._linker, block.label
        for i, blob in enumerate(blobs):
            current = linker(current, blob)
            rows.append(decode_row(blob, label))
            if i % _YIELD_ROWS == _YIELD_ROWS - 1:
                yield None
        if current != block.link_after:
            with self._lock:  # name the row
                bk.verified_rows(self._db(), self._key, block)
            raise JournalDamaged(f"journal {self.path}: {block.label} fails its seal")
        return rows

    def _used_bytes(self, conn: sqlite3.Connection) -> int:
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        return (pages - free) * size

    def _protected(self, conn: sqlite3.Connection, state: State) -> tuple[int, set[Block]]:
        """``(limit, keep)``: blocks from ``limit`` on are never deleted (the replay, the open block),
        and the blocks in ``keep`` hold something still needed (a pending message, the latest delivered
        message of a retained topic, a bet-pad input, the last frames of a device before the replay
        or the current shoe that a rebuilt machine may still remember: :class:`DeviceFacts`)."""
        start = state.replay_anchor if state.replay_anchor is not None else 1
        first = bk.block_of_entry(conn, state, max(start, state.base))
        limit = first.id if first is not None and not first.is_open else state.open_entry
        keep: set[Block] = set()
        entries = {e for _, _, e in state.spots + state.anchor_spots + state.replay_spots}
        frames: set[tuple[int, int]] = set()
        current = _fact_rows(self._facts, state.devices)
        now = {f.device: f for f in current}
        for f in current + (state.anchor_device_facts or ()) + (state.replay_device_facts or ()):
            if f.first and f.first < limit and _window_needed(f, now):  # frames from before the replay
                frames.add((f.first, min(max(f.last, f.last_rejected), limit - 1)))  # of a device quiet since
        for lo, hi in frames:
            holder = bk.block_of_entry(conn, state, lo)
            keep.update(bk._block(r) for r in conn.execute(
                f"SELECT {bk.BLOCK_COLS} FROM blocks WHERE id BETWEEN ? AND ?",
                (holder.id if holder is not None else lo, hi)))
        seqs = {s for _, _, s in state.topics}
        first_limit_seq = first.first_seq if first is not None else state.open_seq
        seqs |= {int(r[0]) for r in conn.execute("SELECT seq FROM pending WHERE seq < ?", (first_limit_seq,))}
        for entry in entries:
            b = bk.block_of_entry(conn, state, entry)
            if b is not None and not b.is_open:
                keep.add(b)
        held: Block | None = None
        for seq in sorted(seqs):  # in order: one lookup per block, not per message (a long outage
            if held is not None and held.first_seq <= seq <= held.last_seq:  # leaves thousands)
                continue
            b = bk.block_of_seq(conn, state, seq)
            if b is not None:
                held = b
                if not b.is_open:
                    keep.add(b)
        return limit, keep

    def _round_block(self, conn: sqlite3.Connection, nth: int) -> int:
        """The id of the ``nth`` latest block that completed a round (0: fewer rounds than that)."""
        row = conn.execute("SELECT id FROM blocks INDEXED BY blocks_done WHERE round IS NOT NULL "
                           "ORDER BY id DESC LIMIT 1 OFFSET ?", (nth - 1,)).fetchone()
        return int(row[0]) if row is not None else 0

    def _counted_rounds(self, conn: sqlite3.Connection, nth: int) -> list[Block]:
        """The ``nth`` latest blocks labelled as completing a round (what :meth:`_round_block` counts)."""
        first = self._round_block(conn, nth)
        if not first:
            return []
        return [bk._block(r) for r in conn.execute(
            f"SELECT {bk.BLOCK_COLS} FROM blocks INDEXED BY blocks_done WHERE round IS NOT NULL AND id >= ? "
            "ORDER BY id", (first,)).fetchall()]

    def _apply_retention(self, now: datetime) -> Generator[str | None, None, int]:
        """Delete blocks retention no longer needs, oldest first, whole archive units only, at most
        at most :data:`PRUNE_BATCH` blocks (one unit) per locked transaction. Blocks are chosen on the
        word of unsealed columns: their ``ended_ts``, and the ``round`` of the latest blocks counted as
        rounds. Before anything is deleted, the rows of the blocks to delete and of the blocks counted are
        verified and those columns checked against them (:func:`~daemon.journal.blocks.check_block_facts`,
        a block per step; a counted block once while its columns stay as checked); altered ones raise
        :class:`JournalDamaged` and nothing is deleted. A generator of steps (one transaction or one
        block's check each); returns the rows deleted."""
        deleted = 0
        checked = self._facts_checked
        while not self._stopping.is_set():
            if self._state.last_seq - self._state.delivered > LONG_PENDING:
                yield OFF_LOOP
            unchecked: list[Block] = []
            with self._lock:
                conn = self._db()
                state = self._state
                try:
                    limit, keep = self._protected(conn, state)
                    nth = self._retention
                    upper = min(limit, self._round_block(conn, nth))
                    days = None
                    if self._retention_days is not None:
                        oldest = now - timedelta(days=self._retention_days)
                        days = oldest.isoformat().replace("+00:00", "Z")
                    doomed, reason = self._doomed(conn, upper, days, keep), "age"
                    if not doomed and self._max_size is not None and self._used_bytes(conn) > self._max_size:
                        nth = MIN_RETENTION_ROUNDS
                        upper = min(limit, self._round_block(conn, nth))
                        doomed, reason = self._doomed(conn, upper, None, keep), "size"
                    if not doomed:
                        return deleted
                    unchecked = [b for b in doomed if checked.get(b.id) != b]
                    unchecked += [b for b in self._counted_rounds(conn, nth)
                                  if _unarchived(checked.get(b.id)) != _unarchived(b)]
                    if not unchecked:
                        deleted += self._delete_blocks(conn, state, doomed, reason)
                        for block in doomed:
                            checked.pop(block.id, None)
                except sqlite3.Error as exc:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise classify_sqlite_error(exc, "prune") from None
            if unchecked:  # chosen on the word of unsealed columns: check them first, a block per step
                for block in unchecked:
                    with self._lock:
                        try:
                            bk.verified_rows(self._db(), self._key, block, self._units)
                        except sqlite3.Error as exc:
                            raise classify_sqlite_error(exc, "prune") from None
                    checked[block.id] = block
                    yield None
                continue  # choose again: delete what is still doomed once all of it is checked
            yield None
            if reason == "size":  # give the space back before measuring again
                yield from self._vacuum()
        return deleted

    def _doomed(self, conn: sqlite3.Connection, upper: int, days: str | None, keep: set[Block]
                ) -> list[Block]:
        """The oldest blocks below ``upper`` (ended before ``days`` when given) that may go: none in
        ``keep`` or in an archive unit with a block in ``keep``, whole units only."""
        kept_units = {b.unit for b in keep if b.unit}
        where = "id < ?"
        params: list[Any] = [upper]
        if days is not None:
            where += " AND julianday(ended_ts) <= julianday(?)"
            params.append(days)
        if kept_units:
            where += f" AND unit NOT IN ({','.join(map(str, sorted(kept_units)))})"
        if keep:
            where += f" AND id NOT IN ({','.join(str(b.id) for b in sorted(keep, key=lambda b: b.id))})"
        params.append(PRUNE_BATCH)
        found = [bk._block(r) for r in conn.execute(
            f"SELECT {bk.BLOCK_COLS} FROM blocks WHERE {where} ORDER BY id LIMIT ?", params).fetchall()]
        if found and found[-1].unit:  # the last unit may continue beyond what was found: whole units only
            unit = found[-1].unit
            members = [int(r[0]) for r in conn.execute(
                "SELECT id FROM blocks WHERE id >= ? AND unit = ? ORDER BY id LIMIT ?",
                (unit, unit, UNIT_BLOCKS)).fetchall()]
            if not set(members) <= {b.id for b in found}:
                found = [b for b in found if b.unit != unit]
        return found

    def _delete_blocks(self, conn: sqlite3.Connection, state: State, doomed: list[Block], reason: str) -> int:
        """Delete ``doomed`` blocks and chain a prune entry naming them, in one transaction."""
        ids = tuple(b.id for b in doomed)
        base = max(state.base, max(b.last_entry for b in doomed) + 1)
        batch = _Batch(self._linker, state)
        ts = _now()
        batch.entry_row(lambda e: PruneRow(e, ts, reason, ids, base))
        state = msgspec.structs.replace(state, base=base)
        new_state, block = self._after_batch(state, batch, ts, None)
        data = bk.encode_state(new_state)
        rows = 0
        self._check_wal()
        conn.execute("PRAGMA synchronous=NORMAL")
        try:
            conn.execute("BEGIN IMMEDIATE")
            for unit in sorted({b.unit for b in doomed if b.unit}):
                conn.execute("DELETE FROM archive WHERE id BETWEEN ? AND ?", bk.archive_keys(unit))
                self._units.drop(unit)
            for b in doomed:
                rows += (b.last_entry - b.id + 1) + max(0, b.last_seq - b.first_seq + 1)
                if not b.unit:
                    conn.execute("DELETE FROM log WHERE id BETWEEN ? AND ?", (b.id, b.last_entry))
                    conn.execute("DELETE FROM outbox WHERE seq BETWEEN ? AND ?", (b.first_seq, b.last_seq))
                conn.execute("DELETE FROM blocks WHERE id = ?", (b.id,))
                self._blocks_cache.pop(b.id, None)
            conn.executemany("INSERT INTO log VALUES (?, ?, ?)", batch.log)
            if block is not None:
                conn.execute("INSERT INTO blocks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                             (block.id, block.last_entry, block.first_seq, block.last_seq, block.shoe,
                              block.round, block.started_ts, block.ended_ts, block.link_before,
                              block.link_after))
            conn.execute("UPDATE state SET data = ?, seal = ? WHERE id = 1",
                         (data, bk.state_seal(self._key, self._meta, data)))
            conn.execute("COMMIT")
            self._note_wal()
        finally:
            conn.execute("PRAGMA synchronous=FULL")
        self._committed(new_state, ())
        return rows

    def _vacuum(self, max_steps: int = 256) -> Generator[str | None, None, None]:
        """Give freed pages back to the file system, :data:`VACUUM_STEP` pages per locked step (a
        generator of those steps)."""
        for _ in range(max_steps):
            if self._stopping.is_set():
                return
            with self._lock:
                conn = self._db()
                try:
                    if int(conn.execute("PRAGMA freelist_count").fetchone()[0]) == 0:
                        return
                    self._check_wal()
                    conn.execute("PRAGMA synchronous=NORMAL")
                    try:
                        # stepped to completion by executescript: execute() steps the pragma once, and
                        # each step frees ONE page (so 64 steps were needed for what is one step here)
                        conn.executescript(f"PRAGMA incremental_vacuum({VACUUM_STEP})")
                        self._note_wal()
                    finally:
                        conn.execute("PRAGMA synchronous=FULL")
                except sqlite3.Error as exc:
                    raise classify_sqlite_error(exc, "vacuum") from None
            yield None

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Record waiting acknowledgements, close the database and release the writer lock (idempotent)."""
        self._stopping.set()
        with self._lock:
            if self._conn is not None and self._marked and self._broken is None:
                with contextlib.suppress(Exception):
                    self.flush_marks()
            self._release()

    def _release(self) -> None:
        if self._conn is not None:
            if self._wal_lost:  # closing checkpoints: with the WAL emptied its frames read short and the
                with contextlib.suppress(OSError):  # checkpoint stops before writing any (the journal
                    os.truncate(self._wal_name, 0)  # file keeps what was checkpointed before)
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


def describe_header(header: Header) -> str:
    """One line about a journal's identity and head (for logs and ``tablesense verify``)."""
    s = header.state
    return (f"table {header.meta.table}, epoch {header.meta.epoch}, chain head {s.last_seq}:{s.head.hex()}")
