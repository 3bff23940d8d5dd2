"""The round record: everything that happened in one round, kept for the floor system and game recall.

Mutable while the round runs; :meth:`RoundRecord.floor_round` turns it into the published
:class:`daemon.messages.FloorRound` once the round is complete (the full record goes only to the
floor topic, only then).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from tablesense.daemon.messages import (
    AlarmRecord,
    CardRecord,
    CommandRecord,
    FloorRound,
    SettlementRecord,
    SpotChangeRecord,
    WagerRecord,
    encode_message,
)
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table.game import Outcome

__all__ = ["FLOOR_RECORD_MAX_BYTES", "CardEntry", "RoundRecord", "cap_floor_round"]

FLOOR_RECORD_MAX_BYTES = 192 * 1024
"""Largest encoded floor record (bytes of JSON): set-aside cards, spot changes, alarm records and commands
are left out beyond it (:func:`cap_floor_round`). Below the shipped broker's ``message_size_limit 262144``
(deploy/mosquitto/tablesense-tls.conf) with room for ``seq``, ``msg_id`` and the chain head the journal
adds."""
_MARGIN = 256
"""Bytes kept free for the ``*_omitted`` counts' digits (the sizes below are per item, exact otherwise)."""


@dataclass(slots=True)
class CardEntry:
    """A card out of the shoe during the round (see :class:`daemon.messages.CardRecord`).

    ``taken`` is True when the card was taken out of the shoe inventory (a set-aside card that was
    taken can be entered back by a supervisor without counting it twice).
    """

    index: int
    card: Card | None
    ts: str
    device: str | None
    device_seq: int | None
    status: str = "dealt"
    position: str | None = None
    face_up: bool = False
    alarm_id: str | None = None
    taken: bool = False

    def record(self) -> CardRecord:
        """The published form."""
        return CardRecord(index=self.index, card=str(self.card) if self.card else None,
                          position=self.position, face_up=self.face_up, status=self.status, ts=self.ts,
                          device=self.device, device_seq=self.device_seq, alarm_id=self.alarm_id)


@dataclass(slots=True)
class RoundRecord:
    """One round's record (shoe and round numbers, times, cards, burns, wagers, settlements, alarms,
    spot changes, commands)."""

    shoe: int
    round: int
    opened_ts: str | None = None
    locked_ts: str | None = None
    completed_ts: str | None = None
    void: bool = False
    cards: list[CardEntry] = field(default_factory=list)
    burns: list[CardEntry] = field(default_factory=list)
    wagers: list[WagerRecord] = field(default_factory=list)
    settlements: list[SettlementRecord] = field(default_factory=list)
    alarms: list[AlarmRecord] = field(default_factory=list)
    spot_changes: list[SpotChangeRecord] = field(default_factory=list)
    commands: list[CommandRecord] = field(default_factory=list)
    _next_index: int = 1

    @property
    def next_index(self) -> int:
        """The index the next card will get."""
        return self._next_index

    def new_card(self, card: Card | None, ts: str, device: str | None, device_seq: int | None) -> CardEntry:
        """Append a card in draw order (1-based index) and return it."""
        entry = CardEntry(self._next_index, card, ts, device, device_seq)
        self._next_index += 1
        self.cards.append(entry)
        return entry

    def new_burn(self, card: Card | None, ts: str, device: str | None, device_seq: int | None,
                 face_up: bool) -> CardEntry:
        """Append a burned card (its own list, numbered in burn order)."""
        entry = CardEntry(len(self.burns) + 1, card, ts, device, device_seq, status="burned",
                          position="burn", face_up=face_up)
        self.burns.append(entry)
        return entry

    def absorb(self, other: RoundRecord) -> None:
        """Take over what happened between rounds (stray cards, burns, alarms, spot changes, commands)."""
        for c in other.cards:
            c.index = self._next_index
            self._next_index += 1
            self.cards.append(c)
        self.burns += other.burns
        self.alarms += other.alarms
        self.spot_changes += other.spot_changes
        self.commands += other.commands

    def floor_round(self, table: str, game: str, ts: str, outcome: Outcome) -> FloorRound:
        """The complete record as published on ``floor/rounds`` (face-down cards included), within
        :data:`FLOOR_RECORD_MAX_BYTES` (:func:`cap_floor_round`)."""
        return cap_floor_round(FloorRound(
            table=table, ts=ts, shoe=self.shoe, round=self.round, game=game, void=self.void,
            cards=tuple(c.record() for c in self.cards), burns=tuple(c.record() for c in self.burns),
            wagers=tuple(self.wagers), settlements=tuple(self.settlements), alarms=tuple(self.alarms),
            spot_changes=tuple(self.spot_changes), commands=tuple(self.commands),
            baccarat=outcome.baccarat, boxes=outcome.boxes, dealer=outcome.dealer, board=outcome.board,
            opened_ts=self.opened_ts, locked_ts=self.locked_ts, completed_ts=self.completed_ts))


def _middle_out(n: int) -> list[int]:
    """Indexes ``0..n-1`` from the middle outwards: leaving them out in this order keeps a list's first
    and last items longest."""
    centre = (n - 1) / 2
    return sorted(range(n), key=lambda i: (abs(i - centre), i))


def cap_floor_round(record: FloorRound, max_bytes: int = FLOOR_RECORD_MAX_BYTES) -> FloorRound:
    """``record`` itself when its JSON encoding fits in ``max_bytes``; else a copy with set-aside cards,
    spot changes, alarm records and commands left out (counted in the ``*_omitted`` fields) until it fits.

    Bytes are taken from whichever of the four lists is largest at the time, each list losing its middle
    items first (the first and last, e.g. the alarm that held the round and the command that voided it,
    stay). Dealt, entered, unreadable and burned cards, wagers, settlements and the outcome are never left
    out (a record of those alone is a few KB). Pure; bounded work (the lists hold at most 1,024 items
    each: daemon/table/machine.py ``_MAX_RECORD_ITEMS``)."""
    if len(encode_message(record)) <= max_bytes:
        return record
    aside = [i for i, c in enumerate(record.cards) if c.status == "set_aside"]
    lists: list[Sequence[object]] = [[record.cards[i] for i in aside], record.spot_changes, record.alarms,
                                     record.commands]
    sizes = [[len(msgspec.json.encode(item)) + 1 for item in items] for items in lists]  # + its comma
    order = [_middle_out(len(items)) for items in lists]
    kept = [sum(s) for s in sizes]
    dropped: list[set[int]] = [set() for _ in lists]
    excess = len(encode_message(record)) + _MARGIN - max_bytes
    while excess > 0:
        k = max(range(len(lists)), key=lambda j: kept[j] if order[j] else -1)
        if not order[k]:
            break  # nothing left to leave out: a record of dealt cards alone is never this large
        i = order[k].pop(0)
        dropped[k].add(i)
        kept[k] -= sizes[k][i]
        excess -= sizes[k][i]
    aside_dropped = {aside[i] for i in dropped[0]}
    return msgspec.structs.replace(
        record,
        cards=tuple(c for i, c in enumerate(record.cards) if i not in aside_dropped),
        spot_changes=tuple(c for i, c in enumerate(record.spot_changes) if i not in dropped[1]),
        alarms=tuple(c for i, c in enumerate(record.alarms) if i not in dropped[2]),
        commands=tuple(c for i, c in enumerate(record.commands) if i not in dropped[3]),
        cards_omitted=record.cards_omitted + len(dropped[0]),
        spot_changes_omitted=record.spot_changes_omitted + len(dropped[1]),
        alarms_omitted=record.alarms_omitted + len(dropped[2]),
        commands_omitted=record.commands_omitted + len(dropped[3]))
