"""The round record: everything that happened in one round, kept for the floor system and game recall.

Mutable while the round runs; :meth:`RoundRecord.floor_round` turns it into the published
:class:`daemon.messages.FloorRound` once the round is complete (the full record goes only to the
floor topic, only then).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tablesense.daemon.messages import (
    AlarmRecord,
    CardRecord,
    CommandRecord,
    FloorRound,
    SettlementRecord,
    SpotChangeRecord,
    WagerRecord,
)
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table.game import Outcome

__all__ = ["CardEntry", "RoundRecord"]


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
        """The complete record as published on ``floor/rounds`` (face-down cards included)."""
        return FloorRound(
            table=table, ts=ts, shoe=self.shoe, round=self.round, game=game, void=self.void,
            cards=tuple(c.record() for c in self.cards), burns=tuple(c.record() for c in self.burns),
            wagers=tuple(self.wagers), settlements=tuple(self.settlements), alarms=tuple(self.alarms),
            spot_changes=tuple(self.spot_changes), commands=tuple(self.commands),
            baccarat=outcome.baccarat, boxes=outcome.boxes, dealer=outcome.dealer, board=outcome.board,
            opened_ts=self.opened_ts, locked_ts=self.locked_ts, completed_ts=self.completed_ts)
