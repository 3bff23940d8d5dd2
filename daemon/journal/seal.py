"""The journal's rows, its HMAC-SHA256 hash chain and its archive format (pure: no I/O, no clock).

Every fact the journal keeps is a *row*, encoded once with msgpack (msgspec, array-like, first element
the row type) and never re-encoded: the chain, the raw tables and the archive all use the same bytes.

* :class:`InputRow` (``"i"``): an input the state machine applied (``entry`` id, arrival ``ts``, ``kind``,
  the msgspec JSON ``payload`` of :mod:`daemon.journal.codec`);
* :class:`MessageRow` (``"o"``): a message the input emitted (table-wide ``seq``, its ``entry``, ``msg_id``,
  channel, device, retain, QoS, the JSON ``payload`` exactly as published);
* :class:`MarkRow` (``"m"``): the broker acknowledged the messages in ``ranges`` (inclusive ``seq`` ranges);
* :class:`PruneRow` (``"p"``): retention deleted the blocks ``blocks``; rows below ``base`` may be gone.

**The chain.** Rows are chained in *chain order*: entries (input, mark, prune rows) by ``entry`` id, each
input followed by its messages in ``seq`` order. ``link_0 = HMAC(key, "tablesense journal v2" | table |
epoch | created)`` and ``link_i = HMAC-SHA256(key, link_{i-1} || row_i)`` (RFC 2104; stdlib ``hmac``).
The *chain head* is the latest link; ``chain_seq`` is the highest ``seq`` it covers. Without the key a
link cannot be computed, so a changed, inserted, deleted or reordered row breaks every later link.
Each row also carries a 2-byte *hint* (the first bytes of its link): not a seal, only the means to name
the first row that fails when a block does not verify.

**Blocks.** The chain is cut into blocks: the rows from the first entry after a round completed up to
and including the entry that completed the next one (its ``FloorRound``), or :data:`BLOCK_MAX_ENTRIES`
entries / :data:`BLOCK_MAX_BYTES` bytes when no round completes. Each closed block records the link
before its first row and after its last (self-authenticating: HMAC outputs), so any block can be
verified alone, and consecutive blocks must join. :data:`UNIT_BLOCKS` consecutive closed blocks are
archived together as ONE compressed blob (:func:`pack_unit`: one Zstandard frame, RFC 8878, with the
preset dictionary of :mod:`daemon.journal.zdict` as raw content; units archived before that are raw
deflate, RFC 1951, with the same dictionary, and are still read): a round's scoreboard then costs only
what it adds to the previous round's, and a round's facts are stored compactly instead of one SQLite row
per input and message.
"""

from __future__ import annotations

import hashlib
import hmac
import zlib
from collections.abc import Iterable, Sequence

import msgspec
import zstandard

from tablesense.daemon.journal.errors import JournalDamaged
from tablesense.daemon.journal.zdict import ZDICT, ZDICT_ID

__all__ = [
    "BLOCK_MAX_BYTES",
    "BLOCK_MAX_ENTRIES",
    "HINT_BYTES",
    "UNIT_BLOCKS",
    "InputRow",
    "Linker",
    "MarkRow",
    "MessageRow",
    "PruneRow",
    "Row",
    "chain",
    "decode_row",
    "decode_rows",
    "describe",
    "encode_row",
    "genesis",
    "hint",
    "link",
    "pack_unit",
    "row_label",
    "seal",
    "unpack_unit",
]

HINT_BYTES = 2
"""Bytes of each row's link kept beside it to locate the first failing row (not a seal)."""
BLOCK_MAX_ENTRIES = 1024
"""A block with no completed round is closed after this many entries (idle tables: heartbeats)."""
BLOCK_MAX_BYTES = 256 * 1024
"""... or once its rows hold this many bytes, so a block is always small enough to verify and read whole."""
UNIT_BLOCKS = 16
"""Closed blocks archived together (about 16 rounds: 3-4 KiB a round instead of 5-7 KiB alone)."""

_ARCHIVE_DEFLATE = 1
"""Archive format byte: raw deflate (RFC 1951, level 6) with the preset dictionary; read, no longer
written."""
_ARCHIVE_ZSTD = 2
"""Archive format byte: one Zstandard frame (RFC 8878, level :data:`_ZSTD_LEVEL`, content size in its
header) with the preset dictionary as raw content. Measured on 17-spot baccarat rounds: 3.2 KB a round
against deflate's 3.6 KB, compressed in a tenth of deflate's CPU (docs/performance.md)."""
_ZSTD_LEVEL = 3
_MAX_UNIT_PLAIN = 1 << 26
"""The most bytes an archive unit may decompress to (64 MiB: 16 blocks of at most 256 KiB of rows, with
room to spare); a larger claim is damage, never allocated."""
_ZSTD_DICT = zstandard.ZstdCompressionDict(ZDICT, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


class InputRow(msgspec.Struct, array_like=True, frozen=True, tag="i"):
    """An input applied by the state machine: ``entry`` id, arrival ``ts`` (ISO 8601 UTC), ``kind`` (the
    event class name) and its msgspec JSON ``payload``."""

    entry: int
    ts: str
    kind: str
    payload: bytes


class MessageRow(msgspec.Struct, array_like=True, frozen=True, tag="o"):
    """A message emitted by the input ``entry``: ``seq``, ``msg_id``, ``channel`` (the state machine's
    channel value), ``device`` (for ``devices/{name}``), ``retain``, ``qos`` and the published JSON
    ``payload`` (``seq`` and ``msg_id`` filled in)."""

    seq: int
    entry: int
    msg_id: str
    channel: str
    device: str | None
    retain: bool
    qos: int
    payload: bytes


class MarkRow(msgspec.Struct, array_like=True, frozen=True, tag="m"):
    """The broker acknowledged the messages with ``seq`` in each inclusive range of ``ranges`` at ``ts``."""

    entry: int
    ts: str
    ranges: tuple[tuple[int, int], ...]


class PruneRow(msgspec.Struct, array_like=True, frozen=True, tag="p"):
    """Retention (``reason``: ``rounds``, ``days`` or ``size``) deleted the blocks ``blocks`` (their first
    entry ids); from ``base`` on no row may be missing."""

    entry: int
    ts: str
    reason: str
    blocks: tuple[int, ...]
    base: int


Row = InputRow | MessageRow | MarkRow | PruneRow
"""Any row of the journal."""

_ENCODER = msgspec.msgpack.Encoder()
_DECODER: msgspec.msgpack.Decoder[Row] = msgspec.msgpack.Decoder(Row)


def encode_row(row: Row) -> bytes:
    """The row's bytes (what is chained, stored and archived)."""
    return _ENCODER.encode(row)


def decode_row(blob: bytes, where: str) -> Row:
    """The row encoded in ``blob``; :class:`JournalDamaged` naming ``where`` when it is not a row."""
    try:
        return _DECODER.decode(blob)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise JournalDamaged(f"{where} is not a journal row: {exc}") from None


def decode_rows(blobs: Sequence[bytes], where: str) -> list[Row]:
    """:func:`decode_row` of each of ``blobs`` (``where`` names the block in the error)."""
    decode = _DECODER.decode
    try:
        return [decode(b) for b in blobs]
    except (msgspec.DecodeError, msgspec.ValidationError):
        for i, blob in enumerate(blobs):
            decode_row(blob, f"{where} row {i + 1}")
        raise


def genesis(key: bytes, table: str, epoch: str, created_at: str) -> bytes:
    """The link before the journal's first row (binds the chain to the table, epoch and creation time)."""
    label = b"\x00".join((b"tablesense journal v2", table.encode(), epoch.encode(), created_at.encode()))
    return hmac.digest(key, label, hashlib.sha256)


def link(key: bytes, previous: bytes, row: bytes) -> bytes:
    """The next link: HMAC-SHA256(key, previous || row)."""
    return hmac.digest(key, previous + row, hashlib.sha256)


class Linker:
    """:func:`link` with its key set up once: ``linker(previous, row) == link(key, previous, row)``.

    HMAC-SHA256 as RFC 2104 defines it, ``H((K ^ opad) || H((K ^ ipad) || message))``, with the two
    SHA-256 states after the padded key's block computed once and copied for each row: about 0.55 us a
    row for a short row against 1.0 us for copying a keyed ``hmac`` object (whose ``copy``, ``update``
    and ``digest`` are Python wrappers around the same two hash states) and 1.3 us for keying
    ``hmac.digest`` again; the journal links every row it appends and every row it archives. Safe from
    several threads: the two states are only ever copied. ``tests/test_journal_linker.py`` pins it to
    :func:`link` for keys shorter and longer than the block."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        block = hashlib.sha256().block_size  # 64 bytes; a longer key is hashed first (RFC 2104 §2)
        if len(key) > block:
            key = hashlib.sha256(key).digest()
        key = key.ljust(block, b"\0")
        self._inner = hashlib.sha256(key.translate(_IPAD))
        self._outer = hashlib.sha256(key.translate(_OPAD))

    def __call__(self, previous: bytes, row: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(previous)
        inner.update(row)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


def chain(key: bytes, previous: bytes, rows: Iterable[bytes]) -> bytes:
    """The link after ``rows`` starting from ``previous``."""
    for row in rows:
        previous = hmac.digest(key, previous + row, hashlib.sha256)
    return previous


def hint(link_value: bytes) -> bytes:
    """The row's hint: the first :data:`HINT_BYTES` of its link."""
    return link_value[:HINT_BYTES]


def seal(key: bytes, label: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 over ``label`` and length-prefixed ``parts`` (the journal state's and the lock file's
    seals: unambiguous, so fields cannot be shifted from one part to another)."""
    mac = hmac.new(key, label, hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.digest()


_CHANNEL_ORDER = {"floor/rounds": 0, "scoreboard": 1, "settlements": 2, "round": 3, "results": 4,
                  "alarms": 5}
"""Archive order: rows of a kind together (each round's scoreboard right after the previous round's,
which it mostly repeats, within deflate's 32 KiB window), the largest first, entries last."""

_UNIT = msgspec.msgpack.Decoder(tuple[int, list[tuple[int, bytes]], list[bytes], list[bytes]])


def pack_unit(blocks: Sequence[tuple[int, bytes, Sequence[bytes], Sequence[tuple[str, bytes]]]]) -> bytes:
    """Several consecutive closed blocks as ONE archive blob. ``blocks``: ``(block id, hints, entry rows,
    (channel, message row) pairs)``. The message rows are grouped by channel across the blocks, then the
    entry rows follow; all compressed as one Zstandard frame (:data:`_ARCHIVE_ZSTD`) with the preset
    dictionary. :func:`unpack_unit` restores chain order from the rows' own ``entry`` and ``seq``."""
    return bytes((_ARCHIVE_ZSTD,)) + _compressor().compress(_unit_plain(blocks))


def _unit_plain(blocks: Sequence[tuple[int, bytes, Sequence[bytes], Sequence[tuple[str, bytes]]]]) -> bytes:
    """The bytes :func:`pack_unit` compresses: ``(dictionary id, hints, message rows, entry rows)``."""
    hints = [(block_id, h) for block_id, h, _, _ in blocks]
    messages = [m for _, _, _, ms in blocks for m in ms]
    grouped = [row for _, row in sorted(messages, key=lambda m: _CHANNEL_ORDER.get(m[0], 6))]
    entries = [e for _, _, es, _ in blocks for e in es]
    return _ENCODER.encode((ZDICT_ID, hints, grouped, entries))


def _compressor() -> zstandard.ZstdCompressor:
    """A compressor for one unit (a context is not shared between threads; making one costs ~12 us)."""
    return zstandard.ZstdCompressor(level=_ZSTD_LEVEL, dict_data=_ZSTD_DICT, write_content_size=True,
                                    write_checksum=False)


def _unit_bytes(data: bytes) -> bytes:
    """The plain bytes of an archive blob of either format; ``zlib.error`` or ``zstandard.ZstdError``
    when it is truncated, has trailing bytes or would decompress to more than
    :data:`_MAX_UNIT_PLAIN` bytes (checked before anything is allocated)."""
    if data[0] == _ARCHIVE_ZSTD:
        frame = data[1:]
        size = zstandard.frame_content_size(frame)  # ZstdError for a bad header
        if not 0 <= size <= _MAX_UNIT_PLAIN:
            raise zstandard.ZstdError("content size missing or too large")
        plain = zstandard.ZstdDecompressor(dict_data=_ZSTD_DICT).decompress(frame, allow_extra_data=False)
        if len(plain) != size:
            raise zstandard.ZstdError("content size does not match")
        return plain
    unpacker = zlib.decompressobj(-15, zdict=ZDICT)
    plain = unpacker.decompress(data[1:], _MAX_UNIT_PLAIN) + unpacker.flush()
    if not unpacker.eof or unpacker.unconsumed_tail or unpacker.unused_data:
        raise zlib.error("truncated, oversized or trailing data")
    return plain


def unpack_unit(data: bytes, where: str) -> tuple[dict[int, bytes], list[tuple[bytes, Row]]]:
    """``(hints by block id, rows)`` of an archive blob: the rows (bytes and decoded) in chain order
    (entries by id, each input followed by its messages by ``seq``). Raises :class:`JournalDamaged`
    naming ``where`` when the blob cannot be read."""
    if not data or data[0] not in (_ARCHIVE_ZSTD, _ARCHIVE_DEFLATE):
        raise JournalDamaged(f"{where}: unknown archive format")
    try:
        dict_id, hints, messages, entries = _UNIT.decode(_unit_bytes(data))
    except (zlib.error, zstandard.ZstdError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise JournalDamaged(f"{where}: archive cannot be read: {exc}") from None
    if dict_id != ZDICT_ID:
        raise JournalDamaged(f"{where}: archive made with dictionary {dict_id}, this build has {ZDICT_ID}")
    by_entry: dict[int, list[tuple[int, bytes, Row]]] = {}
    for blob in messages:
        row = decode_row(blob, where)
        if not isinstance(row, MessageRow):
            raise JournalDamaged(f"{where}: a {type(row).__name__} among the messages")
        by_entry.setdefault(row.entry, []).append((row.seq, blob, row))
    ordered: list[tuple[int, bytes, Row]] = []
    for blob in entries:
        row = decode_row(blob, where)
        if isinstance(row, MessageRow):
            raise JournalDamaged(f"{where}: a message among the entries")
        ordered.append((row.entry, blob, row))
    ordered.sort(key=lambda e: e[0])
    out: list[tuple[bytes, Row]] = []
    for entry, blob, row in ordered:
        out.append((blob, row))
        out.extend((b, r) for _, b, r in sorted(by_entry.pop(entry, []), key=lambda m: m[0]))
    if by_entry:
        raise JournalDamaged(f"{where}: messages of entries {sorted(by_entry)[:3]} not in the archive")
    return dict(hints), out


def row_label(row: Row) -> str:
    """How a report names a row: ``input 1234 (CardDrawn)``, ``outbox seq 560 (settlements)``..."""
    if isinstance(row, InputRow):
        return f"input entry {row.entry} ({row.kind}, {row.ts})"
    if isinstance(row, MessageRow):
        return f"outbox seq {row.seq} ({row.channel}, {row.msg_id})"
    if isinstance(row, MarkRow):
        return f"delivery mark entry {row.entry} ({row.ts})"
    return f"prune entry {row.entry} ({row.ts})"


def describe(blob: bytes, fallback: str) -> str:
    """:func:`row_label` of ``blob``, or ``fallback`` when it is not a row at all."""
    try:
        return row_label(_DECODER.decode(blob))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return fallback


