"""The table's round state machine (docs/state-machine.md, irregularities and alarm codes included):
pure, deterministic.

``TableMachine(config).handle(TimedInput)`` is the only way its state changes; it returns the messages
to publish (:class:`~daemon.table.inputs.Emit`). No I/O, no clock: every timestamp comes from the input,
so the same inputs give the same state and the same emits (crash recovery replays journaled inputs).

Phases and transitions are tabulated in docs/state-machine.md. In short: ``burn`` (start-of-shoe burn)
-> ``betting`` -> (no-more-bets button, or the first card out of the shoe: wagers locked from the
bet-pad snapshot) ``dealing`` -> [blackjack ``playing`` | UTH ``reveal``] -> ``complete`` -> next round;
``shoe_end`` after the cut card's last round. A held round (see :mod:`daemon.table.alarms`) settles
nothing until released. Per-game dealing: :mod:`daemon.table.baccarat_deal`,
:mod:`daemon.table.blackjack_deal`, :mod:`daemon.table.uth_deal`; what is public:
:mod:`daemon.table.barrier`.

Recovery: build ``TableMachine(config, shoe=N)`` with the number of the shoe in play and replay the
journaled inputs from the one that started it (a ``new_shoe`` on a shoe with no card out keeps its
number), or all inputs from the start with the default ``shoe=1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import msgspec

from tablesense.daemon.config import TableConfig
from tablesense.daemon.messages import (
    AlarmMessage,
    AlarmRecord,
    CommandRecord,
    DeviceStatus,
    RoundResults,
    RoundState,
    ScoreboardMessage,
    SettlementMessage,
    SettlementRecord,
    SpotChangeRecord,
)
from tablesense.daemon.rules.advantage import (
    AdvantageWatch,
    advantage_report,
    offered_pair_wagers,
    parse_threshold,
)
from tablesense.daemon.rules.cards import Card, InvalidCard
from tablesense.daemon.rules.settlement import Outcome as WagerOutcome
from tablesense.daemon.rules.settlement import Settlement, settle_as
from tablesense.daemon.scoreboard import Scoreboard
from tablesense.daemon.signage.info import table_info_message
from tablesense.daemon.table.alarms import ALARMS, AlarmCode
from tablesense.daemon.table.baccarat_deal import BaccaratRound
from tablesense.daemon.table.barrier import public_cards, public_outcome
from tablesense.daemon.table.blackjack_deal import BlackjackRound
from tablesense.daemon.table.game import BURN, Face, GameRound, LockedWager, Outcome
from tablesense.daemon.table.inputs import (
    COMMAND_NAMES,
    Channel,
    Command,
    CommandReply,
    Emit,
    TableStart,
    TimedInput,
)
from tablesense.daemon.table.pads import Pads, PadState
from tablesense.daemon.table.record import CardEntry, RoundRecord
from tablesense.daemon.table.shoe import ShoeTracker
from tablesense.daemon.table.uth_deal import UthRound
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    CardUnreadable,
    DealerButton,
    DeviceError,
    DeviceEvent,
    DeviceState,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
)
from tablesense.drivers.protocols.tsref import SEQ_MODULUS

__all__ = ["COMMAND_ARGS", "MAX_ARG_CHARS", "Phase", "TableMachine", "replay"]

MAX_ARG_CHARS = 256
"""Longest command argument (name or value) accepted; longer ones are refused (bounded inputs)."""
_MAX_ARGS = 8

COMMAND_ARGS: dict[str, tuple[str, ...]] = {
    "void_round": ("reason",),
    "enter_card": ("card",),
    "new_shoe": (),
    "ack_alarm": ("alarm_id", "alarm"),
}
"""The arguments each command accepts (``ack_alarm``'s ``alarm`` is the old name of ``alarm_id``); any
other argument is refused with a reason naming it (docs/state-machine.md, "Commands")."""
_MAX_ACKABLE = 256


class Phase(StrEnum):
    """Where the table is (docs/state-machine.md)."""

    BURN = "burn"
    BETTING = "betting"
    DEALING = "dealing"
    PLAYING = "playing"
    REVEAL = "reveal"
    COMPLETE = "complete"
    SHOE_END = "shoe_end"


_IN_PLAY = frozenset({Phase.DEALING, Phase.PLAYING, Phase.REVEAL})
_BETWEEN = frozenset({Phase.COMPLETE, Phase.SHOE_END})

_ROAD_GAMES = frozenset({"baccarat", "ez-baccarat"})
"""Games with a scoreboard (the baccarat roads, rules.md §5.2)."""

_GAME_ROUNDS: dict[str, type[GameRound]] = {
    "baccarat": BaccaratRound, "ez-baccarat": BaccaratRound, "blackjack": BlackjackRound, "uth": UthRound}


def _bet_text(state: PadState) -> str:
    """A spot's bet for an alarm text: its amount in minor units, ``empty``, or ``chips`` (amount unknown)."""
    if not state.present:
        return "empty"
    return "chips" if state.amount is None else str(state.amount)


class TableMachine:
    """The round state machine of one table.

    Args:
        config: the validated table config.
        shoe: the number of the shoe in play when the machine starts (default 1).

    The public API: :meth:`handle`, :meth:`handle_command`, :attr:`public_state`, :meth:`snapshot`.
    """

    def __init__(self, config: TableConfig, *, shoe: int = 1) -> None:
        self.config = config
        self._rules: Any = config.rules()
        self._round_cls = _GAME_ROUNDS[config.game]
        self._pads = Pads()
        self._dev_seq: dict[str, int] = {}
        self._dev_state: dict[str, LinkState] = {}
        self._card_devices: dict[str, bool] = {}
        self._was_lost: dict[str, bool] = {}
        """Devices disconnected since their last event: a restart at sequence 1 between rounds is no gap."""
        self._holds: dict[str, AlarmCode] = {}
        self._ackable: dict[str, AlarmCode] = {}
        self._unknown_spots: dict[str, bool] = {}
        self._emits: list[Emit] = []
        self._ts = ""
        self._last_state: RoundState | None = None
        self._state: RoundState | None = None
        self._hold_device: dict[str, str] = {}
        self._cmd: Command | None = None
        self._cmd_logged = False
        self._pending: RoundRecord | None = None
        self._alarm_n = 0
        self._scoreboard = Scoreboard() if config.game in _ROAD_GAMES else None
        self._pair_wagers = offered_pair_wagers(self._rules, config.wagers)
        self._advantage = AdvantageWatch(parse_threshold(config.integrity.advantage_threshold))
        self._advantage_alarms: dict[tuple[str, str | None], str] = {}
        self._start_shoe(shoe)

    # ------------------------------------------------------------------------------------ public API

    def handle(self, inp: TimedInput) -> list[Emit]:
        """Apply one input and return what to publish, in order.

        A :class:`~daemon.table.inputs.Command` is applied as by :meth:`handle_command` (the reply is
        dropped). Never raises for any device event or command.
        """
        if isinstance(inp.event, Command):
            return self.handle_command(inp)[1]
        self._begin(inp.ts)
        ev = inp.event
        try:
            if isinstance(ev, TableStart):
                self._publish_info()
            elif isinstance(ev, DeviceState):
                self._on_device_state(ev)
            else:
                self._on_device_event(ev)
        except Exception as exc:  # a defect must not stop the table: hold instead of guessing
            self._internal_error(exc)
        return self._end()

    def _internal_error(self, exc: Exception) -> None:
        self._alarm(AlarmCode.INTERNAL_ERROR, f"input not applied: {type(exc).__name__}: {str(exc)[:160]}")

    def handle_command(self, inp: TimedInput) -> tuple[CommandReply, list[Emit]]:
        """Validate and apply an operator command; return the reply and what to publish.

        Commands that change a round (``void_round``, ``enter_card``) are refused once the round is
        settled; ``new_shoe`` is refused while a round is in play (void it first).
        """
        self._begin(inp.ts)
        cmd = inp.event
        if not isinstance(cmd, Command):
            return CommandReply(False, "not a command"), self._end()
        record = self._rec()
        self._cmd = cmd
        self._cmd_logged = False
        try:
            reply = self._command(cmd)
        except Exception as exc:  # a defect must not stop the table: hold instead of guessing
            self._internal_error(exc)
            reply = CommandReply(False, "internal error: the round is held")
        if cmd.name == "new_shoe":
            record = self._rec()
        if not self._cmd_logged:
            record.commands.append(self._command_record(cmd, reply))
        self._cmd = None
        return reply, self._end()

    def _command_record(self, cmd: Command, reply: CommandReply) -> CommandRecord:
        args = {str(k)[:MAX_ARG_CHARS]: str(v)[:MAX_ARG_CHARS] for k, v in list(cmd.args.items())[:_MAX_ARGS]}
        return CommandRecord(ts=self._ts, name=str(cmd.name)[:64], args=args,
                             operator=str(cmd.operator)[:MAX_ARG_CHARS], ok=reply.ok, reason=reply.reason)

    def seed_pads(self, events: Sequence[SpotChanged]) -> None:
        """Set the bet-pad state from spot changes seen before the replayed inputs (recovery): no alarm,
        no record, no emit. Only the last state of each spot matters."""
        for ev in events:
            self._pads.update(ev)

    @property
    def public_state(self) -> RoundState:
        """The public round state (as last published on the ``round`` channel)."""
        return self._state if self._state is not None else self._round_state()

    @property
    def phase(self) -> Phase:
        """The current phase."""
        return self._phase

    def snapshot(self) -> dict[str, Any]:
        """Everything that defines the machine's state, as plain data (tests, recall, replay checks)."""
        return {
            "phase": self._phase.value,
            "shoe": self._shoe.number,
            "round": self._round_no,
            "remaining": self._shoe.remaining,
            "counts": [n for _, n in self._shoe.composition.counts()],
            "burning": self._shoe.burning,
            "cut_card": self._shoe.cut_card,
            "last_round": self._shoe.last_round,
            "holds": dict(self._holds),
            "settled": sorted(self._settled),
            "queue": [e.index for e in self._queue],
            "slots": [(s.index, s.position, str(s.card) if s.card else None)
                      for s in (self._game.slots if self._game else [])],
            "pads": self._pads.snapshot(),
            "device_seq": dict(sorted(self._dev_seq.items())),
            "record": msgspec.to_builtins(self._record.floor_round(
                self.config.table, self.config.game, "", self._outcome_full())),
            "public": msgspec.to_builtins(self._round_state()),
            "scoreboard": self._scoreboard.to_dict() if self._scoreboard is not None else None,
        }

    # ------------------------------------------------------------------------------------ emitting

    def _begin(self, ts: str) -> None:
        self._emits = []
        self._ts = ts

    def _end(self) -> list[Emit]:
        state = self._round_state()
        self._state = state
        if self._last_state is None or msgspec.structs.replace(state, ts="") != self._last_state:
            self._last_state = msgspec.structs.replace(state, ts="")
            self._emits.append(Emit(Channel.ROUND, state, retain=True, qos=1))
        out, self._emits = self._emits, []
        return out

    def _emit(self, channel: Channel, message: Any, device: str | None = None, retain: bool = False) -> None:
        self._emits.append(Emit(channel, message, device=device, retain=retain, qos=1))

    def _publish_info(self) -> None:
        """Emit the retained table info (at start and at every new shoe)."""
        self._emit(Channel.INFO, table_info_message(self.config, ts=self._ts, shoe=self._shoe.number),
                   retain=True)

    def _publish_scoreboard(self, round_no: int | None) -> None:
        """Emit the retained scoreboard of the shoe (baccarat games), ``round_no`` the round whose results
        caused it (``None`` for the empty board of a new shoe)."""
        if self._scoreboard is None:
            return
        self._scoreboard.set_cards_remaining(self._shoe.remaining)
        self._emit(Channel.SCOREBOARD, ScoreboardMessage(
            table=self.config.table, ts=self._ts, shoe=self._shoe.number, round=round_no,
            roads=self._scoreboard.snapshot()), retain=True)

    def _round_state(self) -> RoundState:
        return RoundState(
            table=self.config.table, ts=self._ts, shoe=self._shoe.number, round=self._round_no,
            game=self.config.game, phase=self._phase.value,
            cards=public_cards(self._game), held=bool(self._holds),
            hold_codes=tuple(sorted({c.value for c in self._holds.values()})),
            cards_remaining=self._shoe.remaining, penetration=self._shoe.penetration,
            cut_card=self._shoe.cut_card, last_round=self._shoe.last_round == self._round_no,
            void=self._record.void, revealed=self._game is not None and self._game.revealed)

    # ------------------------------------------------------------------------------------ alarms

    def _alarm(self, code: AlarmCode, text: str, *, seat: str | None = None, spot: str | None = None,
               device: str | None = None, hold: bool | None = None) -> str:
        spec = ALARMS[code]
        holding = spec.holds if hold is None else hold
        self._alarm_n += 1
        alarm_id = f"{self._shoe.number}.{self._alarm_n}"
        self._publish_alarm(alarm_id, code, text, "raised", holding, seat, spot, device)
        if holding:
            self._holds[alarm_id] = code
            if device is not None:
                self._hold_device[alarm_id] = device
        self._ackable[alarm_id] = code
        while len(self._ackable) > _MAX_ACKABLE:
            oldest = next(k for k in self._ackable if k not in self._holds)
            del self._ackable[oldest]
        return alarm_id

    def _publish_alarm(self, alarm_id: str, code: AlarmCode, text: str, state: str, held: bool,
                       seat: str | None = None, spot: str | None = None, device: str | None = None) -> None:
        spec = ALARMS[code]
        self._rec().alarms.append(AlarmRecord(
            alarm_id=alarm_id, code=code.value, severity=spec.severity.value, text=text, state=state,
            held=held, ts=self._ts, seat=seat, spot=spot, device=device))
        self._emit(Channel.ALARMS, AlarmMessage(
            table=self.config.table, ts=self._ts, shoe=self._shoe.number, round=self._round_no,
            alarm_id=alarm_id, code=code.value, severity=spec.severity.value, text=text, state=state,
            held=held, seat=seat, spot=spot, device=device))

    def _release(self, alarm_id: str, state: str = "cleared") -> None:
        code = self._holds.pop(alarm_id, None) or self._ackable.get(alarm_id)
        self._hold_device.pop(alarm_id, None)
        self._ackable.pop(alarm_id, None)
        if code is not None:
            self._publish_alarm(alarm_id, code, f"{code.value} {state}", state, False)

    def _release_all(self) -> None:
        for alarm_id in list(self._holds):
            self._release(alarm_id)

    # ------------------------------------------------------------------------------------ shoe & rounds

    def _watch_advantage(self) -> None:
        """After a completed round: the exact expected return of every pair wager for the next round
        from the cards left in the shoe; ADVANTAGE_PLAY raised once when one goes above the threshold,
        cleared when it falls back (docs/advantage-watch.md)."""
        if not self._pair_wagers:
            return
        report = advantage_report(self._shoe.composition, self._pair_wagers)
        raised, cleared = self._advantage.update(report)
        for f in cleared:
            alarm_id = self._advantage_alarms.pop(f.key, None)
            if alarm_id is not None:
                self._release(alarm_id)
        for f in raised:
            self._advantage_alarms[f.key] = self._alarm(AlarmCode.ADVANTAGE_PLAY, f.describe())

    def _start_shoe(self, number: int) -> None:
        self._advantage.reset()
        for alarm_id in self._advantage_alarms.values():
            self._release(alarm_id)
        self._advantage_alarms = {}
        self._shoe = ShoeTracker(self.config.shoe_decks, number, self.config.burn)
        if self._scoreboard is not None:
            self._scoreboard.reset(number)  # void rounds never reach it: see _finish
        self._alarm_n = 0  # alarm ids restart with each shoe, so a replay from the shoe's start numbers alike
        self._ackable = {k: v for k, v in self._ackable.items() if k in self._holds}
        self._round_no = 0
        self._record = RoundRecord(number, 0)
        self._open_round()
        self._phase = Phase.BURN if self._shoe.burning else Phase.BETTING

    def _open_round(self) -> None:
        self._round_no += 1
        record = RoundRecord(self._shoe.number, self._round_no, opened_ts=self._ts or None)
        if self._pending is not None:
            record.absorb(self._pending)
        self._pending = None
        self._record = record
        self._game: GameRound | None = None
        self._settled: dict[str, bool] = {}
        self._queue: list[CardEntry] = []
        self._changed: dict[str, bool] = {}
        self._limit_seen: dict[tuple[str, int], bool] = {}
        self._phase = Phase.BETTING

    def _rec(self) -> RoundRecord:
        """The record events go to: the round's, or between rounds the next round's."""
        if self._phase in _BETWEEN:
            if self._pending is None:
                self._pending = RoundRecord(self._shoe.number, self._round_no + 1)
            return self._pending
        return self._record

    def _lock(self) -> None:
        self._phase = Phase.DEALING
        self._record.locked_ts = self._ts
        wagers = self._pads.lock(self.config)
        for w in wagers:
            self._check_limits(w.spot, w.stake, presence_only=w.presence_only)
        self._record.wagers = [w.record() for w in wagers]
        self._game = self._round_cls(self.config, self._rules, wagers)
        if isinstance(self._game, BlackjackRound) and any(w.bet.value == "blackjack" for w in wagers):
            for w in self._game.settled_wagers():
                if w.seat not in self._game.boxes:
                    self._alarm(AlarmCode.PP_WITHOUT_BLACKJACK,
                                f"perfect_pairs on box {w.seat} without a blackjack wager: returned",
                                seat=w.seat, spot=w.spot)

    def _check_limits(self, spot: str, stake: int, presence_only: bool = False) -> None:
        conf = self.config.spots[spot]
        limits = self.config.wagers[conf.bet]
        if presence_only or limits.min <= stake <= limits.max or (spot, stake) in self._limit_seen:
            return
        self._limit_seen[(spot, stake)] = True
        self._alarm(AlarmCode.WAGER_LIMIT, f"seat {conf.seat} spot {spot}: {conf.bet} stake {stake} outside "
                    f"the table limits {limits.min}-{limits.max}", seat=conf.seat, spot=spot)

    def _finish(self) -> None:
        game = self._game
        self._phase = Phase.COMPLETE
        self._record.completed_ts = self._ts
        self._shoe.rounds_completed += 1
        out = public_outcome(game) if not self._record.void else public_outcome(None)
        results = RoundResults(
            table=self.config.table, ts=self._ts, shoe=self._shoe.number, round=self._round_no,
            game=self.config.game, void=self._record.void, baccarat=out.baccarat, boxes=out.boxes,
            dealer=out.dealer, board=out.board)
        self._emit(Channel.RESULTS, results)
        if self._scoreboard is not None:
            if not results.void:
                self._scoreboard.add_results(results)
            self._publish_scoreboard(self._round_no)
        self._emit(Channel.FLOOR_ROUNDS, self._record.floor_round(
            self.config.table, self.config.game, self._ts, self._outcome_full()))
        self._queue = []
        last = self._shoe.last_round
        if (last is not None and self._round_no >= last) or self._shoe.empty:
            self._phase = Phase.SHOE_END
        else:
            self._watch_advantage()

    def _outcome_full(self) -> Outcome:
        if self._game is None or self._game.unresolved() is not None:
            return Outcome()
        try:
            return self._game.outcome(public=False)
        except ValueError:
            return Outcome()

    def _settle(self, wager: LockedWager, s: Settlement) -> None:
        self._settled[wager.spot] = True
        changed = wager.spot in self._changed
        odds = str(s.odds) if s.odds else None
        hand = wager.hand.value if wager.hand else None
        self._record.settlements.append(SettlementRecord(
            spot=wager.spot, seat=wager.seat, bet=wager.bet.value, hand=hand, stake=wager.stake,
            outcome=s.outcome.value, category=s.category, odds=odds, net=s.net, commission=s.commission,
            changed_after_lock=changed, ts=self._ts))
        self._emit(Channel.SETTLEMENTS, SettlementMessage(
            table=self.config.table, ts=self._ts, shoe=self._shoe.number, round=self._round_no,
            spot=wager.spot, seat=wager.seat, bet=wager.bet.value, hand=hand, stake=wager.stake,
            outcome=s.outcome.value, category=s.category, odds=odds, net=s.net, commission=s.commission,
            changed_after_lock=changed))

    def _advance(self) -> None:
        """Place queued cards, settle what is due, complete the round: as far as holds allow."""
        game = self._game
        if game is None or self._phase not in _IN_PLAY:
            return
        while self._queue and game.unresolved() is None:
            self._place(self._queue.pop(0), from_queue=True)
        if game.initial_deal_done and self._phase is Phase.DEALING and not game.complete():
            self._phase = Phase.REVEAL if isinstance(game, UthRound) else Phase.PLAYING
        if game.unresolved() is not None:
            return
        if self._holds:
            return
        for wager, s in game.due():
            if wager.spot not in self._settled:
                self._settle(wager, s)
        if game.complete():
            self._finish()

    def _void(self, reason: str) -> None:
        game = self._game
        self._record.void = True
        self._release_all()
        if game is not None:
            for w in game.settled_wagers():
                if w.spot not in self._settled:
                    self._settle(w, settle_as(w.for_rules(False), WagerOutcome.VOID, "void_round"))
        self._alarm(AlarmCode.ROUND_VOID, f"round {self._round_no} voided: {reason}")
        if self._cmd is not None and self._cmd.name == "void_round":  # recorded in the voided round
            self._record.commands.append(self._command_record(self._cmd, CommandReply(True)))
            self._cmd_logged = True
        self._finish()

    # ------------------------------------------------------------------------------------ device events

    def _role(self, device: str) -> str:
        conf = self.config.devices.get(device)
        if conf is not None:
            return conf.role
        return "shoe" if device in self._card_devices else "pads"

    def _on_device_state(self, ev: DeviceState) -> None:
        previous = self._dev_state.get(ev.device)
        self._dev_state[ev.device] = ev.state
        self._emit(Channel.DEVICE, DeviceStatus(table=self.config.table, ts=self._ts, name=ev.device,
                                                state=ev.state.value, detail=ev.detail[:200]),
                   device=ev.device, retain=True)
        lost = [a for a, c in self._holds.items() if c is AlarmCode.DEVICE_LOST]
        if ev.state is LinkState.DISCONNECTED:
            self._was_lost[ev.device] = True
        if ev.state is LinkState.DISCONNECTED and previous is not LinkState.DISCONNECTED:
            shoe_mid_round = self._role(ev.device) == "shoe" and self._phase in _IN_PLAY
            self._alarm(AlarmCode.DEVICE_LOST, f"device {ev.device} disconnected"
                        + (": round held until it is back or voided" if shoe_mid_round else ""),
                        device=ev.device, hold=shoe_mid_round)
        elif ev.state is LinkState.ONLINE and previous is LinkState.DISCONNECTED:
            for alarm_id in lost:
                if self._hold_device.get(alarm_id) == ev.device:
                    self._release(alarm_id)
            self._advance()

    def _on_device_event(self, ev: DeviceEvent) -> None:
        last = self._dev_seq.get(ev.device)
        self._dev_seq[ev.device] = ev.seq
        restarted = self._was_lost.pop(ev.device, False) and ev.seq <= 1 and self._phase not in _IN_PLAY
        gap = last is not None and ev.seq != (last + 1) % SEQ_MODULUS and not restarted  # 99999 -> 0: no gap
        is_card = isinstance(ev, CardDrawn | CardUnreadable)
        if gap and not is_card:
            hold = self._role(ev.device) == "shoe" and self._phase in _IN_PLAY
            self._alarm(AlarmCode.SEQUENCE_GAP, f"device {ev.device}: sequence {last} then {ev.seq}",
                        device=ev.device, hold=hold)
        if isinstance(ev, CardDrawn):
            self._on_card(ev.card, ev.device, ev.seq, gap, last)
        elif isinstance(ev, CardUnreadable):
            self._on_card(None, ev.device, ev.seq, gap, last)
        elif isinstance(ev, SpotChanged):
            self._on_spot(ev)
        elif isinstance(ev, DealerButton):
            self._on_button(ev.button)
        elif isinstance(ev, ShoeStatus):
            self._on_shoe_status(ev)
        elif isinstance(ev, DeviceError):
            self._alarm(AlarmCode.DEVICE_ERROR, f"device {ev.device} error {ev.code[:40]}: {ev.text[:160]}",
                        device=ev.device)
        self._advance()

    def _on_card(self, card: Card | None, device: str, seq: int, gap: bool, last: int | None) -> None:
        self._card_devices[device] = True
        if self._phase is Phase.BURN:
            self._burn(card, device, seq)
            if gap:
                self._alarm(AlarmCode.SEQUENCE_GAP, f"device {device}: sequence {last} then {seq} during the "
                            "burn", device=device, hold=False)
            return
        if self._phase is Phase.COMPLETE and self.config.round.start == "card" and not gap:
            self._open_round()
        if self._phase is Phase.BETTING:
            self._lock()
        entry = self._rec().new_card(card, self._ts, device, seq)
        code = self._shoe.take(card) if card is not None else self._shoe.take_unknown()
        entry.taken = code is None
        if code is not None:
            self._set_aside(entry, code, f"a card the {self._shoe.composition.decks}-deck shoe cannot hold"
                            if code is AlarmCode.CARD_NOT_IN_SHOE else "more cards than the shoe holds")
        elif gap:
            self._set_aside(entry, AlarmCode.SEQUENCE_GAP, f"device {device}: sequence {last} then {seq}; "
                            "the card joins no hand")
        elif self._phase in _BETWEEN:
            self._set_aside(entry, AlarmCode.EXTRA_CARD, f"a card after round {self._round_no} was complete")
        else:
            self._place(entry)

    def _set_aside(self, entry: CardEntry, code: AlarmCode, text: str) -> None:
        entry.status = "set_aside"
        entry.alarm_id = self._alarm(code, text, device=entry.device)

    def _place(self, entry: CardEntry, from_queue: bool = False) -> None:
        game = self._game
        assert game is not None
        if game.unresolved() is not None or (self._queue and not from_queue):
            entry.status = "queued"
            self._queue.append(entry)
            return
        if game.next_position() is None:
            self._set_aside(entry, AlarmCode.EXTRA_CARD, "a card when the rules call for none")
            return
        slot = game.place(entry.index, entry.card)
        entry.position, entry.face_up = slot.position, slot.face is Face.UP
        if slot.position == BURN:
            entry.status = "burned"
        elif entry.card is None:
            entry.status = "unreadable"
            entry.alarm_id = self._alarm(AlarmCode.CARD_UNREADABLE,
                                         f"card {entry.index} of round {self._round_no} unreadable: enter it "
                                         "(enter_card) or void the round", device=entry.device)
        elif entry.status != "entered":
            entry.status = "dealt"

    def _burn(self, card: Card | None, device: str | None, seq: int | None) -> None:
        """One start-of-shoe burn card."""
        face_up = self._shoe.awaiting_exposed
        entry = self._rec().new_burn(card, self._ts, device, seq, face_up=face_up and card is not None)
        code = self._shoe.take(card) if card is not None else self._shoe.take_unknown()
        if code is not None:
            entry.alarm_id = self._alarm(AlarmCode.BURN, "a burn card the shoe cannot hold", device=device)
        if card is None and face_up:
            entry.alarm_id = self._alarm(AlarmCode.BURN, "the exposed burn card was unreadable: enter it "
                                         "(enter_card) to set the burn count", device=device)
        if self._phase is Phase.BURN:
            self._shoe.burn_step(card)
            if not self._shoe.burning:
                self._phase = Phase.BETTING

    def _on_spot(self, ev: SpotChanged) -> None:
        conf = self.config.spots.get(ev.spot)
        if conf is None:
            if ev.spot[:64] not in self._unknown_spots and len(self._unknown_spots) < _MAX_ACKABLE:
                self._unknown_spots[ev.spot[:64]] = True
                self._alarm(AlarmCode.UNKNOWN_SPOT, f"spot {ev.spot[:64]!r} is not in the spot map",
                            device=ev.device)
            return
        before, after = self._pads.update(ev)
        locked = self._phase in _IN_PLAY
        changed = locked and before.key != after.key
        self._rec().spot_changes.append(SpotChangeRecord(
            ts=self._ts, device=ev.device, device_seq=ev.seq, spot=ev.spot, state=ev.state.value,
            amount=ev.amount, after_lock=changed))
        if changed:
            self._changed[ev.spot] = True
            presence = after.amount is None and before.amount is None
            code = AlarmCode.PRESENCE_CHANGED_AFTER_LOCK if presence else AlarmCode.PAST_POSTING
            what = ("presence changed" if presence
                    else f"changed from {_bet_text(before)} to {_bet_text(after)}")
            self._alarm(code, f"seat {conf.seat} spot {ev.spot} ({conf.bet}) {what} after the wagers were "
                        "locked; settled at the locked value", seat=conf.seat, spot=ev.spot, device=ev.device)
        elif self._phase in (Phase.BETTING, Phase.BURN) and after.present and after.amount is not None:
            self._check_limits(ev.spot, after.amount)

    def _on_button(self, button: Button) -> None:
        phase = self._phase
        if button is Button.VOID_ROUND:
            if phase in _IN_PLAY:
                self._void("void button")
            else:
                self._alarm(AlarmCode.UNEXPECTED_BUTTON,
                            f"void_round in phase {phase.value}: no round in play")
        elif button is Button.NO_MORE_BETS:
            if phase is Phase.PLAYING and not self._holds and self._game is not None:
                self._game.on_round_end()
                self._advance()
                phase = self._phase
            if phase is Phase.COMPLETE:
                self._open_round()
                phase = self._phase
            if phase is Phase.BETTING:
                self._lock()
            else:
                self._alarm(AlarmCode.UNEXPECTED_BUTTON, f"no_more_bets in phase {phase.value}")
        elif button is Button.ROUND_END:
            game = self._game
            if phase in (Phase.PLAYING, Phase.REVEAL) and game is not None and game.on_round_end():
                return
            if phase is Phase.COMPLETE:
                self._open_round()
                return
            if phase is Phase.SHOE_END and self._record.completed_ts is not None:
                return  # the dealer closing the shoe's last round (baccarat ends by its cards): normal
            due = " with cards still due" if phase in _IN_PLAY and game is not None else ""
            self._alarm(AlarmCode.UNEXPECTED_BUTTON, f"round_end in phase {phase.value}{due}")

    def _on_shoe_status(self, ev: ShoeStatus) -> None:
        kind = ev.kind
        if kind is ShoeStatusKind.NEW_SHOE:
            self._new_shoe("new shoe loaded")
        elif kind is ShoeStatusKind.BURN:
            self._card_devices[ev.device] = True
            game = self._game
            if (self._phase in _IN_PLAY and game is not None and game.unresolved() is None and not self._queue
                    and (game.next_position() or ("",))[0] == BURN):
                entry = self._record.new_card(ev.card, self._ts, ev.device, ev.seq)
                code = self._shoe.take(ev.card) if ev.card is not None else self._shoe.take_unknown()
                entry.taken = code is None
                self._place(entry)
            else:
                self._burn(ev.card, ev.device, ev.seq)
        elif kind is ShoeStatusKind.CUT_CARD:
            if not self._shoe.cut_card:
                self._shoe.cut_card = True
                started = self._phase in _IN_PLAY or self._phase is Phase.COMPLETE
                self._shoe.last_round = self._round_no + 1 if started else self._round_no
                self._alarm(AlarmCode.CUT_CARD,
                            f"cut card: the shoe ends after round {self._shoe.last_round}")
        elif kind is ShoeStatusKind.EMPTY:
            self._shoe.empty = True
            if self._phase in _IN_PLAY:
                self._alarm(AlarmCode.SHOE_EXHAUSTED, "the shoe reported empty mid-round")
            elif self._phase in (Phase.BETTING, Phase.BURN, Phase.COMPLETE):
                self._phase = Phase.SHOE_END
        elif kind is ShoeStatusKind.LID_OPEN and self._phase in _IN_PLAY:
            self._alarm(AlarmCode.LID_OPEN, "the shoe's lid was opened mid-round", device=ev.device)

    def _new_shoe(self, reason: str) -> None:
        if self._phase in _IN_PLAY:
            self._void(f"{reason} mid-round")
        self._release_all()
        # A new shoe starts a clean record (what happened since the last round is in its own alarm
        # messages and the journal), so a replay from the shoe's first input rebuilds the same records.
        self._pending = None
        fresh = self._shoe.dealt == 0 and not self._shoe.rounds_completed
        self._start_shoe(self._shoe.number if fresh else self._shoe.number + 1)
        self._publish_info()
        self._publish_scoreboard(None)

    # ------------------------------------------------------------------------------------ commands

    def _command(self, cmd: Command) -> CommandReply:
        if cmd.name not in COMMAND_NAMES:
            names = ", ".join(COMMAND_NAMES)
            return CommandReply(False, f"unknown command {str(cmd.name)[:64]!r} (one of {names})")
        if len(cmd.args) > _MAX_ARGS or any(len(str(k)) > MAX_ARG_CHARS or len(str(v)) > MAX_ARG_CHARS
                                            for k, v in cmd.args.items()):
            return CommandReply(False, f"too many or too long arguments (at most {_MAX_ARGS}, "
                                       f"{MAX_ARG_CHARS} characters each)")
        if not str(cmd.operator).strip():
            return CommandReply(False, "the command carries no operator identity")
        unknown = [str(k) for k in cmd.args if k not in COMMAND_ARGS[cmd.name]]
        if unknown:
            allowed = ", ".join(COMMAND_ARGS[cmd.name]) or "none"
            return CommandReply(False, f"unknown argument {unknown[0][:64]!r} for {cmd.name} "
                                       f"(accepted: {allowed})")
        if cmd.name == "void_round":
            refusal = self._round_refusal()
            if refusal:
                return CommandReply(False, refusal)
            self._void(f"by {cmd.operator}" + (f": {cmd.args['reason']}" if cmd.args.get("reason") else ""))
            return CommandReply(True)
        if cmd.name == "enter_card":
            return self._enter_card(cmd)
        if cmd.name == "new_shoe":
            if self._phase in _IN_PLAY:
                return CommandReply(False, f"round {self._round_no} is in play: void it first")
            self._new_shoe(f"new shoe by {cmd.operator}")
            return CommandReply(True)
        return self._ack(cmd)

    def _round_refusal(self) -> str:
        if self._phase in _IN_PLAY:
            return ""
        if self._phase in _BETWEEN and self._round_no > 0 and self._record.completed_ts is not None:
            return f"round {self._shoe.number}-{self._round_no} is already settled"
        return "no round in play"

    def _enter_card(self, cmd: Command) -> CommandReply:
        try:
            card = Card.parse(str(cmd.args.get("card", "")))
        except InvalidCard as exc:
            return CommandReply(False, str(exc))
        if self._phase is Phase.BURN and self._shoe.exposed_unknown:
            if self._shoe.resolve_unknown(card) is not None:
                return CommandReply(False, f"{card} cannot be in the shoe any more")
            self._shoe.enter_exposed(card)
            if not self._shoe.burning:
                self._phase = Phase.BETTING
            return CommandReply(True)
        refusal = self._round_refusal()
        if refusal:
            return CommandReply(False, refusal)
        game = self._game
        assert game is not None
        slot = game.unresolved()
        if slot is not None:
            if self._shoe.resolve_unknown(card) is not None:
                return CommandReply(False, f"{card} cannot be in the shoe any more")
            game.fill(card)
            for e in self._record.cards:
                if e.index == slot.index:
                    e.card, e.status = card, "entered"
                    if e.alarm_id in self._holds:
                        self._release(e.alarm_id)
            self._advance()
            return CommandReply(True)
        if not any(code is AlarmCode.SEQUENCE_GAP for code in self._holds.values()):
            return CommandReply(False, "no unreadable card or gap waiting for a card")
        if self._queue or game.next_position() is None:
            return CommandReply(False, "the rules call for no card now")
        aside = next((e for e in self._record.cards
                      if e.status == "set_aside" and e.card == card and e.taken), None)
        if aside is None and self._shoe.take(card) is not None:
            return CommandReply(False, f"{card} cannot be in the shoe any more")
        if aside is not None:
            aside.status = "re_entered"
        entry = self._record.new_card(card, self._ts, None, None)
        entry.status, entry.taken = "entered", True
        self._place(entry)
        self._advance()
        return CommandReply(True)

    def _ack(self, cmd: Command) -> CommandReply:
        alarm_id = str(cmd.args.get("alarm_id", cmd.args.get("alarm", "")))
        code = self._ackable.get(alarm_id)
        if code is None:
            return CommandReply(False, f"no alarm {alarm_id[:64]!r} awaiting acknowledgement")
        if alarm_id in self._holds and not ALARMS[code].ack_releases:
            return CommandReply(False, f"alarm {alarm_id} ({code.value}) is released by enter_card or "
                                       "void_round")
        self._release(alarm_id, "acknowledged")
        self._advance()
        return CommandReply(True)


def replay(config: TableConfig, inputs: Sequence[TimedInput], *,
           shoe: int = 1) -> tuple[TableMachine, list[Emit]]:
    """Feed ``inputs`` into a fresh machine; return it and every emit (crash recovery, tests)."""
    machine = TableMachine(config, shoe=shoe)
    emits: list[Emit] = []
    for inp in inputs:
        emits += machine.handle(inp)
    return machine, emits
