"""The offline audit of a whole journal: ``tablesense verify`` (docs/journal.md, "Verify").

:func:`audit` reads the journal through a read-only connection (also while the daemon writes it: one WAL
snapshot) and checks everything the start-up check leaves to it:

1. SQLite's full ``PRAGMA integrity_check`` (every page, every index);
2. the schema, the key (key id) and the sealed state record;
3. every block's chain, from the link before it to the link after it, naming the first row that fails;
   consecutive blocks join, from the journal's first row (or, once retention deleted old blocks, from
   ``base``: blocks kept below it for a pending message, a retained topic or a bet-pad input are checked
   alone); the last block ends at the sealed head;
4. delivery: a message is pending exactly when no sealed mark acknowledged it, and the pending count
   matches the sealed counters;
5. the head the writer last recorded in ``journal.lock`` is not ahead of the file (rows lost);
6. each ``SEQ:HEAD`` given (a chain head a floor system received in a floor record or the status
   message) is a link of this journal's chain at that ``seq``: the journal still holds exactly the
   history the floor saw. A head that is not on the chain means the journal was rolled back or replaced.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from tablesense.daemon.journal import blocks as bk
from tablesense.daemon.journal.errors import JournalDamaged, JournalError, classify_sqlite_error
from tablesense.daemon.journal.seal import (
    HINT_BYTES,
    InputRow,
    MarkRow,
    MessageRow,
    PruneRow,
    decode_row,
    describe,
    genesis,
    hint,
    link,
)
from tablesense.daemon.journal.store import HEAD_RECORD_BYTES, JOURNAL_FILE, LOCK_FILE, check_head_record

__all__ = ["AuditReport", "SealedSnapshot", "audit", "parse_head", "sealed_snapshot"]


@dataclass
class AuditReport:
    """What :func:`audit` found. ``ok``: every check passed; ``failure``: the first one that did not
    (one line naming the row, block or record). ``heads``: each ``(seq, head)`` asked about and whether
    the chain holds it (``True``), does not (``False``), or no longer holds rows that old (``None``)."""

    path: Path
    table: str = ""
    epoch: str = ""
    chain_seq: int = 0
    chain_head: str = ""
    entries: int = 0
    inputs: int = 0
    messages: int = 0
    marks: int = 0
    prunes: int = 0
    blocks: int = 0
    pending: int = 0
    first_seq: int | None = None
    failure: str | None = None
    heads: list[tuple[int, str, bool | None]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check failed and every head asked about is on the chain."""
        return self.failure is None and all(found for _, _, found in self.heads)

    @property
    def rows(self) -> int:
        """Rows held (entries and messages)."""
        return self.entries + self.messages


def parse_head(text: str) -> tuple[int, str]:
    """``"SEQ:HEAD"`` -> ``(seq, head)``; ``ValueError`` naming what is wrong."""
    seq_text, sep, head = text.strip().partition(":")
    if not sep or not seq_text.isdigit() or len(head) != 64:
        raise ValueError(f"{text[:80]!r} is not SEQ:HEAD (a seq, a colon, 64 hex digits)")
    try:
        bytes.fromhex(head)
    except ValueError:
        raise ValueError(f"{text[:80]!r}: the head is not hex") from None
    return int(seq_text), head.lower()


def audit(directory: Path | str, key: bytes, heads: list[tuple[int, str]] | None = None) -> AuditReport:
    """Audit the journal in ``directory`` with ``key`` (see the module doc). Never raises for what it
    finds (it is in the report); raises :class:`JournalError` only when the file cannot be opened."""
    path = Path(directory) / JOURNAL_FILE
    report = AuditReport(path=path)
    wanted = {(seq, head) for seq, head in heads or []}
    if not path.is_file():
        raise JournalError(f"no journal at {path}")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0,
                               isolation_level=None)
    except sqlite3.Error as exc:
        raise classify_sqlite_error(exc, "open for verify") from None
    found: set[tuple[int, str]] = set()
    try:
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute("BEGIN")
        try:
            _check(conn, key, path, report, wanted, found)
        except JournalDamaged as exc:
            report.failure = str(exc)
        except sqlite3.DatabaseError as exc:
            report.failure = f"journal {path} is damaged: {exc}"
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("COMMIT")
    finally:
        conn.close()
    first = report.first_seq if report.first_seq is not None else report.chain_seq + 1
    report.heads = [(seq, head, True if (seq, head) in found else (None if seq < first - 1 else False))
                    for seq, head in heads or []]
    return report


def _check(conn: sqlite3.Connection, key: bytes, path: Path, report: AuditReport,
           wanted: set[tuple[int, str]], found: set[tuple[int, str]]) -> None:
    problems = [r[0] for r in conn.execute("PRAGMA integrity_check(20)")]
    if problems != ["ok"]:
        raise JournalDamaged(f"journal {path} failed SQLite's integrity check: {'; '.join(problems[:3])}")
    header = bk.read_header(conn, key, str(path))
    problem = bk.schema_problem(conn, str(path))
    if problem is not None:
        raise JournalDamaged(problem)
    meta, state = header.meta, header.state
    report.table, report.epoch = meta.table, meta.epoch
    report.chain_seq, report.chain_head = state.last_seq, state.head.hex()
    _check_lock_file(path.parent / LOCK_FILE, key, meta.epoch, state, conn)
    beyond = bk.rows_beyond_head(conn, state, str(path))
    if beyond is not None:
        raise JournalDamaged(beyond)
    pending = {int(r[0]) for r in conn.execute("SELECT seq FROM pending")}
    report.pending = len(pending)
    if len(pending) != state.last_seq - state.delivered or any(not 1 <= s <= state.last_seq for s in pending):
        expected = state.last_seq - state.delivered
        raise JournalDamaged(f"journal {path}: {len(pending)} message(s) await delivery, the sealed counters "
                             f"say {expected}: delivery marks altered without the key")
    want_seqs = {seq for seq, _ in wanted}
    previous: bk.Block | None = None
    unmarked: dict[int, bool] = {}  # seq -> held in a block from base on (must be marked or pending)
    covered = 0
    for block in bk.blocks_after(conn, state, 1):
        island = block.id < state.base
        if previous is None and not island and state.base == 1:
            origin = genesis(key, meta.table, meta.epoch, meta.created_at)
            if block.id != 1 or block.link_before != origin:
                raise JournalDamaged(f"journal {path}: {block.label} is not the journal's first block (rows "
                                     "deleted from its beginning)")
        if previous is not None and not island and previous.id >= state.base and (
                block.id != previous.last_entry + 1 or block.link_before != previous.link_after
                or block.first_seq != previous.last_seq + 1):
            raise JournalDamaged(f"journal {path}: {block.label} does not follow {previous.label} (a block "
                                 "deleted or its links altered)")
        if previous is None or block.id != previous.last_entry + 1:
            covered = block.first_seq - 1
        blobs, hints = bk.block_blobs(conn, block)
        if len(hints) != HINT_BYTES * len(blobs):
            raise JournalDamaged(f"{block.label}: {len(blobs)} rows but {len(hints) // HINT_BYTES} hints")
        current = block.link_before
        rows = []
        for i, blob in enumerate(blobs):
            current = link(key, current, blob)
            if hint(current) != hints[i * HINT_BYTES:(i + 1) * HINT_BYTES]:
                what = describe(blob, f"row {i + 1}")
                raise JournalDamaged(f"journal {path}: {block.label}: {what} fails its seal (altered, "
                                     "inserted, or a row before it removed, without the key)")
            row = decode_row(blob, block.label)
            rows.append(row)
            if isinstance(row, MessageRow):
                covered = row.seq
            if covered in want_seqs and (covered, current.hex()) in wanted:
                found.add((covered, current.hex()))
        if current != block.link_after:
            raise JournalDamaged(f"journal {path}: {block.label}: its rows do not end at the block's sealed "
                                 "link (a row removed or altered at its end, or the link altered)")
        bk._check_order(block, rows, meta.created_at)
        for row in rows:
            report.entries += not isinstance(row, MessageRow)
            if isinstance(row, MessageRow):
                report.messages += 1
                if report.first_seq is None:
                    report.first_seq = row.seq
                if row.seq not in pending:
                    unmarked[row.seq] = not island
            elif isinstance(row, InputRow):
                report.inputs += 1
            elif isinstance(row, MarkRow):
                report.marks += 1
                for lo, hi in row.ranges:
                    for seq in range(lo, hi + 1):
                        if seq in pending:
                            raise JournalDamaged(f"journal {path}: seq {seq} is pending, but {block.label} "
                                                 f"acknowledged it (entry {row.entry})")
                        unmarked.pop(seq, None)
            elif isinstance(row, PruneRow):
                report.prunes += 1
        report.blocks += not block.is_open
        previous = block
    orphans = sorted(seq for seq, checked in unmarked.items() if checked)
    if orphans:
        raise JournalDamaged(f"journal {path}: seq {orphans[0]} (and {len(orphans) - 1} more) is neither "
                             "pending nor acknowledged by a sealed mark: marked delivered without the key")


def _check_lock_file(lock: Path, key: bytes, epoch: str, state: bk.State, conn: sqlite3.Connection) -> None:
    try:
        with open(lock, "rb") as f:
            data = f.read(HEAD_RECORD_BYTES)
    except OSError:
        return
    check_head_record(data, key, epoch, state, f"journal {lock.parent / JOURNAL_FILE}", conn)


@dataclass
class SealedSnapshot:
    """Every row a journal holds, in chain order (``rows``: :class:`~daemon.journal.seal.InputRow`,
    :class:`~daemon.journal.seal.MessageRow`, :class:`~daemon.journal.seal.MarkRow`, ...), each block
    verified against its seal, and the ``seq`` of every message not yet acknowledged (``pending``)."""

    rows: list[object]
    pending: set[int]

    def messages(self) -> list[MessageRow]:
        """The message rows, in ``seq`` order."""
        return sorted((r for r in self.rows if isinstance(r, MessageRow)), key=lambda r: r.seq)


def sealed_snapshot(directory: Path | str, key: bytes) -> SealedSnapshot:
    """Read every row of the journal in ``directory`` from one read-only snapshot (also while the daemon
    writes it), verifying each block against the chain: for tools and benchmarks that compare what a
    table journaled with what its consumers received.

    Raises:
        JournalDamaged: a block fails its seal, or the file is not this key's journal.
        JournalError: the file cannot be opened or read.
    """
    path = Path(directory) / "journal.sqlite"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10,
                               isolation_level=None)
    except sqlite3.Error as exc:
        raise classify_sqlite_error(exc, "open") from None
    try:
        conn.execute("BEGIN")  # one snapshot: the writer may archive or append meanwhile
        state = bk.read_header(conn, key, str(directory)).state
        rows: list[object] = []
        for block in bk.blocks_after(conn, state, 1):
            rows += bk.verified_rows(conn, key, block)
        pending = {int(r[0]) for r in conn.execute("SELECT seq FROM pending")}
        conn.execute("COMMIT")
        return SealedSnapshot(rows, pending)
    except sqlite3.Error as exc:
        raise classify_sqlite_error(exc, "read") from None
    finally:
        conn.close()
