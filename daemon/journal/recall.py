"""Game recall: full records of the last rounds, read from the journal by any process, also while the
daemon is writing it: the current game and at least the 9 before it (AGCO "most recent game plus 9
prior"; Fla. Admin. Code 75-14.043 "last 10 games").

:func:`open_for_recall` opens ``journal.sqlite`` with a separate read-only connection
(``file:...?mode=ro``); WAL mode lets it read a consistent snapshot without blocking the writer. It
needs the table's key: every block it reads is verified against the sealed chain first, so recall never
shows a forged row as genuine (a row that fails its seal makes :class:`JournalDamaged` naming it). Each
:class:`RoundRecord` is built from the journal only:

* a complete round: its ``FloorRound`` message (every card in draw order with where it went, face-down
  cards included, locked wagers, settlements, alarms, spot changes, commands, timestamps, void flag);
* the round still open: the public cards of its latest ``RoundState``, the settlements and alarms
  published so far, the spot changes and operator commands journaled so far, and a count of the cards
  drawn that are not public yet. Face-down cards of an open round are never shown (the information
  barrier): they appear in recall once the round is complete. One rule decides what of an open round is
  shown (:func:`_public_inputs`): a card is shown only when the machine's own published round state
  (built by :func:`daemon.table.barrier.public_cards`) shows it -- also a card a supervisor entered with
  ``enter_card``, whose argument is left out (``withheld``) while that card is face down.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from tablesense.daemon.journal import blocks as bk
from tablesense.daemon.journal.codec import decode_event, event_device
from tablesense.daemon.journal.errors import JournalDamaged, JournalError, classify_sqlite_error
from tablesense.daemon.journal.key import DEFAULT_KEY_FILE, load_key
from tablesense.daemon.journal.seal import InputRow, MarkRow, MessageRow
from tablesense.daemon.journal.store import JOURNAL_FILE, MIN_RETENTION_ROUNDS, message_schema
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
from tablesense.daemon.rules.cards import Card, InvalidCard
from tablesense.daemon.table.inputs import Command
from tablesense.drivers.events import CardDrawn, CardUnreadable, ShoeStatus

__all__ = ["InputRef", "JournalMissing", "MessageRef", "RecallReader", "RoundRecord", "open_for_recall",
           "round_id"]


_R = TypeVar("_R")


class JournalMissing(JournalError):
    """There is no journal in the given directory."""


class MessageRef(msgspec.Struct, kw_only=True, frozen=True):
    """One published (or still pending) message of the round: its ``seq``, ``msg_id``, schema, channel,
    the time of the input that caused it, whether the broker acknowledged it and when the journal
    recorded that (``delivered_at``; ``None`` while not acknowledged, or when the sealed mark is no
    longer held)."""

    seq: int
    msg_id: str
    schema: str
    channel: str
    ts: str
    delivered: bool = False
    delivered_at: str | None = None


class InputRef(msgspec.Struct, kw_only=True, frozen=True):
    """A journaled input of a round still open (cards excluded: they are counted, not shown, until the
    round is complete): its arrival time, kind (``SpotChanged``, ``DealerButton``, ``Command``...),
    device and device seq, and its fields. A field that could name a face-down card (the ``card`` of an
    ``enter_card`` whose card is not public, a burned card, a rejected input) is left out and the key
    ``withheld`` says what was left out."""

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


def open_for_recall(directory: Path | str, key: bytes | None = None) -> RecallReader:
    """Open the journal in ``directory`` read-only for recall, with the table's sealing ``key`` (``None``:
    the default credential, :func:`daemon.journal.key.load_key`).

    Raises :class:`JournalMissing` when there is no journal, :class:`JournalDamaged` when it fails its
    checks (structure of the small tables, schema, key, sealed state),
    :class:`~daemon.journal.key.JournalKeyError` when no key can be read.
    """
    path = Path(directory) / JOURNAL_FILE
    if not path.is_file():
        raise JournalMissing(f"no journal at {path}")
    return RecallReader(path, load_key(DEFAULT_KEY_FILE) if key is None else key)


_QUICK_CHECKED = ("meta", "state", "blocks", "pending", "log", "outbox")
"""Tables ``PRAGMA quick_check`` covers when recall opens a journal (all but the archive, whose rows are
verified against the chain when read): opening stays fast however big the journal is."""
_MARK_BLOCKS = 4
"""Blocks read past an older round's own for the delivery marks of its messages."""


def _schema(decoded: Any, row: MessageRow) -> str:
    if decoded is not None:
        return message_schema(decoded)
    try:
        head = msgspec.json.decode(row.payload, type=dict[str, Any])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "?"
    return str(head.get("schema", "?"))


@dataclass
class _Round:
    """What one pass over the chain collected about one round."""

    key: tuple[Any, Any]
    started_ts: str
    messages: list[tuple[MessageRow, str, Any]] = field(default_factory=list)
    inputs: list[tuple[str, str, Any, list[Any]]] = field(default_factory=list)
    """``(ts, kind, input, the messages that input caused)`` in journal order."""
    complete: bool = False
    ended_ts: str | None = None


class RecallReader:
    """Read-only, verified access to the rounds in a journal (see :func:`open_for_recall`)."""

    def __init__(self, path: Path, key: bytes) -> None:
        self.path = path
        self._key = key
        self._units = bk.UnitCache()
        self._marks: dict[int, str] = {}
        self._pending: set[int] = set()
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
                tables = {r[0] for r in self._conn.execute(
                    "SELECT name FROM sqlite_schema WHERE type = 'table'")}
                for name in _QUICK_CHECKED:
                    if name in tables:
                        problems = [r[0] for r in self._conn.execute(f"PRAGMA quick_check({name})")]
                        if problems != ["ok"]:
                            raise JournalDamaged(f"journal {path} failed its integrity check ({name}): "
                                                 f"{'; '.join(problems[:3])}")
            except sqlite3.DatabaseError as exc:
                raise JournalDamaged(f"journal {path} is damaged: {exc}") from None
            header = bk.read_header(self._conn, key, str(path))
            self.table: str = header.meta.table
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

        Raises ``ValueError`` for ``last < 1``, :class:`JournalDamaged` for a block failing its seal.
        """
        if last < 1:
            raise ValueError(f"last must be at least 1, got {last}")
        return self._snapshot(lambda conn, state: self._last_rounds(conn, state, last))

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
        found = self._snapshot(lambda conn, state: self._one_round(conn, state, shoe, rnd, bool(sep)))
        if not found:
            raise KeyError(f"the journal holds no round {rid[:40]!r}")
        return found[0]

    # ------------------------------------------------------------------ reading

    def _snapshot(self, read: Any) -> list[RoundRecord]:
        conn = self._conn
        if conn is None:
            raise JournalError("recall reader is closed")
        try:
            conn.execute("BEGIN")  # one WAL snapshot for the whole answer
            try:
                state = bk.read_header(conn, self._key, str(self.path)).state
                result: list[RoundRecord] = read(conn, state)
                return result
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise classify_sqlite_error(exc, "recall") from None

    def _last_rounds(self, conn: sqlite3.Connection, state: bk.State, last: int) -> list[RoundRecord]:
        # one completed round more than asked: a round's first message is in the block before its own
        row = conn.execute("SELECT id FROM blocks INDEXED BY blocks_done WHERE round IS NOT NULL "
                           "ORDER BY id DESC LIMIT 1 OFFSET ?", (last,)).fetchone()
        start = int(row[0]) if row is not None else self._first_block(conn, state)
        rounds = self._collect(conn, state, start, None)
        keys = list(rounds)[-last:]
        return [self._record(rounds[k], k == keys[-1]) for k in keys]

    def _first_block(self, conn: sqlite3.Connection, state: bk.State) -> int:
        row = conn.execute("SELECT min(id) FROM blocks").fetchone()
        return int(row[0]) if row is not None and row[0] is not None else state.open_entry

    def _one_round(self, conn: sqlite3.Connection, state: bk.State, shoe: int | None, rnd: int,
                   with_shoe: bool) -> list[RoundRecord]:
        if with_shoe:
            row = conn.execute("SELECT id FROM blocks INDEXED BY blocks_round WHERE shoe = ? AND round = ? "
                               "ORDER BY id DESC LIMIT 1", (shoe, rnd)).fetchone()
        else:
            row = conn.execute("SELECT id FROM blocks WHERE round IS ? ORDER BY id DESC LIMIT 1",
                               (rnd,)).fetchone()
        if row is not None:  # a completed round: its block, the one before (its first message), a few after
            before = conn.execute("SELECT id FROM blocks WHERE id < ? ORDER BY id DESC LIMIT 1",
                                  (int(row[0]),)).fetchone()
            start, stop = (int(before[0]) if before is not None else int(row[0])), int(row[0])
            rounds = self._collect(conn, state, start, stop)
        else:  # the open round, or one that never completed: look through the latest blocks
            recent = conn.execute("SELECT id FROM blocks ORDER BY id DESC LIMIT 1 OFFSET 32").fetchone()
            stop = None
            rounds = self._collect(conn, state, int(recent[0]) if recent else self._first_block(conn, state),
                                   None)
        keys = [k for k in rounds if k[1] == rnd and (not with_shoe or k[0] == shoe)]
        if not keys:
            return []
        latest = list(rounds)[-1] if stop is None else None
        return [self._record(rounds[keys[-1]], keys[-1] == latest)]

    def _collect(self, conn: sqlite3.Connection, state: bk.State, start: int, stop: int | None
                 ) -> dict[tuple[Any, Any], _Round]:
        """Walk the verified blocks from the one holding entry ``start`` (through block ``stop`` and then
        :data:`_MARK_BLOCKS` more for the delivery marks, or to the head): the messages and inputs of
        every round in order of first appearance, and when each message was acknowledged. An input
        belongs to the round of its first message, else to the round of the latest message before it."""
        rounds: dict[tuple[Any, Any], _Round] = {}
        self._marks = {}
        current: _Round | None = None
        held: tuple[str, str, Any, list[Any]] | None = None
        caused: list[Any] | None = None  # the messages of the latest input, in order
        extra = 0
        first = bk.block_of_entry(conn, state, start) or bk.open_block(state)
        for block in bk.blocks_after(conn, state, first.id):
            collecting = stop is None or block.id <= stop
            if not collecting:
                extra += 1
            ts = ""
            for row in bk.verified_rows(conn, self._key, block, self._units):
                if isinstance(row, MessageRow):
                    if not collecting:
                        continue
                    try:
                        decoded: Any = decode_message(row.payload)
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        decoded = None  # a schema this build does not know: listed, not interpreted
                    if caused is not None:
                        caused.append(decoded)
                    rnd = getattr(decoded, "round", None)
                    if rnd is None:
                        continue
                    key = (getattr(decoded, "shoe", None), rnd)
                    rec = rounds.get(key)
                    if rec is None:
                        rec = rounds[key] = _Round(key, ts)
                    rec.messages.append((row, ts, decoded))
                    if isinstance(decoded, FloorRound):
                        rec.complete, rec.ended_ts = True, ts
                    if held is not None:
                        rec.inputs.append(held)
                        held = None
                    current = rec
                    continue
                if held is not None and current is not None:
                    current.inputs.append(held)
                held = None
                if isinstance(row, MarkRow):
                    for lo, hi in row.ranges:
                        for seq in range(lo, hi + 1):
                            self._marks.setdefault(seq, row.ts)
                elif isinstance(row, InputRow):
                    ts = row.ts
                    caused = None
                    if collecting:
                        caused = []
                        held = (row.ts, row.kind, decode_event(row.kind, row.payload), caused)
            if held is not None and current is not None:
                current.inputs.append(held)
            held = None
            if block.is_open or (stop is not None and extra >= _MARK_BLOCKS):
                break
        self._pending = {int(r[0]) for r in conn.execute("SELECT seq FROM pending")}
        return rounds

    def _record(self, rec: _Round, latest: bool) -> RoundRecord:
        refs = tuple(MessageRef(seq=row.seq, msg_id=row.msg_id, schema=_schema(decoded, row),
                                channel=row.channel, ts=ts, delivered=row.seq not in self._pending,
                                delivered_at=None if row.seq in self._pending else self._marks.get(row.seq))
                     for row, ts, decoded in rec.messages)
        shoe, rnd = rec.key
        floor = _last(m for _, _, m in rec.messages if isinstance(m, FloorRound))
        if rec.complete and floor is not None:
            return RoundRecord(
                table=self.table, round_id=round_id(shoe, rnd), shoe=shoe, round=rnd, game=floor.game,
                status="void" if floor.void else "complete", void=floor.void, started_ts=rec.started_ts,
                ended_ts=floor.completed_ts or rec.ended_ts, phase="complete", cards=floor.cards,
                burns=floor.burns, wagers=floor.wagers, settlements=floor.settlements, alarms=floor.alarms,
                spot_changes=floor.spot_changes, commands=floor.commands, baccarat=floor.baccarat,
                boxes=floor.boxes, dealer=floor.dealer, board=floor.board, messages=refs)
        shown = _public_inputs(rec.key, rec.inputs)
        events = tuple(InputRef(ts=ts, kind=kind, device=event_device(event)[0],
                                device_seq=event_device(event)[1], detail=detail)
                       for ts, kind, event, detail in shown.events)
        inputs = [(ts, event) for ts, _, event, _ in rec.inputs]
        return self._open_record(shoe, rnd, rec.started_ts, rec.ended_ts, [m for _, _, m in rec.messages],
                                 inputs, refs, events, "open" if latest else "incomplete", shown.entered)

    def _open_record(self, shoe: Any, rnd: Any, started: str, ended: str | None, decoded: list[Any],
                     inputs: list[tuple[str, Any]], refs: tuple[MessageRef, ...],
                     events: tuple[InputRef, ...], status: str,
                     entered: dict[int, str] | None = None) -> RoundRecord:
        state = _last(m for m in decoded if isinstance(m, RoundState))
        results = _last(m for m in decoded if isinstance(m, RoundResults))
        drawn = [(ts, ev) for ts, ev in inputs if isinstance(ev, CardDrawn | CardUnreadable)]
        cards: list[CardRecord] = []
        pub_ts = state.ts if state is not None else started
        entered = entered or {}
        for pub in state.cards if state is not None else ():
            if pub.index in entered:  # entered by a supervisor (enter_card): the command's time, no device
                cards.append(CardRecord(index=pub.index, card=pub.card, position=pub.position, face_up=True,
                                        status="entered", ts=entered[pub.index]))
                continue
            ts, ev = drawn[pub.index - 1] if 0 < pub.index <= len(drawn) else (pub_ts, None)
            cards.append(CardRecord(index=pub.index, card=pub.card, position=pub.position, face_up=True,
                                    status="dealt", ts=ts, device=getattr(ev, "device", None),
                                    device_seq=getattr(ev, "seq", None)))
        # the public settlement does not say whether its spot changed after lock (signage reads it): the
        # machine raised PAST_POSTING / PRESENCE_CHANGED_AFTER_LOCK naming the spot, as it marks the record
        changed = {m.spot for m in decoded if isinstance(m, AlarmMessage) and m.spot
                   and m.code in ("PAST_POSTING", "PRESENCE_CHANGED_AFTER_LOCK")}
        settlements = tuple(_as(SettlementRecord, m, changed_after_lock=m.spot in changed)
                            for m in decoded if isinstance(m, SettlementMessage))
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


WITHHELD = "withheld"
"""The key an open round's input detail gets when recall leaves a field out: names what was left out."""


@dataclass
class _PublicInputs:
    """What of an open round's inputs recall may show (:func:`_public_inputs`)."""

    events: list[tuple[str, str, Any, dict[str, Any]]] = field(default_factory=list)
    """``(ts, kind, input, detail)`` of every input other than a device card, face-down cards left out."""
    entered: dict[int, str] = field(default_factory=dict)
    """Draw index -> time of each public card a supervisor entered (``enter_card``)."""


def _public_inputs(key: tuple[Any, Any], inputs: list[tuple[str, str, Any, list[Any]]]) -> _PublicInputs:
    """The information barrier for recall of a round that is not complete: the inputs journaled so far,
    showing only the cards the game's rules had made public.

    What is public is what the machine published: the ``cards`` of the round's :class:`RoundState`
    messages, which the machine builds only with its barrier rule
    (:func:`daemon.table.barrier.public_cards`: face up, or face down after a reveal that has happened;
    never a burn card). So a card named in an input is shown only when the machine's public state proves
    it public:

    * device cards (``CardDrawn``, ``CardUnreadable``) are never listed here (the public ones are in the
      card list, the others counted);
    * ``enter_card``: its ``card`` argument is shown when the round state published in answer to that
      command newly shows that card (a face-up slot) more often than device cards read earlier and not
      yet public could account for (the command may release a hold and place them too); else (the
      blackjack hole card, a UTH hand before the reveal, a refused command, text that is not a card) it
      is left out and ``withheld`` says so;
    * a burn reported by the shoe (``ShoeStatus`` with a card): the card is left out (burns are never
      public);
    * ``RejectedInput``: the original input and the error text (either may name a face-down card) are
      left out; the journal keeps them in full and the floor record shows them once the round is complete.
    """
    out = _PublicInputs()
    public: dict[int, str] = {}
    drawn: Counter[str] = Counter()  # device cards read so far (public or not)
    for ts, kind, event, caused in inputs:
        states = [m for m in caused if isinstance(m, RoundState) and (m.shoe, m.round) == key]
        after = {c.index: c.card for c in states[-1].cards} if states else public
        if isinstance(event, CardDrawn):
            drawn[str(event.card)] += 1
        if not isinstance(event, CardDrawn | CardUnreadable):
            detail = msgspec.to_builtins(event)
            if not isinstance(detail, dict):
                detail = {"value": detail}
            if kind == "RejectedInput":
                detail.pop("payload", None)
                detail.pop("error", None)
                detail[WITHHELD] = "the rejected input and its error (shown once the round is complete)"
            elif isinstance(event, ShoeStatus) and event.card is not None:
                detail.pop("card", None)
                detail[WITHHELD] = "the burned card (burns are never public)"
            elif isinstance(event, Command) and event.name == "enter_card" and "card" in event.args:
                card = _card_text(event.args["card"])
                new = [i for i, c in after.items() if i not in public and c == card]
                # device cards read earlier and not public yet may be placed by the same command (the
                # hold released): the entered card is public only if more such cards became public
                entered_public = Counter(public[i] for i in public if i in out.entered)
                unpublished = drawn - (Counter(public.values()) - entered_public)
                if card is not None and len(new) > unpublished[card]:
                    out.entered[new[0]] = ts  # an unreadable slot: drawn before what waited
                else:
                    args = detail.get("args")
                    if isinstance(args, dict):
                        args.pop("card", None)
                    detail[WITHHELD] = "the entered card: not public (face down until the round is complete)"
            out.events.append((ts, kind, event, detail))
        public = after
    return out


def _card_text(text: object) -> str | None:
    """The card ``text`` names, in the form round states use (``"QH"``), else ``None``."""
    try:
        return str(Card.parse(str(text)))
    except InvalidCard:
        return None


def _as(record: type[_R], message: Any, **extra: Any) -> _R:
    """The floor-record form of a published message (same fields, plus ``extra`` ones the record has
    and the public message does not; the message header dropped)."""
    return msgspec.convert(msgspec.to_builtins(message) | extra, record)


def _last(items: Iterable[Any]) -> Any:
    out = None
    for item in items:
        out = item
    return out
