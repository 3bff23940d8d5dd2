"""Game recall: full records of the last rounds, read from the journal by any process, also while the
daemon is writing it (the current game and at
least the 9 before it, AGCO / Fla. Admin. Code 75-14.043).

:func:`open_for_recall` opens ``journal.sqlite`` with a separate read-only connection
(``file:...?mode=ro``); WAL mode lets it read a consistent snapshot without blocking the writer. Each
:class:`RoundRecord` is built from the journal only:

* a complete round: its ``FloorRound`` message (every card in draw order with where it went, face-down
  cards included, locked wagers, settlements, alarms, spot changes, commands, timestamps, void flag);
* the round still open: the public cards of its latest ``RoundState``, the settlements and alarms
  published so far, the spot changes and operator commands journaled so far, and a count of the cards
  drawn that are not public yet. Face-down cards of an open round are never shown (the information
  barrier): they appear in recall once the round is complete.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from tablesense.daemon.journal.codec import decode_event
from tablesense.daemon.journal.errors import JournalDamaged, JournalError, classify_sqlite_error
from tablesense.daemon.journal.schema import SCHEMA_VERSION, input_crc, outbox_crc
from tablesense.daemon.journal.store import JOURNAL_FILE, MIN_RETENTION_ROUNDS
from tablesense.daemon.messages import (
    AlarmMessage,
    AlarmRecord,
    BaccaratOutcome,
    BoxResult,
    CardRecord,
    CommandRecord,
    FloorRound,
    RoundResults,
    RoundState,
    SettlementMessage,
    SettlementRecord,
    SpotChangeRecord,
    WagerRecord,
    decode_message,
)
from tablesense.drivers.events import CardDrawn, CardUnreadable

__all__ = ["InputRef", "JournalMissing", "MessageRef", "RecallReader", "RoundRecord", "open_for_recall",
           "round_id"]


_R = TypeVar("_R")


class JournalMissing(JournalError):
    """There is no journal in the given directory."""


class MessageRef(msgspec.Struct, kw_only=True, frozen=True):
    """One published (or still pending) message of the round: its ``seq``, ``msg_id``, schema, channel,
    the time of the input that caused it and when the broker acknowledged it (``None``: not yet)."""

    seq: int
    msg_id: str
    schema: str
    channel: str
    ts: str
    delivered_at: str | None


class InputRef(msgspec.Struct, kw_only=True, frozen=True):
    """A journaled input of a round still open (cards excluded: they are counted, not shown, until the
    round is complete): its arrival time, kind (``SpotChanged``, ``DealerButton``, ``Command``...),
    device and device seq, and its fields."""

    ts: str
    kind: str
    device: str | None
    device_seq: int | None
    detail: dict[str, Any]


class RoundRecord(msgspec.Struct, kw_only=True, frozen=True):
    """Everything the journal holds about one round, for recall.

    Attributes:
        round_id: ``"{shoe}-{round}"`` (what ``tablesense recall --round`` takes).
        status: ``complete``, ``void`` (complete and voided), ``open`` (the latest round, in progress) or
            ``incomplete`` (an earlier round that never completed, e.g. opened for betting when the shoe
            ended).
        started_ts / ended_ts: ISO-8601 UTC times of the round's first message and of its completion.
        cards: every card out of the shoe in draw order with its position (hand/box/board) (open round:
            the public cards only).
        hidden_cards: open round only: cards drawn but not yet public (never shown before completion).
        burns, wagers, settlements, alarms, spot_changes, commands: as in the floor record (open round:
            the settlements and alarms published so far; the locked wagers, spot changes and commands
            as the machine judged them come with the floor record, see ``events``).
        events: open round only: the inputs journaled so far other than cards (spot changes, buttons,
            commands, device states) exactly as they arrived.
        baccarat / boxes / dealer / board: the results.
        messages: every message of the round in ``seq`` order with its delivery time.
    """

    table: str
    round_id: str
    shoe: int | None
    round: int | None
    game: str | None
    status: str
    void: bool
    started_ts: str
    ended_ts: str | None
    phase: str | None = None
    held: bool = False
    cards: tuple[CardRecord, ...] = ()
    hidden_cards: int = 0
    burns: tuple[CardRecord, ...] = ()
    wagers: tuple[WagerRecord, ...] = ()
    settlements: tuple[SettlementRecord, ...] = ()
    alarms: tuple[AlarmRecord, ...] = ()
    spot_changes: tuple[SpotChangeRecord, ...] = ()
    commands: tuple[CommandRecord, ...] = ()
    baccarat: BaccaratOutcome | None = None
    boxes: tuple[BoxResult, ...] = ()
    dealer: tuple[str, ...] = ()
    board: tuple[str, ...] = ()
    events: tuple[InputRef, ...] = ()
    messages: tuple[MessageRef, ...] = ()


def round_id(shoe: Any, rnd: Any) -> str:
    """The recall id of a round: ``"{shoe}-{round}"``."""
    return f"{shoe}-{rnd}"


def open_for_recall(directory: Path | str) -> RecallReader:
    """Open the journal in ``directory`` read-only for recall.

    Raises :class:`JournalMissing` when there is no journal, :class:`JournalDamaged` when it fails its
    quick check or is not a tablesense journal of a schema this build reads.
    """
    return RecallReader(Path(directory) / JOURNAL_FILE)


class RecallReader:
    """Read-only access to the rounds in a journal (see :func:`open_for_recall`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.is_file():
            raise JournalMissing(f"no journal at {path}")
        try:
            uri = f"{path.resolve().as_uri()}?mode=ro"
            self._conn: sqlite3.Connection | None = sqlite3.connect(uri, uri=True, timeout=10.0,
                                                                    isolation_level=None)
        except sqlite3.Error as exc:
            raise classify_sqlite_error(exc, "open for recall") from None
        try:
            self._conn.execute("PRAGMA busy_timeout=10000")
            try:
                problems = [r[0] for r in self._conn.execute("PRAGMA quick_check(20)")]
            except sqlite3.DatabaseError as exc:
                raise JournalDamaged(f"journal {path} is damaged: {exc}") from None
            if problems != ["ok"]:
                raise JournalDamaged(f"journal {path} failed its integrity check: {'; '.join(problems[:3])}")
            version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
            if version != SCHEMA_VERSION:
                raise JournalDamaged(f"journal {path} has schema version {version}; this tablesense reads "
                                     f"version {SCHEMA_VERSION}")
            row = self._conn.execute("SELECT table_id FROM meta WHERE id = 1").fetchone()
            if row is None:
                raise JournalDamaged(f"journal {path}: meta record missing")
            self.table: str = row[0]
        except sqlite3.Error as exc:
            self.close()
            raise classify_sqlite_error(exc, "open for recall") from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the read-only connection (idempotent)."""
        conn: sqlite3.Connection | None = getattr(self, "_conn", None)
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            self._conn = None

    def __enter__(self) -> RecallReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rounds(self, last: int = MIN_RETENTION_ROUNDS) -> list[RoundRecord]:
        """The last ``last`` rounds (oldest first, the current round last), read from one snapshot.

        Raises ``ValueError`` for ``last < 1``, :class:`JournalDamaged` for a row failing its checksum.
        """
        if last < 1:
            raise ValueError(f"last must be at least 1, got {last}")
        return self._read("SELECT id, shoe, round, started_ts, ended_ts, complete FROM rounds "
                          "ORDER BY id DESC LIMIT ?", (last,))[::-1]

    def round(self, rid: str) -> RoundRecord:
        """The round ``rid``: ``"{shoe}-{round}"``, or a bare round number (the latest round with that
        number). Raises ``KeyError`` naming the id when the journal does not hold it."""
        text = rid.strip()
        shoe_txt, sep, round_txt = text.rpartition("-")
        try:
            rnd = int(round_txt)
            shoe = int(shoe_txt) if sep else None
        except ValueError:
            raise KeyError(f"round id {rid[:40]!r} is not SHOE-ROUND or ROUND (numbers)") from None
        if any(n is not None and not 0 <= n < 1 << 63 for n in (shoe, rnd)):  # SQLite integers are 64-bit
            raise KeyError(f"the journal holds no round {rid[:40]!r}")
        if sep:
            found = self._read("SELECT id, shoe, round, started_ts, ended_ts, complete FROM rounds "
                               "WHERE shoe IS ? AND round IS ?", (shoe, rnd))
        else:
            found = self._read("SELECT id, shoe, round, started_ts, ended_ts, complete FROM rounds "
                               "WHERE round IS ? ORDER BY id DESC LIMIT 1", (rnd,))
        if not found:
            raise KeyError(f"the journal holds no round {rid[:40]!r}")
        return found[0]

    # ------------------------------------------------------------------ building records

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[RoundRecord]:
        conn = self._conn
        if conn is None:
            raise JournalError("recall reader is closed")
        try:
            conn.execute("BEGIN")  # one WAL snapshot for the whole answer
            try:
                latest = conn.execute("SELECT max(id) FROM rounds").fetchone()[0]
                return [self._record(conn, r, r[0] == latest) for r in conn.execute(sql, params).fetchall()]
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise classify_sqlite_error(exc, "recall") from None

    def _record(self, conn: sqlite3.Connection, r: tuple[Any, ...], current: bool) -> RoundRecord:
        ref, shoe, rnd, started, ended, complete = r
        messages: list[tuple[MessageRef, Any]] = []
        for m in conn.execute("SELECT row_id, msg_id, schema, channel, device, retain, qos, created_ts, "
                              "payload, crc, delivered_at FROM outbox WHERE round_ref = ? ORDER BY row_id",
                              (ref,)):
            (row_id, msg_id, schema, channel, device, retain, qos, created_ts, payload, crc, delivered) = m
            if outbox_crc(row_id, msg_id, schema, channel, device, bool(retain), qos, created_ts,
                          payload) != crc:
                raise JournalDamaged(f"journal {self.path}: outbox row {row_id} fails its checksum")
            try:
                decoded: Any = decode_message(bytes(payload))
            except (msgspec.DecodeError, msgspec.ValidationError):
                decoded = None  # a schema this build does not know: listed, not interpreted
            messages.append((MessageRef(seq=row_id, msg_id=msg_id, schema=schema, channel=channel,
                                        ts=created_ts, delivered_at=delivered), decoded))
        inputs: list[tuple[str, Any]] = []
        events: list[InputRef] = []
        for i in conn.execute("SELECT id, ts, kind, device, device_seq, payload, crc FROM inputs "
                              "WHERE round_ref = ? ORDER BY id", (ref,)):
            if input_crc(i[0], i[1], i[2], i[3], i[4], i[5]) != i[6]:
                raise JournalDamaged(f"journal {self.path}: input {i[0]} fails its checksum")
            event = decode_event(i[2], bytes(i[5]))
            inputs.append((i[1], event))
            if not isinstance(event, CardDrawn | CardUnreadable):
                detail = msgspec.to_builtins(event)
                events.append(InputRef(ts=i[1], kind=i[2], device=i[3], device_seq=i[4],
                                       detail=detail if isinstance(detail, dict) else {"value": detail}))
        refs = tuple(ref_ for ref_, _ in messages)
        floor = _last(m for _, m in messages if isinstance(m, FloorRound))
        if complete and floor is not None:
            return RoundRecord(
                table=self.table, round_id=round_id(shoe, rnd), shoe=shoe, round=rnd, game=floor.game,
                status="void" if floor.void else "complete", void=floor.void, started_ts=started,
                ended_ts=floor.completed_ts or ended, phase="complete", cards=floor.cards, burns=floor.burns,
                wagers=floor.wagers, settlements=floor.settlements, alarms=floor.alarms,
                spot_changes=floor.spot_changes, commands=floor.commands, baccarat=floor.baccarat,
                boxes=floor.boxes, dealer=floor.dealer, board=floor.board, messages=refs)
        return self._open_record(shoe, rnd, started, ended, [m for _, m in messages], inputs, refs,
                                 tuple(events), "open" if current else "incomplete")

    def _open_record(self, shoe: Any, rnd: Any, started: str, ended: str | None, decoded: list[Any],
                     inputs: list[tuple[str, Any]], refs: tuple[MessageRef, ...],
                     events: tuple[InputRef, ...], status: str) -> RoundRecord:
        state = _last(m for m in decoded if isinstance(m, RoundState))
        results = _last(m for m in decoded if isinstance(m, RoundResults))
        drawn = [(ts, ev) for ts, ev in inputs if isinstance(ev, CardDrawn | CardUnreadable)]
        cards: list[CardRecord] = []
        pub_ts = state.ts if state is not None else started
        for pub in state.cards if state is not None else ():
            ts, ev = drawn[pub.index - 1] if 0 < pub.index <= len(drawn) else (pub_ts, None)
            cards.append(CardRecord(index=pub.index, card=pub.card, position=pub.position, face_up=True,
                                    status="dealt", ts=ts, device=getattr(ev, "device", None),
                                    device_seq=getattr(ev, "seq", None)))
        settlements = tuple(_as(SettlementRecord, m) for m in decoded if isinstance(m, SettlementMessage))
        alarms = tuple(_as(AlarmRecord, m) for m in decoded if isinstance(m, AlarmMessage))
        void = bool((state is not None and state.void) or (results is not None and results.void))
        return RoundRecord(
            table=self.table, round_id=round_id(shoe, rnd), shoe=shoe, round=rnd,
            game=state.game if state is not None else (results.game if results is not None else None),
            status=status, void=void, started_ts=started, ended_ts=ended,
            phase=state.phase if state is not None else None, held=bool(state is not None and state.held),
            cards=tuple(cards), hidden_cards=max(0, len(drawn) - len(cards)), settlements=settlements,
            alarms=alarms, events=events,
            baccarat=results.baccarat if results is not None else None,
            boxes=results.boxes if results is not None else (),
            dealer=results.dealer if results is not None else (),
            board=results.board if results is not None else (), messages=refs)


def _as(record: type[_R], message: Any) -> _R:
    """The floor-record form of a published message (same fields; the message header dropped)."""
    return msgspec.convert(msgspec.to_builtins(message), record)


def _last(items: Iterable[Any]) -> Any:
    out = None
    for item in items:
        out = item
    return out
