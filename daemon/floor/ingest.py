"""One batch of table messages into the floor record, in the caller's transaction, exactly once.

For each MQTT message (:class:`Incoming`): the topic names the table and the channel
(``{prefix}/{table}/{channel}``, or ``{prefix}/{table}/replay/{channel}`` for a message the table
republished on the floor's ``cmd/replay``); the payload is decoded with the daemon's own msgspec
Structs (:func:`tablesense.daemon.messages.decode_message`). Then, inside a savepoint of its own:

* the raw message goes into ``messages`` keyed by ``msg_id`` (``INSERT ... ON CONFLICT (msg_id) DO
  NOTHING``: a repeated ``msg_id`` changes nothing, whichever floor process got it; the constraint, not
  a Python set, decides). The same ``msg_id`` with different bytes is quarantined (``MSG_ID_REUSED``);
  another ``msg_id`` for a ``(table, epoch, seq)`` the floor holds breaks the UNIQUE index and is
  quarantined (``SEQ_CONFLICT``);
* the floor-record rows derived from it, each keyed by the message's ``msg_id`` so they are written once:
  ``settlements`` (with the wager's paytable and exact house edge, :mod:`.edges`, under the table info
  before it in its epoch, which the database holds whichever process stored it), ``rounds`` with their
  ``wagers`` and ``commands`` (the floor record), ``alarms``;
* a payload that is not a tablesense message of that topic (not JSON, wrong schema for the topic, a topic
  level that is no table id, a ``table`` field naming another table, a bad timestamp, no ``msg_id`` or
  one that is not its table's and seq's) or that no daemon writes (:func:`content_problem`: an integer
  beyond +-(2**53 - 1), a NUL; an impossible settlement; a table info outside a config's bounds; a value
  the database refuses, :class:`~tablesense.daemon.floor.store.BadValue`) goes to ``quarantine`` with
  the reason (and a ``QUARANTINED`` floor alarm), never dropped silently, and the rest of the batch is
  stored: one message never holds up the others.

The rows every message of a table touches (``tables``, ``shoes``, ``seq_tracks``) are updated once per
batch and table, in table order, after the messages: two floor processes sharing the load then lock them
in the same order (no deadlock) and hold them briefly.

``status`` (retained, also the MQTT will; no ``seq``) updates the table's row: state, software, instance,
config digest, journal ``epoch``, ``last_seq`` and chain head. An epoch change raises ``EPOCH_CHANGED``.
``CHAIN_DISCONTINUITY`` (:mod:`.alarms`): a floor record whose chain head differs from the one another
floor record carried for the same chain seq, or a status whose chain or last seq is lower than a floor
record's / a message's the floor holds that was published before it. The status's head itself is never
compared: it is the link after the journal's last row, which delivery marks and inputs move while
``last_seq`` stays (every reconnect, e.g. after a broker restart, publishes a new one).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import msgspec

from tablesense.daemon.config import RATE_TEXT
from tablesense.daemon.floor.alarms import now_iso, raise_floor_alarm
from tablesense.daemon.floor.edges import house_edge, paytables_json
from tablesense.daemon.floor.store import BadValue, ConstraintViolation, DatabaseError, Tx
from tablesense.daemon.logging import get_logger
from tablesense.daemon.messages import (
    AlarmMessage,
    DeviceStatus,
    FloorRound,
    Message,
    RoundResults,
    RoundState,
    ScoreboardMessage,
    SettlementMessage,
    TableInfo,
    decode_message,
)
from tablesense.daemon.rules.games import GAMES
from tablesense.daemon.rules.money import MAX_AMOUNT, Odds, winnings
from tablesense.daemon.rules.settlement import Bet, Hand
from tablesense.daemon.rules.settlement import Outcome as WagerOutcome
from tablesense.daemon.topics import TABLE_ID

__all__ = ["CHANNEL_SCHEMAS", "Incoming", "Ingestor", "Outcome", "StatusFields", "content_problem",
           "msg_id_epoch", "split_topic"]

log = get_logger(component="floor")

CHANNEL_SCHEMAS: dict[str, type[Message]] = {
    "round": RoundState,
    "results": RoundResults,
    "settlements": SettlementMessage,
    "alarms": AlarmMessage,
    "devices": DeviceStatus,
    "floor/rounds": FloorRound,
    "scoreboard": ScoreboardMessage,
    "info": TableInfo,
}
"""Channel (topic after the table, ``devices/{name}`` as ``devices``) -> the one message class it carries."""

MAX_PAYLOAD = 1 << 20
"""Largest payload the floor decodes (1 MiB; the daemon's largest, a floor record, is a few KiB)."""

_EPOCH_RE = re.compile(r"^(?P<epoch>[0-9a-f]{8})-(?P<seq>[0-9]{1,16})(?:-[0-9A-Za-z]{1,32})?$")
_EPOCH = re.compile(r"[0-9a-f]{8}")
_UNSEQUENCED_ID = re.compile(r"[0-9A-Za-z_.-]{1,96}")  # after "{table}-": the daemon's seq 0 alarms
_BETS = frozenset(b.value for b in Bet)
_HANDS = frozenset(h.value for h in Hand)
_OUTCOMES = frozenset(o.value for o in WagerOutcome)
_CURRENCY = re.compile(r"[A-Z]{3}")

EARLIEST_TS = "1970-01-01T00:00:00.000000Z"
LATEST_TS = "9000-01-01T00:00:00.000000Z"
"""A message time outside ``[EARLIEST_TS, LATEST_TS)`` is quarantined: it cannot be a table's clock
(a controller without a clock starts at 1970), and the gaming day of the years 1 and 9999 overflows
Python's dates (the report computes each day's bounds)."""


class StatusFields(msgspec.Struct, kw_only=True, frozen=True):
    """The retained ``status`` message as the floor reads it (tablesense.status; the birth fields are
    optional so that a daemon older than them still decodes)."""

    schema: str
    table: str
    ts: str
    state: str
    detail: str = ""
    software: str | None = None
    instance: str | None = None
    config_digest: str | None = None
    epoch: str | None = None
    last_seq: int | None = None
    chain_seq: int | None = None
    chain_head: str | None = None


class _ChainFields(msgspec.Struct, kw_only=True, frozen=True):
    chain_seq: int | None = None
    chain_head: str | None = None


_STATUS = msgspec.json.Decoder(StatusFields)
_CHAIN = msgspec.json.Decoder(_ChainFields)
_JSON = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Incoming:
    """One MQTT message as received: ``topic``, ``payload`` bytes, the ``retain`` flag, when it arrived."""

    topic: str
    payload: bytes
    retain: bool = False
    received_at: str = field(default_factory=now_iso)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one message: ``kind`` is ``stored``, ``duplicate``, ``quarantined``, ``status`` or
    ``ignored`` (a topic the floor does not store); ``table``/``epoch``/``seq``/``msg_id`` when known."""

    kind: str
    table: str | None = None
    epoch: str | None = None
    seq: int = 0
    msg_id: str | None = None
    reason: str | None = None


def split_topic(prefix: str, topic: str) -> tuple[str, str, bool] | None:
    """``(table, channel, replayed)`` of ``{prefix}/{table}/[replay/]{channel}``; ``devices/x`` gives the
    channel ``devices``. ``None`` for a topic outside the prefix or without a channel."""
    head = prefix.rstrip("/") + "/"
    if not topic.startswith(head):
        return None
    table, _, rest = topic[len(head):].partition("/")
    if not table or not rest:
        return None
    replayed = rest.startswith("replay/")
    if replayed:
        rest = rest[len("replay/"):]
    channel = "devices" if rest.startswith("devices/") else rest
    return table, channel, replayed


def msg_id_epoch(table: str, msg_id: str, seq: int) -> str | None:
    """The journal epoch inside ``msg_id`` (``{table}-{epoch}-{seq}`` or ``...-{seq}-{random}``, the random
    part at most 32 characters), when its seq part equals ``seq``; else ``None``."""
    if not msg_id.startswith(table + "-"):
        return None
    m = _EPOCH_RE.match(msg_id[len(table) + 1:])
    if m is None or int(m.group("seq")) != seq:
        return None
    return m.group("epoch")


def canonical_ts(text: str) -> str:
    """``text`` (ISO 8601 with a zone) as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC (sortable as text).

    Raises:
        ValueError: not an ISO 8601 time with a zone, or one outside 1970-01-01 .. 8999-12-31 UTC
            (:data:`EARLIEST_TS`, :data:`LATEST_TS`; ``0001-01-01T00:00:00+01:00`` overflowed).
    """
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone")
    try:
        out = dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except OverflowError:
        out = ""
    if not EARLIEST_TS <= out < LATEST_TS:
        raise ValueError(f"time {text!r} is outside {EARLIEST_TS[:10]} .. 8999-12-31")
    return out


def content_problem(value: Any, path: str = "$") -> str | None:
    """What makes a decoded message unstorable, or ``None``: an integer beyond +-(2**53 - 1) (no amount,
    seq or number the daemon publishes is: :data:`~tablesense.daemon.rules.money.MAX_AMOUNT`; PostgreSQL's
    BIGINT stops at 2**63 - 1) or a text with a NUL character (PostgreSQL text cannot hold one). ``value``:
    :func:`msgspec.to_builtins` of the message; ``path`` names the place in the reason."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        if -MAX_AMOUNT <= value <= MAX_AMOUNT:
            return None
        return f"{path}: {value if value.bit_length() < 100 else f'a {value.bit_length()}-bit number'} is " \
               "beyond +-(2**53 - 1)"
    if isinstance(value, str):
        return f"{path}: text with a NUL character (U+0000)" if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            problem = content_problem(k, f"{path} key") or content_problem(v, f"{path}.{str(k)[:40]}")
            if problem is not None:
                return problem
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            if (problem := content_problem(v, f"{path}[{i}]")) is not None:
                return problem
    return None


def _settlement_problem(msg: SettlementMessage) -> str | None:
    """A settlement the daemon cannot have made (tablesense.rules.settlement ``settle_as``): an unknown
    bet, hand or outcome, a stake below 1 minor unit, or a net and commission that do not follow from the
    stake, the outcome and the odds."""
    if msg.bet not in _BETS:
        return f"unknown bet {msg.bet[:64]!r}"
    if msg.hand is not None and msg.hand not in _HANDS:
        return f"unknown hand {msg.hand[:64]!r}"
    if msg.outcome not in _OUTCOMES:
        return f"unknown outcome {msg.outcome[:64]!r}"
    if msg.stake < 1:
        return f"stake {msg.stake}: a stake is at least 1 minor unit"
    if msg.commission < 0:
        return f"negative commission {msg.commission}"
    if msg.outcome == WagerOutcome.WIN:
        try:
            won = winnings(msg.stake, Odds.parse(msg.odds or ""))
        except ValueError as exc:
            return f"a win without readable odds: {exc}"
        if msg.commission > won or msg.net != won - msg.commission:
            return (f"net {msg.net} and commission {msg.commission} of a win of stake {msg.stake} at "
                    f"{msg.odds} (winnings {won}): the net must be the winnings less the commission")
        return None
    expected = -msg.stake if msg.outcome == WagerOutcome.LOSE else 0
    if msg.net != expected or msg.commission:
        return (f"net {msg.net} and commission {msg.commission} of a {msg.outcome} of stake {msg.stake}: "
                f"expected net {expected} and no commission")
    return None


def _info_problem(msg: TableInfo) -> str | None:
    """A table info outside what a table config may say (daemon/config.py): the figures are computed from
    it (the game's exact analysis, the commission rate, the digits money is printed with)."""
    if msg.game not in GAMES:
        return f"unknown game {msg.game[:64]!r}"
    if not 1 <= msg.decks <= 8:
        return f"decks {msg.decks}: 1 to 8"
    if not 0 <= msg.minor_unit <= 4:
        return f"minor_unit {msg.minor_unit}: 0 to 4 digits"
    if not _CURRENCY.fullmatch(msg.currency):
        return f"currency {msg.currency[:64]!r} is not an ISO 4217 code"
    if msg.commission is not None and not RATE_TEXT.fullmatch(msg.commission):
        # Fraction('1e999999999') builds a billion-digit integer: the floor hung in the analysis
        return f"commission {msg.commission[:64]!r} is not a rate such as '5%'"
    return None


def _msg_id_problem(table: str, msg: Message) -> str | None:
    if msg.seq > 0:
        if msg_id_epoch(table, msg.msg_id, msg.seq) is None:
            return (f"msg_id {msg.msg_id[:120]!r} is not seq {msg.seq} of table {table!r} "
                    "({table}-{epoch}-{seq}[-{random}])")
        return None
    if not msg.msg_id.startswith(table + "-") or not _UNSEQUENCED_ID.fullmatch(msg.msg_id[len(table) + 1:]):
        return f"msg_id {msg.msg_id[:120]!r} is not one of table {table!r}"
    return None


def _text(value: str) -> str:
    """``value`` storable as text in PostgreSQL (a NUL written as the escape ``\\x00``)."""
    return value.replace("\x00", "\\x00")


class _Reject(Exception):
    """A message that goes to quarantine; ``str(exc)`` is the reason."""


@dataclass
class _TableDelta:
    last_message_at: str = ""
    seqs: dict[str, int] = field(default_factory=dict)  # epoch -> max seq in this batch
    shoes: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)  # (epoch, shoe) -> (min, max)
    round: tuple[str, int, Any, Any, str, bool] | None = None  # epoch, seq, shoe, round, phase, held
    info: tuple[str, int, str, TableInfo] | None = None  # epoch, seq, msg_id, info


@dataclass
class _Rules:
    game: str | None
    decks: int | None
    paytables: str | None
    commission: str | None


class Ingestor:
    """Stores batches of messages (module docstring). ``prefix``: the topic prefix; ``consumer``: this
    process's name (kept with every stored message and quarantined payload)."""

    def __init__(self, prefix: str = "tablesense", consumer: str = "floor") -> None:
        self.prefix = prefix
        self.consumer = consumer
        self._info_rules: OrderedDict[str, _Rules] = OrderedDict()  # info msg_id -> its rules (LRU)

    async def apply(self, tx: Tx, items: Sequence[Incoming]) -> list[Outcome]:
        """Store ``items`` in ``tx`` (in order); returns one :class:`Outcome` per item.

        Raises only database errors that are not a constraint of one message (e.g.
        :class:`~tablesense.daemon.floor.store.DatabaseUnavailable`): then nothing of the batch must be
        acknowledged, and the caller rolls back and retries.
        """
        deltas: dict[str, _TableDelta] = {}
        statuses: list[tuple[Incoming, StatusFields]] = []
        out: list[Outcome] = []
        for item in items:
            try:
                out.append(await self._one(tx, item, deltas, statuses))
            except _Reject as exc:
                out.append(await self._quarantine(tx, item, str(exc)))
            except DatabaseError:
                raise
            except Exception as exc:  # a defect of ours: this message is kept for review, the rest go on
                log.error("floor_message_failed", topic=item.topic[:200],
                          error=f"{type(exc).__name__}: {exc}", exc_info=True)
                out.append(await self._quarantine(tx, item, f"the floor failed on it: {type(exc).__name__}: "
                                                            f"{exc}"))
        for table in sorted(deltas):
            await self._apply_delta(tx, table, deltas[table])
        for item, status in statuses:
            try:
                async with tx.savepoint():
                    await self._apply_status(tx, item, status)
            except BadValue as exc:  # this status only: the batch's messages are stored
                reason = f"the database cannot store it: {exc}"
            except DatabaseError:
                raise
            except Exception as exc:  # a defect of ours, as for a message
                log.error("floor_message_failed", topic=item.topic[:200],
                          error=f"{type(exc).__name__}: {exc}", exc_info=True)
                reason = f"the floor failed on it: {type(exc).__name__}: {exc}"
            else:
                continue
            i = next(i for i, o in enumerate(out) if o.kind == "status" and items[i] is item)
            out[i] = await self._quarantine(tx, item, reason)
        return out

    # -- one message -------------------------------------------------------------------------------

    async def _one(self, tx: Tx, item: Incoming, deltas: dict[str, _TableDelta],
                   statuses: list[tuple[Incoming, StatusFields]]) -> Outcome:
        parts = split_topic(self.prefix, item.topic)
        if parts is None:
            return Outcome("ignored", reason="topic outside the prefix")
        table, channel, replayed = parts
        if channel.startswith(("cmd/", "reply/")) or channel in ("cmd", "reply", "health"):
            return Outcome("ignored", table=table, reason=f"channel {channel} is not a table message")
        if not TABLE_ID.fullmatch(table):
            raise _Reject(f"topic level {table[:80]!r} is not a table id (1-64 letters, digits, '_', '-' or "
                          "'.')")
        if len(item.payload) > MAX_PAYLOAD:
            raise _Reject(f"payload larger than {MAX_PAYLOAD} bytes ({len(item.payload)})")
        if channel == "status":
            if replayed:
                raise _Reject("status is never replayed")
            try:
                status = _STATUS.decode(item.payload)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise _Reject(f"not a tablesense.status: {exc}") from None
            if status.schema != "tablesense.status" or status.table != table:
                raise _Reject(f"status of table {status.table[:80]!r} schema {status.schema[:80]!r} on "
                              f"{item.topic}")
            if (problem := content_problem(msgspec.to_builtins(status))) is not None:
                raise _Reject(problem)
            if status.epoch and not _EPOCH.fullmatch(status.epoch):
                raise _Reject(f"status epoch {status.epoch[:80]!r} is not a journal epoch (8 hex digits)")
            statuses.append((item, status))
            deltas.setdefault(table, _TableDelta()).last_message_at = item.received_at
            return Outcome("status", table=table)
        expected = CHANNEL_SCHEMAS.get(channel)
        if expected is None:
            raise _Reject(f"unknown channel {channel!r}")
        try:
            msg = decode_message(item.payload)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _Reject(f"not a tablesense message: {exc}") from None
        if type(msg) is not expected:
            raise _Reject(f"{type(msg).__name__} on the {channel} topic (expects {expected.__name__})")
        if msg.table != table:
            raise _Reject(f"message of table {msg.table[:80]!r} on a topic of table {table!r}")
        if not msg.msg_id:
            raise _Reject("no msg_id")
        if msg.seq < 0:
            raise _Reject(f"negative seq {msg.seq}")
        if (problem := content_problem(msgspec.to_builtins(msg))) is not None:
            raise _Reject(problem)
        if (problem := _msg_id_problem(table, msg)) is not None:
            raise _Reject(problem)
        if isinstance(msg, SettlementMessage) and (problem := _settlement_problem(msg)) is not None:
            raise _Reject(f"settlement: {problem}")
        if isinstance(msg, TableInfo) and (problem := _info_problem(msg)) is not None:
            raise _Reject(f"table info: {problem}")
        try:
            ts = canonical_ts(msg.ts)
        except ValueError as exc:
            raise _Reject(f"ts: {exc}") from None
        epoch = msg_id_epoch(table, msg.msg_id, msg.seq) if msg.seq else ""
        assert epoch is not None  # _msg_id_problem
        sha = hashlib.sha256(item.payload).hexdigest()
        try:
            payload_text = item.payload.decode("utf-8")
        except UnicodeDecodeError:
            raise _Reject("payload is not UTF-8") from None
        try:
            async with tx.savepoint():
                n = await tx.execute(
                    "INSERT INTO messages (msg_id, table_id, epoch, seq, schema_name, topic, ts, shoe, "
                    "round, "
                    "payload, payload_sha256, received_at, via, consumer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
                    "?, ?, "
                    "?, ?, ?, ?) ON CONFLICT (msg_id) DO NOTHING",
                    (msg.msg_id, table, epoch, msg.seq, _schema(msg), item.topic, ts, _int(msg.shoe),
                     _int(msg.round), payload_text, sha, item.received_at, "replay" if replayed else "live",
                     self.consumer))
                if n:
                    await self._derived(tx, msg, table, epoch, ts, item.payload)
        except BadValue as exc:  # a value the database cannot hold (the savepoint rolled it back)
            return await self._quarantine(tx, item, f"the database cannot store it: {exc}", table=table,
                                          msg_id=msg.msg_id)
        except ConstraintViolation:
            rows = await tx.fetchall("SELECT msg_id FROM messages WHERE table_id = ? AND epoch = ? AND seq "
                                     "= ?",
                                     (table, epoch, msg.seq))
            held = rows[0][0] if rows else "?"
            await raise_floor_alarm(
                tx, f"{table}:SEQ_CONFLICT:{epoch}:{msg.seq}", table, "SEQ_CONFLICT",
                f"seq {msg.seq} of journal epoch {epoch or '?'} arrived as {msg.msg_id}, the floor holds "
                "it as "
                f"{held}: the table's journal was rewritten or restored (the new message is quarantined)")
            return await self._quarantine(tx, item, f"seq {msg.seq} of epoch {epoch} already held as {held}",
                                          table=table, msg_id=msg.msg_id, alarm=False)
        if not n:
            rows = await tx.fetchall("SELECT payload_sha256 FROM messages WHERE msg_id = ?", (msg.msg_id,))
            if rows and rows[0][0] != sha:
                await raise_floor_alarm(
                    tx, f"{table}:MSG_ID_REUSED:{msg.msg_id}", table, "MSG_ID_REUSED",
                    f"msg_id {msg.msg_id} arrived again with different content (the first is kept, the "
                    f"new one quarantined)")
                return await self._quarantine(tx, item, f"msg_id {msg.msg_id} already held with other "
                                                        "content",
                                              table=table, msg_id=msg.msg_id, alarm=False)
            return Outcome("duplicate", table, epoch, msg.seq, msg.msg_id)
        d = deltas.setdefault(table, _TableDelta())
        d.last_message_at = item.received_at
        if msg.seq > 0:
            d.seqs[epoch] = max(d.seqs.get(epoch, 0), msg.seq)
        if msg.shoe is not None and isinstance(msg.shoe, int):
            lo, hi = d.shoes.get((epoch, msg.shoe), (ts, ts))
            d.shoes[(epoch, msg.shoe)] = (min(lo, ts), max(hi, ts))
        if isinstance(msg, RoundState) and (d.round is None or (d.round[0], d.round[1]) < (epoch, msg.seq)):
            d.round = (epoch, msg.seq, msg.shoe, msg.round, msg.phase, msg.held)
        if isinstance(msg, TableInfo) and (d.info is None or (d.info[0], d.info[1]) < (epoch, msg.seq)):
            d.info = (epoch, msg.seq, msg.msg_id, msg)  # the newest of the batch (a replayed one is older)
        return Outcome("stored", table, epoch, msg.seq, msg.msg_id)

    async def _derived(self, tx: Tx, msg: Message, table: str, epoch: str, ts: str, raw: bytes) -> None:
        if isinstance(msg, SettlementMessage):
            changed = await self._changed_after_lock(tx, table, epoch, msg)
            rules = await self._rules_before(tx, table, epoch, msg.seq)
            edge = house_edge(rules.game, rules.decks, rules.paytables, rules.commission, msg.bet, msg.hand)
            await tx.execute(
                "INSERT INTO settlements (msg_id, table_id, epoch, seq, shoe, round, ts, spot, seat, bet, "
                "hand, "
                "stake, outcome, category, odds, net, commission, changed_after_lock, game, paytable, "
                "house_edge) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (msg.msg_id, table, epoch, msg.seq, _int(msg.shoe), _int(msg.round), ts, msg.spot, msg.seat,
                 msg.bet, msg.hand, msg.stake, msg.outcome, msg.category, msg.odds, msg.net, msg.commission,
                 changed, rules.game, edge[0] if edge else None,
                 _fraction_text(edge[1]) if edge else None))
        elif isinstance(msg, FloorRound):
            chain = _CHAIN.decode(raw)
            results = {"baccarat": msgspec.to_builtins(msg.baccarat), "boxes": msgspec.to_builtins(msg.boxes),
                       "dealer": list(msg.dealer), "board": list(msg.board),
                       "settlements": msgspec.to_builtins(msg.settlements),
                       "alarms": msgspec.to_builtins(msg.alarms),
                       "spot_changes": msgspec.to_builtins(msg.spot_changes)}
            await tx.execute(
                "INSERT INTO rounds (msg_id, table_id, epoch, seq, shoe, round, game, void, ts, opened_ts, "
                "locked_ts, completed_ts, cards, burns, results, chain_seq, chain_head) VALUES (?, ?, ?, "
                "?, ?, ?, "
                "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (msg.msg_id, table, epoch, msg.seq, _int(msg.shoe), _int(msg.round), msg.game, msg.void, ts,
                 msg.opened_ts, msg.locked_ts, msg.completed_ts, _JSON.encode(msg.cards).decode(),
                 _JSON.encode(msg.burns).decode(), json.dumps(results, separators=(",", ":")),
                 chain.chain_seq, chain.chain_head))
            flagged = sorted({(s.spot, s.bet) for s in msg.settlements if s.changed_after_lock})
            for spot, bet in flagged:  # settlements stored before their round's record
                await tx.execute(
                    "UPDATE settlements SET changed_after_lock = TRUE WHERE table_id = ? AND epoch = ? AND "
                    "shoe = ? AND round = ? AND spot = ? AND bet = ?",
                    (table, epoch, _int(msg.shoe), _int(msg.round), spot, bet))
            for i, w in enumerate(msg.wagers):
                await tx.execute(
                    "INSERT INTO wagers (round_msg_id, idx, table_id, shoe, round, spot, seat, bet, hand, "
                    "stake, "
                    "presence_only) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (msg.msg_id, i, table, _int(msg.shoe), _int(msg.round), w.spot, w.seat, w.bet, w.hand,
                     w.stake, w.presence_only))
            for i, c in enumerate(msg.commands):
                await tx.execute(
                    "INSERT INTO commands (round_msg_id, idx, table_id, shoe, round, ts, name, args, "
                    "operator, ok, "
                    "reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (msg.msg_id, i, table, _int(msg.shoe), _int(msg.round), c.ts, c.name,
                     json.dumps(c.args, sort_keys=True), c.operator, c.ok, c.reason))
            if chain.chain_seq is not None and chain.chain_head:
                await self._chain_mark(tx, table, epoch, chain.chain_seq, chain.chain_head, msg.msg_id, ts)
        elif isinstance(msg, TableInfo) and msg.seq > 0 and epoch:
            await self._rederive_edges(tx, table, epoch, msg)
        elif isinstance(msg, AlarmMessage):
            await tx.execute(
                "INSERT INTO alarms (msg_id, table_id, epoch, seq, shoe, round, ts, alarm_id, code, "
                "severity, "
                "text, state, held, seat, spot, device) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?)",
                (msg.msg_id, table, epoch, msg.seq, _int(msg.shoe), _int(msg.round), ts, msg.alarm_id,
                 msg.code,
                 msg.severity, msg.text, msg.state, msg.held, msg.seat, msg.spot, msg.device))

    async def _changed_after_lock(self, tx: Tx, table: str, epoch: str, msg: SettlementMessage) -> bool:
        """Whether the floor record of ``msg``'s round (if already stored) marks its spot as changed after
        the wagers were locked (past-posting). The public settlement does not carry it (signage reads
        it); a round record that arrives later sets it on the settlements already stored."""
        rows = await tx.fetchall("SELECT results FROM rounds WHERE table_id = ? AND epoch = ? AND shoe = ? "
                                 "AND round = ?", (table, epoch, _int(msg.shoe), _int(msg.round)))
        for (results,) in rows:
            try:
                settled = json.loads(str(results)).get("settlements") or []
            except (ValueError, AttributeError):
                continue
            if any(isinstance(s, dict) and s.get("spot") == msg.spot and s.get("bet") == msg.bet
                   and s.get("changed_after_lock") is True for s in settled):
                return True
        return False

    async def _rules_before(self, tx: Tx, table: str, epoch: str, seq: int) -> _Rules:
        """The rules in force at ``seq``: those of the table's info with the highest seq below it in the
        same journal epoch (the database holds it, whichever floor process stored it, this batch's
        included); without one, the latest the ``tables`` row keeps. Never a process's memory of the
        table: another process of the share group may have stored the info that changed them."""
        if seq > 0 and epoch:
            rows = await tx.fetchall(
                "SELECT msg_id, payload FROM messages WHERE table_id = ? AND epoch = ? AND schema_name = "
                "'tablesense.table_info' AND seq > 0 AND seq < ? ORDER BY seq DESC LIMIT 1",
                (table, epoch, seq))
            if rows:
                return self._rules_of_info(str(rows[0][0]), str(rows[0][1]))
        rows = await tx.fetchall("SELECT game, decks, paytables, commission FROM tables WHERE table_id = ?",
                                 (table,))
        return _Rules(*rows[0]) if rows else _Rules(None, None, None, None)

    def _rules_of_info(self, msg_id: str, payload: str) -> _Rules:
        rules = self._info_rules.get(msg_id)  # a msg_id's content never changes (MSG_ID_REUSED)
        if rules is None:
            msg = decode_message(payload)
            rules = _rules_of(msg) if isinstance(msg, TableInfo) else _Rules(None, None, None, None)
            self._info_rules[msg_id] = rules
            while len(self._info_rules) > 256:
                self._info_rules.popitem(last=False)
        return rules

    async def _rederive_edges(self, tx: Tx, table: str, epoch: str, info: TableInfo) -> None:
        """The settlements an info stored late rules (after it in seq, before the next info of the
        epoch the floor holds; a dropped info replayed after its shoe's settlements): their paytable and
        house edge under it."""
        nxt = await tx.fetchall("SELECT MIN(seq) FROM messages WHERE table_id = ? AND epoch = ? AND "
                                "schema_name = 'tablesense.table_info' AND seq > ?", (table, epoch, info.seq))
        upto = int(nxt[0][0]) if nxt and nxt[0][0] is not None else MAX_AMOUNT + 1
        where = "table_id = ? AND epoch = ? AND seq > ? AND seq < ?"
        span = (table, epoch, info.seq, upto)
        rules = _rules_of(info)
        for bet, hand in await tx.fetchall(f"SELECT DISTINCT bet, hand FROM settlements WHERE {where}", span):
            edge = house_edge(rules.game, rules.decks, rules.paytables, rules.commission, str(bet), hand)
            values = (rules.game, edge[0] if edge else None, _fraction_text(edge[1]) if edge else None)
            set_ = "UPDATE settlements SET game = ?, paytable = ?, house_edge = ? WHERE "
            if hand is None:
                await tx.execute(f"{set_}{where} AND bet = ? AND hand IS NULL", (*values, *span, bet))
            else:
                await tx.execute(f"{set_}{where} AND bet = ? AND hand = ?", (*values, *span, bet, hand))

    async def quarantine(self, tx: Tx, item: Incoming, reason: str) -> Outcome:
        """Keep ``item`` in ``quarantine`` with ``reason`` (and raise the table's ``QUARANTINED`` floor
        alarm); for a message the caller could not store otherwise."""
        return await self._quarantine(tx, item, reason)

    async def _quarantine(self, tx: Tx, item: Incoming, reason: str, *, table: str | None = None,
                          msg_id: str | None = None, alarm: bool = True) -> Outcome:
        parts = split_topic(self.prefix, item.topic)
        table = table or (parts[0] if parts else None)
        if table is not None and not TABLE_ID.fullmatch(table):
            table = None  # not a table id (the topic keeps it): never a key of an index
        text = _text(item.payload[:MAX_PAYLOAD].decode("utf-8", "backslashreplace"))
        reason = _text(reason)
        await tx.execute(
            "INSERT INTO quarantine (quarantine_id, received_at, topic, table_id, msg_id, reason, payload, "
            "consumer) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (uuid.uuid4().hex, item.received_at, _text(item.topic), table,
             None if msg_id is None else _text(msg_id[:200]), reason[:1000], text, self.consumer))
        if alarm:
            await raise_floor_alarm(tx, f"{table or '?'}:QUARANTINED", table or "?", "QUARANTINED",
                                    f"a message on {_text(item.topic[:200])} failed its schema and was "
                                    f"quarantined: {reason[:300]}")
        return Outcome("quarantined", table=table, msg_id=msg_id, reason=reason)

    # -- per table, once per batch -------------------------------------------------------------------

    async def _ensure_table(self, tx: Tx, table: str, at: str) -> None:
        await tx.execute("INSERT INTO tables (table_id, first_seen, last_message_at) VALUES (?, ?, ?) "
                         "ON CONFLICT (table_id) DO NOTHING", (table, at, at))

    async def _apply_delta(self, tx: Tx, table: str, d: _TableDelta) -> None:
        at = d.last_message_at or now_iso()
        await self._ensure_table(tx, table, at)
        await tx.execute("UPDATE tables SET last_message_at = ? WHERE table_id = ? AND "
                         "(last_message_at IS NULL OR last_message_at < ?)", (at, table, at))
        for epoch, seq in sorted(d.seqs.items()):
            await tx.execute(
                "INSERT INTO seq_tracks (table_id, epoch, through_seq, max_seq, status_last_seq, first_seen, "
                "last_progress_at) VALUES (?, ?, 0, ?, 0, ?, ?) ON CONFLICT (table_id, epoch) DO UPDATE SET "
                "max_seq = CASE WHEN excluded.max_seq > seq_tracks.max_seq THEN excluded.max_seq "
                "ELSE seq_tracks.max_seq END, last_progress_at = excluded.last_progress_at",
                (table, epoch, seq, at, at))
        for (epoch, shoe), (lo, hi) in sorted(d.shoes.items()):
            await tx.execute(
                "INSERT INTO shoes (table_id, epoch, shoe, first_ts, last_ts) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (table_id, epoch, shoe) DO UPDATE SET "
                "first_ts = CASE WHEN excluded.first_ts < shoes.first_ts THEN excluded.first_ts "
                "ELSE shoes.first_ts END, last_ts = CASE WHEN excluded.last_ts > shoes.last_ts "
                "THEN excluded.last_ts ELSE shoes.last_ts END", (table, epoch, shoe, lo, hi))
        if d.round is not None:
            epoch, seq, shoe, rnd, phase, held = d.round
            await tx.execute(
                "UPDATE tables SET round_epoch = ?, round_seq = ?, shoe = ?, round = ?, phase = ?, held = ? "
                "WHERE table_id = ? AND (round_epoch IS NULL OR (round_epoch = ? AND round_seq < ?) OR "
                "(round_epoch <> ? AND ? = epoch))",
                (epoch, seq, _int(shoe), _int(rnd), phase, held, table, epoch, seq, epoch, epoch))
        if d.info is not None:
            epoch, seq, msg_id, info = d.info
            rules = _rules_of(info)
            await tx.execute(
                "UPDATE tables SET game = ?, decks = ?, currency = ?, minor_unit = ?, commission = ?, "
                "paytables = ?, info_msg_id = ?, info_epoch = ?, info_seq = ? WHERE table_id = ? AND "
                "(info_epoch IS NULL OR (info_epoch = ? AND info_seq < ?) OR (info_epoch <> ? AND ? = "
                "epoch))",
                (info.game, info.decks, info.currency, info.minor_unit, info.commission, rules.paytables,
                 msg_id, epoch, seq, table, epoch, seq, epoch, epoch))

    async def _apply_status(self, tx: Tx, item: Incoming, s: StatusFields) -> None:
        table = s.table
        await self._ensure_table(tx, table, item.received_at)
        rows = await tx.fetchall("SELECT epoch, status_received_at FROM tables WHERE table_id = ?", (table,))
        old_epoch, old_at = rows[0] if rows else (None, None)
        if old_at is not None and str(old_at) > item.received_at:
            return  # another floor process stored a later status already
        await tx.execute(
            "UPDATE tables SET state = ?, status_detail = ?, status_received_at = ?, instance = COALESCE(?, "
            "instance), software = COALESCE(?, software), config_digest = COALESCE(?, config_digest), "
            "epoch = COALESCE(?, epoch), status_last_seq = COALESCE(?, status_last_seq), "
            "chain_seq = COALESCE(?, chain_seq), chain_head = COALESCE(?, chain_head) WHERE table_id = ?",
            (s.state, s.detail, item.received_at, s.instance, s.software, s.config_digest, s.epoch,
             s.last_seq,
             s.chain_seq, s.chain_head, table))
        if not s.epoch:
            return
        if old_epoch and old_epoch != s.epoch:
            await raise_floor_alarm(
                tx, f"{table}:EPOCH_CHANGED:{s.epoch}", table, "EPOCH_CHANGED",
                f"journal epoch changed from {old_epoch} to {s.epoch} (instance {s.instance or '?'}): a new "
                f"journal file, seq restarts; what epoch {old_epoch} had not delivered cannot be replayed")
        try:
            status_ts = canonical_ts(s.ts)
        except ValueError:
            status_ts = item.received_at
        if s.last_seq is not None:
            # A status older than the messages stored (published at connect, processed after them) says
            # nothing about a rewind: only one published after the highest seq's message does.
            newest = await tx.fetchall(
                "SELECT seq, ts FROM messages WHERE table_id = ? AND epoch = ? AND seq > 0 ORDER BY seq DESC "
                "LIMIT 1", (table, s.epoch))
            if newest and s.last_seq < int(newest[0][0]) and status_ts > str(newest[0][1]):
                await raise_floor_alarm(
                    tx, f"{table}:CHAIN_DISCONTINUITY:{s.epoch}:last_seq:{s.last_seq}", table,
                    "CHAIN_DISCONTINUITY",
                    f"the table reports last seq {s.last_seq} in journal epoch {s.epoch}, but the floor "
                    f"holds seq {newest[0][0]} published before: the journal went back (restored from a "
                    f"backup?)")
            now = item.received_at
            await tx.execute(
                "INSERT INTO seq_tracks (table_id, epoch, through_seq, max_seq, status_last_seq, first_seen, "
                "last_progress_at) VALUES (?, ?, 0, 0, ?, ?, ?) ON CONFLICT (table_id, epoch) DO UPDATE SET "
                "status_last_seq = excluded.status_last_seq", (table, s.epoch, s.last_seq, now, now))
        if s.chain_seq is not None and s.chain_head:
            # The status's head is the link after the journal's last row, delivery marks and inputs
            # included: it moves while chain_seq (the last seq) stays (the broker acknowledged more, a
            # reconnect after a broker restart), so it is never compared with another head. Only its
            # position is: below a chain seq a floor record published before it carried, the journal
            # went back. The heads compared are the floor records' (sealed in the seq sequence).
            marks = await tx.fetchall("SELECT MAX(chain_seq) FROM chain_marks WHERE table_id = ? AND "
                                      "epoch = ? AND source_ts < ?", (table, s.epoch, status_ts))
            highest = marks[0][0] if marks else None
            if highest is not None and s.chain_seq < int(highest):
                await raise_floor_alarm(
                    tx, f"{table}:CHAIN_DISCONTINUITY:{s.epoch}:rewound:{s.chain_seq}", table,
                    "CHAIN_DISCONTINUITY",
                    f"the table's chain head is at seq {s.chain_seq} of epoch {s.epoch}, the floor has seen "
                    f"seq {highest} before: the journal went back (restored from a backup?)")

    async def _chain_mark(self, tx: Tx, table: str, epoch: str, chain_seq: int, head: str, source: str,
                          source_ts: str) -> None:
        """Keep a floor record's ``(chain_seq, chain_head)`` (the chain just before the record's own row);
        another record naming the same chain seq with another head raises ``CHAIN_DISCONTINUITY``."""
        head = head.lower()
        await tx.execute(
            "INSERT INTO chain_marks (table_id, epoch, chain_seq, chain_head, source, source_ts, seen_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (table_id, epoch, chain_seq) DO NOTHING",
            (table, epoch, chain_seq, head, source, source_ts, now_iso()))
        rows = await tx.fetchall("SELECT chain_head, source FROM chain_marks WHERE table_id = ? AND "
                                 "epoch = ? AND chain_seq = ?", (table, epoch, chain_seq))
        if rows and rows[0][0] != head:
            await raise_floor_alarm(
                tx, f"{table}:CHAIN_DISCONTINUITY:{epoch}:{chain_seq}", table, "CHAIN_DISCONTINUITY",
                f"chain head at seq {chain_seq} of epoch {epoch} was {str(rows[0][0])[:16]}... "
                f"({rows[0][1]}), "
                f"now {head[:16]}... ({source}): the chain does not continue")


def _rules_of(info: TableInfo) -> _Rules:
    paytables = {w.bet: w.paytable_name for w in (*info.wagers, *info.main_wagers) if w.paytable_name}
    return _Rules(info.game, info.decks, paytables_json(paytables), info.commission)


def _schema(msg: Message) -> str:
    tag = type(msg).__struct_config__.tag
    return str(tag)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _fraction_text(f: Fraction) -> str:
    return f"{f.numerator}/{f.denominator}"
