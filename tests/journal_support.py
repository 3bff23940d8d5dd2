"""Scripted table traffic for the journal and recall tests: real inputs (drivers.events, Command) and the
real message Structs the state machine emits, without depending on the machine itself.

A baccarat round here is: a bet placed on the pad, four cards P, B, P, B (the public round state after
each, the Player Pair settlement once the fourth card is known), then the dealer's round-end button
with the results, the floor record and the next round opening. ``Traffic`` keeps the clock and the
device sequence numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tablesense.daemon.messages import (
    AlarmMessage,
    AlarmRecord,
    BaccaratOutcome,
    CardRecord,
    DeviceStatus,
    FloorRound,
    PublicCard,
    RoundResults,
    RoundState,
    SettlementMessage,
    SettlementRecord,
    WagerRecord,
)
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table.inputs import Channel, Command, Emit, TimedInput
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    DeviceState,
    Heartbeat,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)

TABLE = "bac-7"
SHOE = "shoe"
PAD = "pad"
Step = tuple[TimedInput, list[Emit]]


@dataclass
class Traffic:
    """Generates inputs with their emits; ``seq`` counters per device, a clock stepping 1 s per input."""

    table: str = TABLE
    start: datetime = field(default_factory=lambda: datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
    shoe: int = 0
    round: int = 0
    _tick: int = 0
    _dev_seq: dict[str, int] = field(default_factory=dict)

    def ts(self) -> str:
        self._tick += 1
        t = self.start + timedelta(seconds=self._tick)
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def next_seq(self, device: str) -> int:
        self._dev_seq[device] = self._dev_seq.get(device, 0) + 1
        return self._dev_seq[device]

    def state(self, ts: str, phase: str, cards: tuple[PublicCard, ...] = (), void: bool = False) -> Emit:
        return Emit(Channel.ROUND, RoundState(table=self.table, ts=ts, shoe=self.shoe, round=self.round,
                                              game="baccarat", phase=phase, cards=cards, void=void),
                    retain=True)

    def new_shoe(self) -> list[Step]:
        """A new shoe: the shoe's NEW_SHOE event, round 1 opens for betting."""
        self.shoe += 1
        self.round = 1
        ts = self.ts()
        return [(TimedInput(ts, ShoeStatus(SHOE, self.next_seq(SHOE), ShoeStatusKind.NEW_SHOE)),
                 [self.state(ts, "betting")])]

    def heartbeat(self, device: str = SHOE) -> Step:
        return (TimedInput(self.ts(), Heartbeat(device, self.next_seq(device))), [])

    def device_state(self, device: str, state: LinkState) -> Step:
        ts = self.ts()
        return (TimedInput(ts, DeviceState(device, state)),
                [Emit(Channel.DEVICE, DeviceStatus(table=self.table, ts=ts, name=device, state=str(state)),
                      device=device, retain=True)])

    def baccarat_round(self, cards: tuple[str, str, str, str] = ("QH", "QS", "3D", "8C"),
                       stake: int = 2500, alarm: bool = False, void: bool = False) -> list[Step]:
        """One complete round of the current shoe (then the next round opens)."""
        steps: list[Step] = []
        ts = self.ts()
        bet = SpotChanged(PAD, self.next_seq(PAD), "P1-PP", SpotState.PLACED, stake)
        steps.append((TimedInput(ts, bet), []))
        positions = ("player", "banker", "player", "banker")
        public: list[PublicCard] = []
        records: list[CardRecord] = []
        for i, text in enumerate(cards, start=1):
            ts = self.ts()
            seq = self.next_seq(SHOE)
            public.append(PublicCard(index=i, card=text, position=positions[i - 1]))
            records.append(CardRecord(index=i, card=text, position=positions[i - 1], face_up=True,
                                      status="dealt", ts=ts, device=SHOE, device_seq=seq))
            emits = [self.state(ts, "dealing", tuple(public))]
            if i == 4:
                emits.append(self.settlement(ts, stake, cards))
                if alarm:
                    emits.append(Emit(Channel.ALARMS, AlarmMessage(
                        table=self.table, ts=ts, shoe=self.shoe, round=self.round, alarm_id=f"{self.shoe}.1",
                        code="PAST_POSTING", severity="warning", text="spot P1-PP changed after lock",
                        spot="P1-PP")))
            steps.append((TimedInput(ts, CardDrawn(SHOE, seq, Card.parse(text))), emits))
        ts = self.ts()
        pair = Card.parse(cards[0]).rank == Card.parse(cards[2]).rank
        settled = self.settlement(ts, stake, cards).message
        assert isinstance(settled, SettlementMessage)
        floor = FloorRound(
            table=self.table, ts=ts, shoe=self.shoe, round=self.round, game="baccarat", void=void,
            cards=tuple(records), wagers=(WagerRecord(spot="P1-PP", seat="1", bet="player_pair", hand=None,
                                                       stake=stake),),
            settlements=(SettlementRecord(spot="P1-PP", seat="1", bet="player_pair", hand=None, stake=stake,
                                          outcome=settled.outcome, category=settled.category,
                                          odds=settled.odds, net=settled.net, commission=0,
                                          changed_after_lock=alarm, ts=records[-1].ts),),
            alarms=(AlarmRecord(alarm_id=f"{self.shoe}.1", code="PAST_POSTING", severity="warning",
                                text="spot P1-PP changed after lock", state="raised", held=False,
                                ts=records[-1].ts, spot="P1-PP"),) if alarm else (),
            baccarat=BaccaratOutcome(player=(cards[0], cards[2]), banker=(cards[1], cards[3]), player_total=3,
                                     banker_total=8, winner="banker", player_natural=False,
                                     banker_natural=True, player_pair=pair, banker_pair=False),
            opened_ts=steps[0][0].ts, locked_ts=records[0].ts, completed_ts=ts)
        results = RoundResults(table=self.table, ts=ts, shoe=self.shoe, round=self.round, game="baccarat",
                               void=void, baccarat=floor.baccarat)
        emits = [Emit(Channel.RESULTS, results), Emit(Channel.FLOOR_ROUNDS, floor)]
        self.round += 1
        emits.append(self.state(ts, "betting"))
        steps.append((TimedInput(ts, DealerButton(PAD, self.next_seq(PAD), Button.ROUND_END)), emits))
        return steps

    def settlement(self, ts: str, stake: int, cards: tuple[str, ...]) -> Emit:
        pair = Card.parse(cards[0]).rank == Card.parse(cards[2]).rank
        return Emit(Channel.SETTLEMENTS, SettlementMessage(
            table=self.table, ts=ts, shoe=self.shoe, round=self.round, spot="P1-PP", seat="1",
            bet="player_pair", hand=None, stake=stake, outcome="win" if pair else "lose",
            category="pair" if pair else "no_pair", odds="11 to 1" if pair else None,
            net=stake * 11 if pair else -stake))

    def command(self, name: str = "ack_alarm", **args: str) -> Step:
        return (TimedInput(self.ts(), Command(name, dict(args), operator="pitboss")), [])

    def open_blackjack_round(self) -> list[Step]:
        """A blackjack round left open after the initial deal: 3 public cards and the dealer's hole card."""
        steps: list[Step] = []
        public: list[PublicCard] = []
        for i, (text, pos) in enumerate((("8S", "1"), ("6D", "dealer"), ("8H", "1"), ("KC", "dealer")),
                                        start=1):
            ts = self.ts()
            seq = self.next_seq(SHOE)
            if i < 4:  # the 4th card is the dealer's hole card: face down, never public
                public.append(PublicCard(index=i, card=text, position=pos))
            steps.append((TimedInput(ts, CardDrawn(SHOE, seq, Card.parse(text))),
                          [Emit(Channel.ROUND, RoundState(table=self.table, ts=ts, shoe=self.shoe,
                                                          round=self.round, game="blackjack", phase="dealing",
                                                          cards=tuple(public)), retain=True)]))
        return steps
