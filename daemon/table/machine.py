"""The table's round state machine (docs/state-machine.md, irregularities and alarm codes included):
pure, deterministic.

``TableMachine(config).handle(TimedInput)`` is the only way its state changes; it returns the messages
to publish (:class:`~daemon.table.inputs.Emit`). No I/O, no clock: every timestamp comes from the input,
so the same inputs give the same state and the same emits (crash recovery replays journaled inputs).

Phases and transitions are tabulated in docs/state-machine.md. In short: ``burn`` (start-of-shoe burn)
-> ``betting`` -> (no-more-bets button, or the first card out of the shoe: wagers locked from the
bet-pad snapshot) ``dealing`` -> [blackjack ``playing`` | UTH ``reveal``] -> ``complete`` -> next round;
``shoe_end`` after the cut card's last round. A held round (see :mod:`daemon.table.alarms`) settles
nothing until released; a no-more-bets the dealer presses on it waits, with every later device frame,
until it is resolved, and so do chips moved once the dealer has ended it (:meth:`TableMachine._waits`).
Per-game dealing: :mod:`daemon.table.baccarat_deal`, :mod:`daemon.table.blackjack_deal`,
:mod:`daemon.table.uth_deal`; what is public: :mod:`daemon.table.barrier`.

Recovery: build ``TableMachine(config, shoe=N)`` with the number of the shoe in play, seed what it knew
from before (:meth:`TableMachine.seed_pads`: the bet pads; :meth:`TableMachine.seed_devices`: each
device's session, link state, sequence number and last frames) and replay the journaled inputs from the
one that started it (a ``new_shoe`` on a shoe with no card out keeps its number), or all inputs from the
start with the default ``shoe=1``.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, get_args

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
from tablesense.daemon.rules.money import max_stake, wager_odds
from tablesense.daemon.rules.settlement import Outcome as WagerOutcome
from tablesense.daemon.rules.settlement import Settlement, settle_as
from tablesense.daemon.scoreboard import Scoreboard
from tablesense.daemon.signage.info import commission_info, table_info_message
from tablesense.daemon.table.alarms import ALARMS, AlarmCode
from tablesense.daemon.table.baccarat_deal import BaccaratRound
from tablesense.daemon.table.barrier import public_cards, public_outcome
from tablesense.daemon.table.blackjack_deal import BlackjackRound
from tablesense.daemon.table.game import BURN, TERM, Face, GameRound, LockedWager, Outcome
from tablesense.daemon.table.inputs import (
    COMMAND_NAMES,
    RESEND_WINDOW,
    ROUND_BOUND_COMMANDS,
    SHOE_BOUND_COMMANDS,
    Channel,
    Command,
    CommandReply,
    DeviceSeed,
    Emit,
    InstanceConflict,
    JournalOutage,
    RejectedInput,
    TableStart,
    Tick,
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
    DeviceIdentity,
    DeviceState,
    Heartbeat,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)
from tablesense.drivers.protocols.tsref import SEQ_MODULUS

__all__ = ["COMMAND_ARGS", "MAX_ARG_CHARS", "RESEND_WINDOW", "InputRejected", "Phase", "TableMachine",
           "replay"]

MAX_ARG_CHARS = 256
"""Longest command argument (name or value) accepted; longer ones are refused (bounded inputs)."""
_MAX_ARGS = 8

COMMAND_ARGS: dict[str, tuple[str, ...]] = {
    "void_round": ("shoe", "round", "reason"),
    "enter_card": ("shoe", "round", "card"),
    "new_shoe": ("shoe",),
    "ack_alarm": ("alarm_id", "alarm"),
    "rescan": ("action", "shoe", "round"),
}
"""The arguments each command accepts (``ack_alarm``'s ``alarm`` is the old name of ``alarm_id``;
``shoe`` and ``round`` name the round or shoe a command is bound to, checked before it is applied); any
other argument is refused with a reason naming it (docs/state-machine.md, "Commands")."""
_MAX_ACKABLE = 256
"""Open (acknowledgeable) alarms kept: beyond it the oldest one that holds nothing is forgotten. Holds
are never forgotten; coalescing (one open alarm per irregularity, round, device, seat and spot) bounds
them."""
_MAX_RECORD_ITEMS = 1024
"""Set-aside cards, spot changes, alarm records and commands one round record lists at most (a faulty
shoe repeating a card, a flapping pad): the journal keeps every input, the alarm counts the repeats."""
_RESCAN_ACTIONS = ("keep", "set_aside")
_CARD_KINDS = frozenset({"CardDrawn", "CardUnreadable"})
"""Journal kinds of the card frames (a rejected one leaves its place in the deal empty)."""
ADDRESS = "<address>"
"""A device's address as the public ``devices/{name}`` detail reads (:meth:`TableMachine._public_detail`)."""
_HOLD_CARD_CODES = frozenset({"SEQUENCE_GAP", "INPUT_REJECTED", "DEVICE_RESTARTED", "CARD_NOT_IN_SHOE"})
"""Holds during which ``enter_card`` may put a card the device lost (or an input that was rejected, or
the real value of a card the reader misread as one the shoe cannot hold)."""
_SHOE_EVENTS = (CardDrawn, CardUnreadable, ShoeStatus)
"""Events only the shoe sends (``CD``, ``CU``, ``NS``, ``BN``, ``CC``, ``EM``, ``LO``, ``LC``;
docs/protocol.md §3)."""
_PADS_EVENTS = (SpotChanged, DealerButton)
"""Events only the bet-sensor pads send (``SP``, ``BT``: docs/protocol.md §3)."""
_DEVICE_EVENT_TYPES: frozenset[type] = frozenset(get_args(DeviceEvent))
"""The classes of :data:`~drivers.events.DeviceEvent`: an input of one of them is a device frame."""
_CARD_EVENTS = (CardDrawn, CardUnreadable)
_SPOT_STATE: dict[StrEnum, str] = {m: m.value for m in SpotState}
_MAX_WAITING = 4096
"""Device frames that wait until the held round is resolved (:meth:`TableMachine._waits`): beyond it a
frame is not kept, and the frames left out are taken as lost (``SEQUENCE_GAP`` in their place when the
wait ends): a dealer who deals many coups on a held round, or a device flooding
it, cannot grow the machine without bound."""
_QUIET = (Heartbeat, DeviceIdentity, DeviceError)
"""Frames that change nothing of a round (unless they carry a sequence gap or a device restart): they
never wait."""


@dataclass(slots=True)
class _Waiting:
    """Something of the devices that waits until the held round in play is resolved (behind the dealer's
    no-more-bets pressed on it, or a chip moved once it is over: :meth:`TableMachine._waits`;
    :meth:`TableMachine._resume` applies it later, in order): a device frame (``frame``,
    with what its arrival decided: a sequence gap, the frame before it, a restart), a rejected frame
    (``rejected``), the shoe's lost link (``watch``: compare its next card with its last one) or frames
    left out beyond :data:`_MAX_WAITING` (``lost``, ``last`` to ``seq``). ``ts``: when it arrived."""

    ts: str
    kind: str
    device: str
    event: Any = None
    gap: bool = False
    last: int | None = None
    restart: bool = False
    seq: int | None = None

    def plain(self) -> list[Any]:
        """As plain data (:meth:`TableMachine.snapshot`)."""
        name = type(self.event).__name__ if self.event is not None else None
        return [self.ts, self.kind, self.device, name, getattr(self.event, "seq", self.seq), self.gap,
                self.last, self.restart]


class InputRejected(Exception):
    """Applying an input raised (a defect in tablesense); ``str()`` is one line naming the exception.

    The machine's state is then undefined: rebuild it from the journal and journal the input as a
    :class:`~daemon.table.inputs.RejectedInput` (what :class:`daemon.app.App` does)."""

MAX_REMEMBERED_COMMANDS = 4096
"""Command ids whose answers the machine keeps (the newest); a command repeated within its expiry
window (``[mqtt] command_max_age``, at most 20 commands/s) is always among them."""


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


_STAKE_BOUNDS: dict[tuple[Any, ...], dict[str, int]] = {}


def _stake_bounds(config: TableConfig, rules: Any) -> dict[str, int]:
    """The largest stake each wager may have (the money bound, :func:`daemon.rules.money.max_stake`),
    computed once per game, deck count and paytables (every rebuild of a machine reuses it)."""
    key = (config.game, config.decks, tuple(sorted(config.paytables().items())))
    bounds = _STAKE_BOUNDS.get(key)
    if bounds is None:
        bounds = {bet: max_stake([odds]) for bet, odds in wager_odds(config.game, rules).items()}
        if len(_STAKE_BOUNDS) < 64:
            _STAKE_BOUNDS[key] = bounds
    return bounds


def _parse_ts(ts: str) -> datetime | None:
    """An input's ISO-8601 time (``...Z``), ``None`` when it cannot be read."""
    try:
        return datetime.fromisoformat(ts)
    except (TypeError, ValueError):
        return None


def _iso(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds and ``Z`` (the journal's input stamp)."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


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

    The public API: :meth:`handle`, :meth:`handle_command`, :attr:`public_state`, :meth:`snapshot`, for
    the daemon's intake :meth:`is_resend`, :meth:`last_seq`, :meth:`session` and :meth:`stall_due`, and
    for a machine rebuilt from the journal :meth:`seed_pads` and :meth:`seed_devices`.
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
        """Devices disconnected since their last event: a version 1 device's restart at sequence 0 or 1
        between rounds is no gap when it cannot be the wrap (:meth:`_on_device_event`)."""
        self._written_off: dict[str, set[int]] = {}
        """Per device, the numbers a sequence gap skipped (given up as lost) among the last
        :data:`RESEND_WINDOW` numbers of its current session: a frame that comes with one of them later is a
        late arrival, never applied as new (:meth:`_on_late`)."""
        self._holds: dict[str, AlarmCode] = {}
        self._ackable: dict[str, AlarmCode] = {}
        self._unknown_spots: dict[str, bool] = {}
        self._emits: list[Emit] = []
        self._ts = ""
        self._at = ""
        """When the frame being applied arrived: the input's time, or for a frame that waited behind the
        held round (:meth:`_resume`) its own, which the round record keeps (cards, spot changes, the lock)."""
        self._waiting: list[_Waiting] = []
        """Device frames waiting, in order, until the held round in play is resolved (:meth:`_waits`,
        :meth:`_resume`)."""
        self._waiting_nmb = False
        """A no-more-bets waits among :attr:`_waiting`: every later frame of the round waits behind it."""
        self._last_key: tuple[Any, ...] | None = None
        """What the round state last published was made of (:meth:`_state_key`)."""
        self._state: RoundState | None = None
        self._state_ts = ""
        """The time of the last input applied: :attr:`public_state`'s ``ts``."""
        self._hold_device: dict[str, str] = {}
        self._cmd: Command | None = None
        self._cmd_logged = False
        self._pending: RoundRecord | None = None
        self._alarm_n = 0
        self._scoreboard = Scoreboard() if config.game in _ROAD_GAMES else None
        self._pair_wagers = offered_pair_wagers(self._rules, config.wagers)
        self._advantage = AdvantageWatch(parse_threshold(config.integrity.advantage_threshold))
        self._advantage_alarms: dict[tuple[str, str | None], str] = {}
        self._answers: OrderedDict[str, CommandReply] = OrderedDict()
        """The first answer to each recent ``command_id`` (a repeat gets it again and changes nothing)."""
        self._alarm_keys: dict[tuple[Any, ...], str] = {}
        """One open alarm per (code, shoe, round, between rounds, device, seat, spot): repeats count."""
        self._alarm_counts: dict[str, int] = {}
        self._recent: dict[str, OrderedDict[int, object]] = {}
        """Per device, the last :data:`RESEND_WINDOW` frames applied (seq -> event, or the journal form
        of a rejected one), in the device's current session."""
        self._sessions: dict[str, str] = {}
        self._rescan_watch: dict[str, tuple[int, Card]] = {}
        """Shoe link lost mid-round: (round, the last card read before the loss)."""
        self._cleared = True
        """Since the last round completed the table was cleared (round-end button, a pad change) or the
        round had no wager: a card may start the next round (``[round] start = "card"``)."""
        self._activity_ts: str | None = None
        self._stall_alarm: str | None = None
        self._max_stake = _stake_bounds(config, self._rules)
        # the commission rule each Banker settlement's record names (standard baccarat, § 631a.13)
        self._commission = (commission_info(self._rules.commission, config.currency, config.minor_unit)
                            if getattr(self._rules, "takes_commission", False) else None)
        self._void_reason: str | None = None
        self._never_sends: dict[str, tuple[type, ...]] = {
            name: _SHOE_EVENTS if conf.role == "pads" else _PADS_EVENTS if conf.role == "shoe" else ()
            for name, conf in config.devices.items()}
        """Per configured device, the events its role never sends (:meth:`_wrong_device` decides)."""
        self._start_shoe(shoe)

    # ------------------------------------------------------------------------------------ public API

    def handle(self, inp: TimedInput) -> list[Emit]:
        """Apply one input and return what to publish, in order.

        A :class:`~daemon.table.inputs.Command` is applied as by :meth:`handle_command` (the reply is
        dropped).

        Raises:
            InputRejected: applying the input raised (a defect in tablesense, never bad input: a bad
                frame or command is an alarm or a refusal). The machine may be half-changed: rebuild it
                from the journal, then journal and apply the input as a
                :class:`~daemon.table.inputs.RejectedInput` (docs/state-machine.md, "Rejected inputs").
        """
        ev = inp.event
        if type(ev) in _DEVICE_EVENT_TYPES:  # most inputs: straight to them (the chain below is exact)
            self._emits = []
            self._ts = self._at = inp.ts
            try:
                self._on_device_event(ev)  # type: ignore[arg-type]
                if self._waiting:
                    self._resume()
            except Exception as exc:
                raise InputRejected(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
            return self._end()
        if isinstance(ev, Command):
            return self.handle_command(inp)[1]
        self._begin(inp.ts)
        try:
            if isinstance(ev, TableStart):
                self._publish_info()
            elif isinstance(ev, InstanceConflict):
                self._alarm(AlarmCode.DUPLICATE_INSTANCE,
                            (ev.detail or f"another tablesense instance {ev.other} for this table "
                             f"(client id {ev.client_id})")[:400])
            elif isinstance(ev, DeviceState):
                self._on_device_state(ev)
            elif isinstance(ev, RejectedInput):
                self._on_rejected(ev)
            elif isinstance(ev, Tick):
                self._on_tick()
            elif isinstance(ev, JournalOutage):
                self._alarm(AlarmCode.INTERNAL_ERROR, f"the journal could not be written from {ev.since[:40]}"
                            f" until now ({ev.failures} inputs not applied; devices resent their frames, "
                            f"commands were refused): {ev.error[:160]}", hold=False)
            else:
                self._on_device_event(ev)
            if self._waiting:
                self._resume()
        except Exception as exc:
            raise InputRejected(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
        return self._end()

    def handle_command(self, inp: TimedInput) -> tuple[CommandReply, list[Emit]]:
        """Validate and apply an operator command; return the reply and what to publish.

        A command with a ``command_id`` seen before (among the last :data:`MAX_REMEMBERED_COMMANDS`) gets
        the first answer again and changes nothing (it is not recorded twice). A command carrying a
        ``refusal`` (set by the daemon: expired, retained) is recorded and answered with it, not applied.
        Round-changing commands (:data:`ROUND_BOUND_COMMANDS`: ``void_round``, ``enter_card``,
        ``rescan``) name the round they target (``shoe`` and ``round`` args) and are refused for any other,
        naming the current one; ``new_shoe`` names the shoe it ends. Commands that change a round are
        refused once the round is settled; ``new_shoe`` is refused while a round is in play (void it
        first). Commands without a ``command_id`` (journals written before ids existed) are replayed as
        they were applied then, without the binding.

        Raises:
            InputRejected: as :meth:`handle`.
        """
        self._begin(inp.ts)
        cmd = inp.event
        if not isinstance(cmd, Command):
            return CommandReply(False, "not a command"), self._end()
        first = self._answers.get(cmd.command_id) if cmd.command_id else None
        if first is not None:
            self._answers.move_to_end(cmd.command_id)
            return first, self._end()
        try:
            record = self._rec()
            self._cmd = cmd
            self._cmd_logged = False
            reply = CommandReply(False, cmd.refusal) if cmd.refusal else self._command(cmd)
            if cmd.name == "new_shoe":
                record = self._rec()
            if not self._cmd_logged:
                self._keep(record.commands, self._command_record(cmd, reply))
            self._cmd = None
            if self._waiting:  # the command may have resolved the held round: what waited behind it follows
                self._resume()
            if cmd.command_id:
                self._answers[cmd.command_id] = reply
                while len(self._answers) > MAX_REMEMBERED_COMMANDS:
                    self._answers.popitem(last=False)
            return reply, self._end()
        except Exception as exc:
            raise InputRejected(f"{type(exc).__name__}: {str(exc)[:200]}") from exc

    def answer_for(self, command_id: str) -> CommandReply | None:
        """The first answer given to ``command_id``, if the machine still remembers it."""
        return self._answers.get(command_id) if command_id else None

    # ------------------------------------------------------------------------------------ intake queries

    def is_resend(self, ev: DeviceEvent) -> bool:
        """``ev`` repeats a frame this machine already applied (or rejected): same device, same number,
        same content, in the device's current session, among its last :data:`RESEND_WINDOW` frames. A
        device that restarted (a new session in its identity frame) has no old frames to resend, and a
        frame with a known number but different content is not a resend (docs/protocol.md §4)."""
        recent = self._recent.get(ev.device)
        known = recent.get(ev.seq) if recent is not None else None
        if known is None:
            return False
        if isinstance(known, str):  # a rejected frame, kept in the journal's form
            return known == msgspec.json.encode(ev).decode()
        return known == ev

    def last_seq(self, device: str) -> int | None:
        """The sequence number of the last frame applied from ``device`` (``None``: never heard)."""
        return self._dev_seq.get(device)

    def session(self, device: str) -> str | None:
        """The device session of ``device``'s latest identity frame (``None``: none seen)."""
        return self._sessions.get(device)

    def stall_due(self) -> str | None:
        """When the deal watchdog is due (ISO-8601 UTC): ``[round] stall_seconds`` after the last card
        (or the lock) of a round being dealt, once per quiet spell; ``None`` when off, not dealing, held
        or already raised. The app journals a :class:`~daemon.table.inputs.Tick` at that time."""
        seconds = self.config.round.stall_seconds
        if (not seconds or self._phase is not Phase.DEALING or self._holds or self._activity_ts is None
                or self._stall_alarm is not None):
            return None
        start = _parse_ts(self._activity_ts)
        if start is None:
            return None
        return _iso(start + timedelta(seconds=seconds))

    def _command_record(self, cmd: Command, reply: CommandReply) -> CommandRecord:
        args = {str(k)[:MAX_ARG_CHARS]: str(v)[:MAX_ARG_CHARS] for k, v in list(cmd.args.items())[:_MAX_ARGS]}
        return CommandRecord(ts=self._ts, name=str(cmd.name)[:64], args=args,
                             operator=str(cmd.operator)[:MAX_ARG_CHARS], ok=reply.ok, reason=reply.reason,
                             command_id=str(cmd.command_id)[:64])

    def seed_devices(self, seeds: Iterable[DeviceSeed]) -> None:
        """Set what the machine knows of its devices from before the replayed inputs (recovery: what
        :meth:`Journal.devices_before_replay <daemon.journal.store.Journal.devices_before_replay>` returns
        for the replay's start): each device's last sequence number (:meth:`last_seq`), its session
        (:meth:`session`), its link state, whether it was lost since its last frame, whether it reads cards
        (a device whose configured role is the bet pads never does), and its last frames, taken in order
        through the same bookkeeping :meth:`handle` applies to a device frame or a rejected one (the frames
        it may resend, :meth:`is_resend`; a new session in an identity frame forgets the frames before it).
        Nothing else: no alarm (the live machine raised and closed its DEVICE_LOST or DEVICE_RESTARTED
        long ago), no record, no emit, no round or shoe change. Pure: no I/O, no clock.

        Seeded so and fed the replay, the machine's device facts are those of the machine that applied
        every input (docs/journal.md, "Crash recovery", for the one exception)."""
        for seed in seeds:
            device = seed.device
            if seed.seq is not None:
                self._dev_seq[device] = seed.seq
            if seed.session is not None:
                self._sessions[device] = seed.session
            for ev in seed.frames:
                if isinstance(ev, RejectedInput):
                    self._note_rejected(ev)
                    continue
                if self._is_late(ev):  # as _on_device_event: remembered, its number not taken
                    self._remember(ev.device, ev.seq, ev)
                    self._written_off[ev.device].discard(ev.seq)
                    continue
                self._remember(ev.device, ev.seq, ev)  # as _on_device_event, without its alarms
                before = self._dev_seq.get(ev.device)
                self._dev_seq[ev.device] = ev.seq
                renewed = isinstance(ev, DeviceIdentity) and self._new_session(ev)
                self._write_off(ev.device, before, ev.seq, renewed)
                self._was_lost.pop(ev.device, None)
                if isinstance(ev, _CARD_EVENTS) or (isinstance(ev, ShoeStatus)
                                                    and ev.kind is ShoeStatusKind.BURN):
                    self._seed_card_reader(ev.device)
            if seed.link is not None:
                self._dev_state[device] = seed.link
            if seed.lost:
                self._was_lost[device] = True
            else:
                self._was_lost.pop(device, None)
            if seed.reads_cards:
                self._seed_card_reader(device)

    def _seed_card_reader(self, device: str) -> None:
        """``device`` sent a card or a burn frame: it reads cards, unless its configured role never sends
        them (then the frame was not applied: WRONG_DEVICE; :meth:`_on_card`, :meth:`_on_shoe_status`)."""
        if CardDrawn not in self._never_sends.get(device, ()):
            self._card_devices[device] = True

    def seed_pads(self, events: Sequence[SpotChanged]) -> None:
        """Set the bet-pad state from spot changes seen before the replayed inputs (recovery): no alarm,
        no record, no emit. Only the last state of each spot matters. Taken as :meth:`handle` took them:
        a change from a device whose configured role never sends one (WRONG_DEVICE) is not applied, and a
        spot not in the spot map is only remembered as unknown (its UNKNOWN_SPOT alarm was raised once,
        not again: ``snapshot()["unknown_spots"]``), and a stake above the wager's money bound is not
        applied (its WAGER_LIMIT alarm was raised then). The journal keeps only each spot's latest change:
        a spot whose latest change was refused is taken as not reported, not at the stake before it,
        until the pads report it again."""
        for ev in events:
            never = self._never_sends.get(ev.device)
            if never is not None and isinstance(ev, never):
                continue
            conf = self.config.spots.get(ev.spot)
            if conf is None:
                if ev.spot[:64] not in self._unknown_spots and len(self._unknown_spots) < _MAX_ACKABLE:
                    self._unknown_spots[ev.spot[:64]] = True
                continue
            bound = self._max_stake.get(conf.bet)
            if ev.amount is not None and bound is not None and ev.amount > bound:
                continue
            self._pads.update(ev)

    @property
    def public_state(self) -> RoundState:
        """The public round state (as last published on the ``round`` channel), stamped with the time of
        the last input applied."""
        state = self._state
        if state is None:
            return self._round_state()
        if state.ts != self._state_ts:  # unchanged since it was published but for the time
            state = self._state = msgspec.structs.replace(state, ts=self._state_ts)
        return state

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
            "alarms": sorted((k, v.value, self._alarm_counts.get(k, 1)) for k, v in self._ackable.items()),
            "sessions": dict(sorted(self._sessions.items())),
            "recent": {d: list(r) for d, r in sorted(self._recent.items())},
            "links": {d: state.value for d, state in sorted(self._dev_state.items())},
            "lost": sorted(self._was_lost),
            "card_devices": sorted(self._card_devices),
            "unknown_spots": sorted(self._unknown_spots),
            "suspect": self._suspect.index if self._suspect is not None else None,
            "aside": self._aside.index if self._aside is not None else None,
            "cleared": self._cleared,
            "activity": [self._activity_ts, self._stall_alarm],
            # only while a round-end button waits: a machine that never held one snapshots as before
            **({"round_end_at": self._end_at} if self._end_at is not None else {}),
            # only while device frames wait until the held round is resolved
            **({"waiting": [w.plain() for w in self._waiting]} if self._waiting else {}),
        }

    # ------------------------------------------------------------------------------------ emitting

    def _begin(self, ts: str) -> None:
        self._emits = []
        self._ts = self._at = ts

    def _end(self) -> list[Emit]:
        """The input's emits, and the public round state after it when anything of it but the time
        changed. What the state is made of is compared first (:meth:`_state_key`); the message is built
        only when it differs (most inputs change none of it: a chip placed, a spot locked)."""
        self._state_ts = self._ts
        key = self._state_key()
        if key != self._last_key:
            self._last_key = key
            state = self._state = self._round_state()
            self._emits.append(Emit(Channel.ROUND, state, retain=True, qos=1))
        out, self._emits = self._emits, []
        return out

    def _state_key(self) -> tuple[Any, ...]:
        """Every field of :meth:`_round_state` but ``ts`` (and the table and game, which never change),
        or what they are computed from: equal keys, equal states but for the time. (``held`` is
        ``hold_codes`` not empty; ``penetration`` is ``cards_remaining`` over the shoe's size, the same
        for every shoe of the table.)"""
        game, shoe, holds = self._game, self._shoe, self._holds
        return (shoe.number, self._round_no, self._phase, public_cards(game),
                tuple(sorted({c.value for c in holds.values()})) if holds else (), shoe.remaining,
                shoe.cut_card, shoe.last_round == self._round_no, self._record.void,
                game is not None and game.revealed)

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
               device: str | None = None, hold: bool | None = None, subject: object = None) -> str:
        """Raise ``code`` (holding the round per its spec, or ``hold``); returns the alarm id.

        Repeats are coalesced: while an alarm of the same code about the same round (or the same gap
        between rounds), device, seat, spot and ``subject`` (what else tells two apart) is open, a
        repeat only counts (its ``raised`` message
        goes out again at counts 2, 4, 8, ...; a repeat that holds makes the alarm hold), so a faulty
        device or a dealer who keeps dealing on a held round cannot pile up alarms. Open alarms are
        bounded: beyond :data:`_MAX_ACKABLE` the oldest that holds nothing is forgotten.
        """
        spec = ALARMS[code]
        holding = spec.holds if hold is None else hold
        key = (code, self._shoe.number, self._round_no, self._phase in _BETWEEN, device, seat, spot, subject)
        open_id = self._alarm_keys.get(key)
        if open_id is not None and open_id in self._ackable:
            count = self._alarm_counts.get(open_id, 1) + 1
            self._alarm_counts[open_id] = count
            newly_held = holding and open_id not in self._holds
            if newly_held:
                self._hold(open_id, code, device)
            if newly_held or count & (count - 1) == 0:  # a power of two: 2, 4, 8, ...
                self._publish_alarm(open_id, code, text, "raised", open_id in self._holds, seat, spot, device)
            return open_id
        self._alarm_n += 1
        alarm_id = f"{self._shoe.number}.{self._alarm_n}"
        self._alarm_keys[key] = alarm_id
        self._alarm_counts[alarm_id] = 1
        self._publish_alarm(alarm_id, code, text, "raised", holding, seat, spot, device)
        if holding:
            self._hold(alarm_id, code, device)
        self._ackable[alarm_id] = code
        while len(self._ackable) > _MAX_ACKABLE:
            oldest = next((k for k in self._ackable if k not in self._holds), None)
            if oldest is None:  # every open alarm holds: coalescing bounds them, never fail here
                break
            self._forget(oldest)
        return alarm_id

    def _hold(self, alarm_id: str, code: AlarmCode, device: str | None) -> None:
        self._holds[alarm_id] = code
        if device is not None:
            self._hold_device[alarm_id] = device

    def _forget(self, alarm_id: str) -> None:
        """Drop an alarm from the open ones (released, or evicted beyond the bound)."""
        self._ackable.pop(alarm_id, None)
        self._alarm_counts.pop(alarm_id, None)
        for key in [k for k, v in self._alarm_keys.items() if v == alarm_id]:
            del self._alarm_keys[key]

    def _keep(self, items: list[Any], item: Any) -> None:
        """Append to a round-record list, at most :data:`_MAX_RECORD_ITEMS` long."""
        if len(items) < _MAX_RECORD_ITEMS:
            items.append(item)

    def _publish_alarm(self, alarm_id: str, code: AlarmCode, text: str, state: str, held: bool,
                       seat: str | None = None, spot: str | None = None, device: str | None = None) -> None:
        spec = ALARMS[code]
        count = self._alarm_counts.get(alarm_id, 1)
        self._keep(self._rec().alarms, AlarmRecord(
            alarm_id=alarm_id, code=code.value, severity=spec.severity.value, text=text, state=state,
            held=held, ts=self._ts, seat=seat, spot=spot, device=device, count=count))
        self._emit(Channel.ALARMS, AlarmMessage(
            table=self.config.table, ts=self._ts, shoe=self._shoe.number, round=self._round_no,
            alarm_id=alarm_id, code=code.value, severity=spec.severity.value, text=text, state=state,
            held=held, seat=seat, spot=spot, device=device, count=count))

    def _release(self, alarm_id: str, state: str = "cleared") -> None:
        code = self._holds.pop(alarm_id, None) or self._ackable.get(alarm_id)
        self._hold_device.pop(alarm_id, None)
        if code is not None:
            self._publish_alarm(alarm_id, code, f"{code.value} {state}", state, False)
        self._forget(alarm_id)

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
            self._advantage_alarms[f.key] = self._alarm(AlarmCode.ADVANTAGE_PLAY, f.describe(), subject=f.key)

    def _start_shoe(self, number: int) -> None:
        self._advantage.reset()
        for alarm_id in self._advantage_alarms.values():
            self._release(alarm_id)
        self._advantage_alarms = {}
        self._shoe = ShoeTracker(self.config.shoe_decks, number, self.config.burn)
        if self._scoreboard is not None:
            self._scoreboard.reset(number)  # void rounds never reach it: see _finish
        self._alarm_n = 0  # alarm ids restart with each shoe, so a replay from the shoe's start numbers alike
        for alarm_id in [k for k in self._ackable if k not in self._holds]:
            self._forget(alarm_id)
        self._round_no = 0
        self._record = RoundRecord(number, 0)
        self._open_round()
        self._phase = Phase.BURN if self._shoe.burning else Phase.BETTING

    def _open_round(self) -> None:
        self._round_no += 1
        record = RoundRecord(self._shoe.number, self._round_no, opened_ts=self._at or None)
        if self._pending is not None:
            record.absorb(self._pending)
        self._pending = None
        self._record = record
        self._game: GameRound | None = None
        self._settled: dict[str, bool] = {}
        self._queue: list[CardEntry] = []
        self._changed: dict[str, bool] = {}
        self._limit_seen: dict[tuple[str, int], bool] = {}
        self._suspect: CardEntry | None = None
        """A possible re-scan waiting for the supervisor's ``rescan`` decision (later cards queue)."""
        self._aside: CardEntry | None = None
        """Where the deal stopped: a card set aside in the middle of it (``SEQUENCE_GAP``,
        ``CARD_NOT_IN_SHOE``) or the place of frames lost before the next card (a gap on a frame that is
        no card, the shoe's restart, a rejected card frame: :meth:`_deal_lost_place`). Where the deal
        stands is not known, so later cards queue, private, until the supervisor enters what is missing
        (``enter_card``) and acknowledges its alarm (``ack_alarm``), or voids the round
        (:meth:`_set_aside_mid_deal`)."""
        self._gap_unknown: list[CardEntry] = []
        """Unreadable cards set aside because they carried a sequence gap (counted out, value unknown):
        the first card a supervisor enters that is not a set-aside card read before is taken as one of
        them (:meth:`_enter_card`), so the shoe counts it once. Acknowledging its alarm without an entry
        drops it from here (:meth:`_ack`): it stays out, counted out with its value unknown."""
        self._end_at: int | None = None
        """The dealer's round-end button pressed while cards drawn before it waited (queued behind an
        unreadable card, a possible re-scan or the card the deal stops at): the index of the first card
        drawn after it. It takes effect in its place among the cards, once every card drawn before it
        is placed (:meth:`_reach_round_end`): blackjack's hits before it keep their places, a card
        after it is one the rules call for none."""
        self._aside_codes: dict[int, AlarmCode] = {}
        """The alarm code of each set-aside card waiting in the queue (by card index), to raise again
        when the deal reaches it (:meth:`_reach_aside`)."""
        self._rescan_watch = {}
        self._activity_ts = None
        self._stall_alarm = None
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
        self._record.locked_ts = self._at  # a no-more-bets that waited: when it was pressed
        self._activity_ts = self._ts
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
        if len(self._limit_seen) < _MAX_ACKABLE:
            self._limit_seen[(spot, stake)] = True
        self._alarm(AlarmCode.WAGER_LIMIT, f"seat {conf.seat} spot {spot}: {conf.bet} stake {stake} outside "
                    f"the table limits {limits.min}-{limits.max}", seat=conf.seat, spot=spot)

    def _finish(self) -> None:
        game = self._game
        self._phase = Phase.COMPLETE
        self._record.completed_ts = self._ts
        self._cleared = not self._record.wagers  # wagers on the layout: a card now is a mis-pull
        self._suspect = None
        self._aside = None
        self._end_at = None
        self._rescan_watch = {}
        self._activity_ts = None
        if self._stall_alarm is not None:
            self._release(self._stall_alarm)
            self._stall_alarm = None
        self._shoe.rounds_completed += 1
        if self._cmd is not None and not self._cmd_logged:  # the command that completes the round (a void,
            # an entry, an acknowledgement): in the record published now, not after it
            self._keep(self._record.commands, self._command_record(self._cmd, CommandReply(True)))
            self._cmd_logged = True
        out = public_outcome(game) if not self._record.void else public_outcome(None)
        results = RoundResults(
            table=self.config.table, ts=self._ts, shoe=self._shoe.number, round=self._round_no,
            game=self.config.game, void=self._record.void, baccarat=out.baccarat, boxes=out.boxes,
            dealer=out.dealer, board=out.board, void_reason=self._void_reason if self._record.void else None)
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
        hand = TERM[wager.hand] if wager.hand else None
        bet, outcome = TERM[wager.bet], TERM[s.outcome]
        rule = self._commission if bet == "banker" else None
        self._record.settlements.append(SettlementRecord(
            spot=wager.spot, seat=wager.seat, bet=bet, hand=hand, stake=wager.stake,
            outcome=outcome, category=s.category, odds=odds, net=s.net, commission=s.commission,
            changed_after_lock=changed, ts=self._ts, commission_rule=rule))
        self._emit(Channel.SETTLEMENTS, SettlementMessage(
            table=self.config.table, ts=self._ts, shoe=self._shoe.number, round=self._round_no,
            spot=wager.spot, seat=wager.seat, bet=bet, hand=hand, stake=wager.stake,
            outcome=outcome, category=s.category, odds=odds, net=s.net, commission=s.commission,
            commission_rule=rule))

    def _advance(self) -> None:
        """Place queued cards, settle what is due, complete the round: as far as holds allow."""
        game = self._game
        if game is None or self._phase not in _IN_PLAY:
            return
        while self._queue and game.unresolved() is None and self._suspect is None and self._aside is None:
            entry = self._queue.pop(0)
            if entry.status == "queued":
                self._place(entry, from_queue=True)
            else:  # a card set aside behind the cards before it: now the deal stops at it
                self._reach_aside(entry)
        if self._end_at is not None and self._end_due():
            self._reach_round_end()
        if game.initial_deal_done and self._phase is Phase.DEALING and not game.complete():
            self._phase = Phase.REVEAL if isinstance(game, UthRound) else Phase.PLAYING
        if game.unresolved() is not None or self._suspect is not None or self._aside is not None:
            return
        if self._holds:
            return
        for wager, s in game.due():
            if wager.spot not in self._settled:
                self._settle(wager, s)
        if game.complete():
            self._finish()

    def _void(self, reason: str, public_reason: str) -> None:
        """Void the round in play; ``reason`` goes into the alarm, ``public_reason`` (never naming an
        operator) into the round's public ``results``."""
        game = self._game
        self._record.void = True
        self._void_reason = public_reason
        self._release_all()
        if game is not None:
            for w in game.settled_wagers():
                if w.spot not in self._settled:
                    self._settle(w, settle_as(w.for_rules(False), WagerOutcome.VOID, "void_round"))
        self._alarm(AlarmCode.ROUND_VOID, f"round {self._round_no} voided: {reason}")
        self._finish()  # a void_round command is recorded in the voided round there

    # ------------------------------------------------------------------------------------ device events

    def _role(self, device: str) -> str:
        conf = self.config.devices.get(device)
        if conf is not None:
            return conf.role
        return "shoe" if device in self._card_devices else "pads"

    def _public_detail(self, device: str, detail: str) -> str:
        """A link state's ``detail`` as published on ``devices/{name}``, which signage may read: the
        device's address (its configured URL, the host and port or the host in it) replaced by
        ``<address>``, so a display's stolen password does not say where the shoe's serial server is
        (docs/security.md). The journal keeps the input's detail whole."""
        conf = self.config.devices.get(device)
        if conf is None or not conf.url:
            return detail
        url = conf.url
        out = detail.replace(url, ADDRESS)
        scheme, sep, rest = url.partition("://")
        if sep and scheme not in ("usb", "loop"):
            out = out.replace(rest, ADDRESS)  # "rfc2217 host:port @ 9600"
            host, _, port = rest.split("/", 1)[0].split("?", 1)[0].rpartition(":")
            host = host.strip("[]") if host else port
            if host:  # the host alone only as a whole word: a short name must not eat other words
                out = re.sub(rf"(?<![\w.-]){re.escape(host)}(?::{re.escape(port)})?(?![\w.-])", ADDRESS,
                             out.replace(f"{host}:{port}", ADDRESS))
        return out

    def _on_device_state(self, ev: DeviceState) -> None:
        previous = self._dev_state.get(ev.device)
        self._dev_state[ev.device] = ev.state
        self._emit(Channel.DEVICE, DeviceStatus(table=self.config.table, ts=self._ts, name=ev.device,
                                                state=ev.state.value,
                                                detail=self._public_detail(ev.device, ev.detail)[:200]),
                   device=ev.device, retain=True)
        lost = [a for a, c in self._holds.items() if c is AlarmCode.DEVICE_LOST]
        if ev.state is LinkState.DISCONNECTED:
            self._was_lost[ev.device] = True
        if ev.state is LinkState.DISCONNECTED and previous is not LinkState.DISCONNECTED:
            shoe_mid_round = self._role(ev.device) == "shoe" and self._phase in _IN_PLAY
            if shoe_mid_round and self._waiting_nmb:  # its last card may be one that waits: compare there
                self._keep_waiting(_Waiting(self._at, "watch", ev.device))
            elif shoe_mid_round:  # the reader may report its last card again after the reconnect
                self._watch_rescan(ev.device)
            self._alarm(AlarmCode.DEVICE_LOST, f"device {ev.device} disconnected"
                        + (": round held until it is back or voided" if shoe_mid_round else ""),
                        device=ev.device, hold=shoe_mid_round)
        elif ev.state is LinkState.ONLINE and previous is LinkState.DISCONNECTED:
            for alarm_id in lost:
                if self._hold_device.get(alarm_id) == ev.device:
                    self._release(alarm_id)
            self._advance()

    def _watch_rescan(self, device: str) -> None:
        """The shoe ``device`` lost its link or restarted mid-round: its first card after that is compared
        with the last card it read (POSSIBLE_RESCAN when equal, :meth:`_on_card`)."""
        last = next((e.card for e in reversed(self._record.cards)
                     if e.device == device and e.card is not None), None)
        if last is not None:
            self._rescan_watch[device] = (self._round_no, last)

    def _remember(self, device: str, seq: int, content: object) -> None:
        recent = self._recent.get(device)
        if recent is None:
            recent = self._recent[device] = OrderedDict()
        recent.pop(seq, None)
        recent[seq] = content
        while len(recent) > RESEND_WINDOW:
            recent.popitem(last=False)

    def _note_rejected(self, ev: RejectedInput) -> bool:
        """A rejected device frame counts as received: its number is the device's last and its journal
        form is remembered (a resend of it is recognised). ``True`` when ``ev`` was a device frame. The
        bookkeeping part of a ``RejectedInput``, shared with :meth:`seed_devices`."""
        if ev.device is None or ev.seq is None:
            return False
        self._write_off(ev.device, self._dev_seq.get(ev.device), ev.seq, False)
        self._dev_seq[ev.device] = ev.seq
        self._remember(ev.device, ev.seq, ev.payload)
        return True

    def _on_rejected(self, ev: RejectedInput) -> None:
        """An input whose application raised, journaled in its place: nothing of it is applied; the
        device frame counts as received (its resend is recognised, no gap follows)."""
        before = self._dev_seq.get(ev.device) if ev.device is not None else None
        where = ""
        if self._note_rejected(ev):
            where = f" from device {str(ev.device)[:64]} (sequence {ev.seq})"
            if self._waiting_nmb:  # a frame of the next coup: its place in the deal is there
                assert ev.device is not None
                self._keep_waiting(_Waiting(self._at, "rejected", ev.device, ev, last=before, seq=ev.seq))
                return
        self._rejected_alarm(ev, where)

    def _rejected_alarm(self, ev: RejectedInput, where: str) -> None:
        """The alarm part of :meth:`_on_rejected` (its bookkeeping is :meth:`_note_rejected`)."""
        error = ev.error.split(":", 1)[0][:60]  # the exception's type only: its text might name a card
        alarm_id = self._alarm(AlarmCode.INPUT_REJECTED, f"{ev.kind[:40]} input{where} rejected, not applied "
                               f"({error}); it is in the journal", device=ev.device)
        if ev.kind in _CARD_KINDS and ev.device is not None:  # a card of the deal, not placed
            self._deal_lost_place(ev.device, ev.seq, alarm_id)

    def _on_tick(self) -> None:
        """The deal watchdog (:meth:`stall_due`): DEAL_STALLED once per quiet spell of a deal."""
        due = self.stall_due()
        now, at = _parse_ts(self._ts), _parse_ts(due) if due is not None else None
        if now is None or at is None or now < at:
            return
        self._stall_alarm = self._alarm(
            AlarmCode.DEAL_STALLED,
            f"round {self._round_no}: no card for {self.config.round.stall_seconds} s while its cards are "
            "due")

    def _new_session(self, ev: DeviceIdentity) -> bool:
        """Record an identity frame's session; ``True`` when it announces a restart (a session different
        from the last one seen): the device's old frames are forgotten, the identity frame is its only
        one. The bookkeeping part of a restart (:meth:`_restarted` raises it), shared with
        :meth:`seed_devices`."""
        known = self._sessions.get(ev.device)
        self._sessions[ev.device] = ev.session
        if known is None or known == ev.session:
            return False
        self._recent.pop(ev.device, None)
        self._remember(ev.device, ev.seq, ev)
        return True

    def _restarted(self, ev: DeviceIdentity) -> None:
        """A device identity frame announced a restart (its bookkeeping, :meth:`_new_session`, is done):
        DEVICE_RESTARTED raised; for the shoe, mid-round, its next card is compared with its last one
        (a possible re-scan) and the deal stops where its unacknowledged frames may have been."""
        shoe = self._role(ev.device) == "shoe"
        if shoe and self._phase in _IN_PLAY:  # a restarted reader may report the card in its throat again
            self._watch_rescan(ev.device)
        check = ": check the cards out of the shoe" if shoe else ""
        alarm_id = self._alarm(AlarmCode.DEVICE_RESTARTED, f"device {ev.device} restarted (new session): "
                               f"frames it had not had acknowledged may be lost{check}",
                               device=ev.device, hold=shoe)
        if shoe:  # its unacknowledged frames may have been cards of this deal
            self._deal_lost_place(ev.device, ev.seq, alarm_id)

    def _is_late(self, ev: DeviceEvent) -> bool:
        """``ev`` carries a number a sequence gap of its device's current session skipped (written off as
        lost, :meth:`_write_off`): it comes late (an identity frame with a new session is a restart)."""
        if ev.seq not in self._written_off.get(ev.device, ()):
            return False
        return not (isinstance(ev, DeviceIdentity) and ev.session != self._sessions.get(ev.device))

    def _write_off(self, device: str, last: int | None, seq: int, renumbered: bool) -> None:
        """Track the numbers given up as lost (:attr:`_written_off`) once frame ``seq`` of ``device`` is
        taken after ``last``: the numbers a forward gap of at most :data:`RESEND_WINDOW` frames skipped
        (a device resends no more, docs/protocol.md §3) are added, numbers more than that window behind
        ``seq`` are dropped; a restart (``renumbered``) or a jump that is no such gap forgets them all."""
        step = 0 if last is None or renumbered else (seq - last) % SEQ_MODULUS
        if last is None or step == 0 or step > RESEND_WINDOW + 1:
            self._written_off.pop(device, None)
            return
        lost = self._written_off.get(device)
        if step > 1:
            if lost is None:
                lost = self._written_off[device] = set()
            lost.update((last + k) % SEQ_MODULUS for k in range(1, step))
        if lost:
            lost.difference_update([n for n in lost if (seq - n) % SEQ_MODULUS > RESEND_WINDOW])
        if lost is not None and not lost:
            self._written_off.pop(device, None)

    def _on_late(self, ev: DeviceEvent) -> None:
        """A frame whose number a sequence gap wrote off as lost came after all (a resend that missed the
        host's wait, docs/protocol.md §3): it is journaled as received, remembered (a further resend of it
        is dropped) and not applied: the device's last number does not go back, no card is taken from the
        inventory, nothing settles on it. A ``SEQUENCE_GAP`` that does not hold tells the supervisor (who
        enters the lost card, if it was one, from the journal's record of this frame)."""
        device, seq = ev.device, ev.seq
        self._remember(device, seq, ev)
        self._written_off[device].discard(seq)
        what = "a card frame" if isinstance(ev, _CARD_EVENTS) else "a frame"
        self._alarm(AlarmCode.SEQUENCE_GAP, f"device {device}: {what} numbered {seq} came late, after the "
                    f"frames behind it were taken with the gap; not applied (the device is at sequence "
                    f"{self._dev_seq.get(device)}; the frame is in the journal): if it carried the lost "
                    "card, enter it unless entered already", device=device, hold=False, subject=("late", seq))

    def _on_device_event(self, ev: DeviceEvent) -> None:
        """A device frame: its bookkeeping (the frames it may resend, its number, its session, a sequence
        gap) now, then the frame itself, now or, behind a no-more-bets the held round could not take yet,
        once that round is resolved (:meth:`_waits`). A frame numbered as one a gap wrote off comes late
        and is not applied (:meth:`_on_late`).

        After a disconnect, a frame numbered 0 or 1 between rounds is taken as a restart of a version 1
        device (no session; no gap) only when it cannot be the wrap 99999 -> 0: when it is more than
        :data:`RESEND_WINDOW` + 1 numbers after the last one (docs/protocol.md §4, §5)."""
        if self._is_late(ev):
            self._on_late(ev)
            return
        device, seq = ev.device, ev.seq
        self._remember(device, seq, ev)
        last = self._dev_seq.get(device)
        self._dev_seq[device] = seq
        restart = isinstance(ev, DeviceIdentity) and self._new_session(ev)
        if restart:
            self._was_lost.pop(device, None)
            last = None  # numbered afresh: no gap
        restarted = (self._was_lost.pop(device, False) and seq <= 1 and self._phase not in _IN_PLAY
                     and not self._sessions.get(device)  # a version 2 device announces a restart
                     and (last is None or (seq - last) % SEQ_MODULUS > RESEND_WINDOW + 1))  # no wrap
        gap = last is not None and seq != (last + 1) % SEQ_MODULUS and not restarted  # 99999 -> 0: no gap
        self._write_off(device, last, seq, restart or restarted)
        if not self._waits(ev, gap, last, restart):
            self._apply_frame(ev, gap, last, restart)

    def _apply_frame(self, ev: DeviceEvent, gap: bool, last: int | None, restart: bool) -> None:
        """Apply a device frame whose arrival was noted (:meth:`_on_device_event`): ``gap`` it carried a
        sequence gap after ``last``; ``restart`` it announced a device restart."""
        device, seq = ev.device, ev.seq
        if restart:
            assert isinstance(ev, DeviceIdentity)
            self._restarted(ev)
        if gap and not isinstance(ev, _CARD_EVENTS):  # frames of the shoe may have been cards: its gap
            hold = self._role(device) == "shoe"      # holds, between rounds too
            alarm_id = self._alarm(AlarmCode.SEQUENCE_GAP, f"device {device}: sequence {last} then {seq}",
                                   device=device, hold=hold)
            if hold:  # the lost frames may have been cards of this deal
                self._deal_lost_place(device, seq, alarm_id)
        never = self._never_sends.get(device)
        if never is not None and isinstance(ev, never) and self._wrong_device(ev):
            return
        if isinstance(ev, SpotChanged):  # the branches are exclusive: the commonest first
            self._on_spot(ev)
        elif isinstance(ev, CardDrawn):
            self._on_card(ev.card, device, seq, gap, last)
        elif isinstance(ev, CardUnreadable):
            self._on_card(None, device, seq, gap, last)
        elif isinstance(ev, DealerButton):
            self._on_button(ev.button)
        elif isinstance(ev, ShoeStatus):
            self._on_shoe_status(ev)
        elif isinstance(ev, DeviceError):
            self._alarm(AlarmCode.DEVICE_ERROR, f"device {ev.device} error {ev.code[:40]}: {ev.text[:160]}",
                        device=ev.device, subject=ev.code[:40])
        self._advance()
        self._check_exhausted(device)

    def _cards_wait(self, game: GameRound) -> bool:
        """Cards drawn (or the round-end button pressed) wait in the round in play for the supervisor:
        queued, a possible re-scan, where the deal stops, an unreadable card, a round-end in its place."""
        return bool(self._queue or self._aside is not None or self._suspect is not None
                    or self._end_at is not None or game.unresolved() is not None)

    def _round_waits(self) -> bool:
        """The round in play cannot end now: it is held, or cards (or its round-end) wait in it."""
        game = self._game
        if self._phase not in _IN_PLAY or game is None:
            return False
        return bool(self._holds) or self._cards_wait(game)

    def _round_over(self) -> bool:
        """The held round in play is over for the dealer: its round-end (reveal) button was pressed (it
        waits in its place, or applied and the round is held), or a baccarat coup has its last card."""
        game = self._game
        return (self._phase in _IN_PLAY and game is not None
                and (self._end_at is not None or game.complete()))

    def _waits(self, ev: DeviceEvent, gap: bool, last: int | None, restart: bool) -> bool:
        """True when ``ev`` waits (kept in :attr:`_waiting`, applied by :meth:`_resume`): the dealer's
        no-more-bets while the round in play is held, or cards (or its round-end) wait in it, and the
        round's cards are all out or some of them wait (else it applies now: ``UNEXPECTED_BUTTON`` mid-deal
        as always); and, behind such a no-more-bets, every later frame of a device but those that change
        nothing (a heartbeat, an identity or an error frame without a gap or a restart). The dealer, who
        does not see the hold, has closed the next coup's betting and deals it: its cards are not the held
        round's, and chips moved after the press are changes after the next round's lock (no wager made,
        increased or withdrawn after "no more bets": 58 Pa. Code § 631a.8(c)). They are all applied, in
        order, as they would have been had they come then, once the held round is resolved
        (docs/state-machine.md, "Holds").

        So does a chip moved once the held round is over for the dealer (:meth:`_round_over`: its
        round-end pressed, a baccarat coup's last card out), and every chip change after one that waits:
        paid, collected or placed for the next coup, it is a change after the round, which clears the
        table, not a past-post on it (if the round-end turns out not to apply when its turn comes, it is
        then one, raised in order).

        A new shoe never waits: it ends the wait first (:meth:`_end_wait_for_new_shoe`)."""
        if self._waiting and isinstance(ev, ShoeStatus) and ev.kind is ShoeStatusKind.NEW_SHOE:
            self._end_wait_for_new_shoe()
            return False
        if not self._waiting_nmb:
            never = self._never_sends.get(ev.device)
            if never is not None and isinstance(ev, never):
                return False  # not what it claims to be: WRONG_DEVICE now
            if isinstance(ev, SpotChanged):
                if not self._waiting and not (self._round_waits() and self._round_over()):
                    return False
                self._keep_waiting(_Waiting(self._at, "frame", ev.device, ev, gap, last, restart))
                return True
            if not (isinstance(ev, DealerButton) and ev.button is Button.NO_MORE_BETS):
                return False
            game = self._game
            if game is None or not self._round_waits():
                return False
            if not (game.initial_deal_done or self._cards_wait(game)):
                return False  # mid-deal with nothing waiting: it does not apply, held or not
            self._waiting_nmb = True
        elif isinstance(ev, _QUIET) and not gap and not restart:
            return False
        if isinstance(ev, _CARD_EVENTS) or (isinstance(ev, ShoeStatus) and ev.kind is ShoeStatusKind.BURN):
            self._seed_card_reader(ev.device)  # it reads cards (what _role knows meanwhile)
        self._keep_waiting(_Waiting(self._at, "frame", ev.device, ev, gap, last, restart))
        return True

    def _end_wait_for_new_shoe(self) -> None:
        """A new shoe is loaded while frames wait behind the held round: the held round is voided in its
        place (a new shoe mid-round voids the round in play, :meth:`_new_shoe`), what waited is applied in
        order (:meth:`_resume`; a round it opens and that is held again is voided in turn), and then the
        new shoe is applied by the caller. So the new shoe starts at the input that loaded it, never at a
        later command that resolved the held round: the journal replays a shoe from the input that
        started it (docs/journal.md), and the frames of the new shoe all come after that input."""
        for _ in range(len(self._waiting) + 1):  # each pass applies at least what waited up to a hold
            if not self._waiting:
                return
            if self._phase in _IN_PLAY:
                self._void("new shoe loaded mid-round", "new shoe mid-round")
            self._resume()

    def _keep_waiting(self, item: _Waiting) -> None:
        """Add ``item`` to :attr:`_waiting`; beyond :data:`_MAX_WAITING` a frame is left out and counted
        as lost: one ``lost`` item per device stands for all it left out (``last`` to ``seq``)."""
        if len(self._waiting) < _MAX_WAITING:
            self._waiting.append(item)
            return
        if item.kind == "watch":
            return
        seq = item.seq if item.event is None or item.kind == "rejected" else item.event.seq
        for w in self._waiting[_MAX_WAITING:]:
            if w.kind == "lost" and w.device == item.device:
                w.seq = seq
                return
        self._waiting.append(_Waiting(item.ts, "lost", item.device, last=item.last, seq=seq))

    def _resume(self) -> None:
        """Once the held round is resolved (complete, voided, or in play with nothing holding it or waiting
        in it), apply what waited (:meth:`_waits`), in order, each as it would have been applied had it
        come then (the round record keeps each frame's own time): chips moved after the round are changes
        between rounds; the no-more-bets ends the round (or, its cards not all out, is
        ``UNEXPECTED_BUTTON``), opens and locks the next one with the bet pads as they were when it was
        pressed; the cards drawn after it are dealt into that round. What comes while that round is held
        waits again by the same rules."""
        while self._waiting and not self._round_waits():
            items, self._waiting, self._waiting_nmb = self._waiting, [], False
            for item in items:
                self._at = item.ts
                try:
                    self._apply_waiting(item)
                finally:
                    self._at = self._ts

    def _apply_waiting(self, item: _Waiting) -> None:
        """Apply one item that waited (:meth:`_resume`), unless it must wait again."""
        if item.kind == "frame":
            ev = item.event
            if not self._waits(ev, item.gap, item.last, item.restart):
                self._apply_frame(ev, item.gap, item.last, item.restart)
            return
        if self._waiting_nmb:  # behind a no-more-bets that waits again
            self._keep_waiting(item)
        elif item.kind == "watch":
            if self._role(item.device) == "shoe" and self._phase in _IN_PLAY:
                self._watch_rescan(item.device)
        elif item.kind == "rejected":
            ev = item.event
            self._rejected_alarm(ev, f" from device {str(ev.device)[:64]} (sequence {ev.seq})")
        else:  # "lost": frames left out beyond the bound
            hold = self._role(item.device) == "shoe"
            text = (f"device {item.device}: sequence {item.last} then {item.seq}: the frames between were "
                    f"not applied (more than {_MAX_WAITING} waited behind the held round)")
            alarm_id = self._alarm(AlarmCode.SEQUENCE_GAP, text, device=item.device, hold=hold)
            if hold:
                self._deal_lost_place(item.device, item.seq, alarm_id)
            self._advance()

    def _wrong_device(self, ev: DeviceEvent) -> bool:
        """True (WRONG_DEVICE raised, the round held, nothing of ``ev`` applied) when ``ev`` is an event
        the configured role of its device never sends (docs/protocol.md §3): a card or shoe event from
        the pads, a spot or dealer button from the shoe. A device the config does not name is not
        checked (its role is not known)."""
        conf = self.config.devices.get(ev.device)
        if conf is None:
            return False
        if conf.role == "pads" and isinstance(ev, _SHOE_EVENTS):
            sender = "only the shoe sends"
        elif conf.role == "shoe" and isinstance(ev, _PADS_EVENTS):
            sender = "only the bet pads send"
        else:
            return False
        name = type(ev).__name__
        self._alarm(AlarmCode.WRONG_DEVICE, f"device {ev.device} ({conf.role}) sent {name} (sequence "
                    f"{ev.seq}), which {sender}: not applied", device=ev.device, subject=name)
        return True

    def _check_exhausted(self, device: str | None) -> None:
        """The shoe's inventory reached zero: the shoe ends with the round (or at once between rounds);
        a round being dealt that still needs cards raises SHOE_EXHAUSTED now, not at a card too many."""
        if self._shoe.remaining > 0 or self._shoe.empty:
            return
        self._shoe.empty = True
        if self._phase in (Phase.BETTING, Phase.BURN, Phase.COMPLETE):
            self._phase = Phase.SHOE_END
        elif (self._phase is Phase.DEALING and self._game is not None
              and (self._game.next_position() is not None or self._queue or self._suspect is not None
                   or self._aside is not None)):
            self._alarm(AlarmCode.SHOE_EXHAUSTED, f"the shoe's last card is out and round {self._round_no} "
                        "needs more", device=device)

    def _on_card(self, card: Card | None, device: str, seq: int, gap: bool, last: int | None) -> None:
        self._card_devices[device] = True
        if self._phase is Phase.BURN:
            self._burn(card, device, seq)
            if gap:
                self._alarm(AlarmCode.SEQUENCE_GAP, f"device {device}: sequence {last} then {seq} during the "
                            "burn", device=device)
            return
        if (self._phase is Phase.COMPLETE and self.config.round.start == "card" and not gap
                and self._cleared):
            self._open_round()
        if self._phase is Phase.BETTING:
            self._lock()
        if self._phase in _IN_PLAY:
            self._activity_ts = self._ts
            if self._stall_alarm is not None:
                self._release(self._stall_alarm)
                self._stall_alarm = None
        watched = self._rescan_watch.pop(device, None)
        record = self._rec()
        entry = record.new_card(card, self._at, device, seq)
        if (watched is not None and watched == (self._round_no, card) and not gap
                and self._phase in _IN_PLAY and self._suspect is None):
            entry.status = "possible_rescan"  # not taken from the shoe until a supervisor keeps it
            self._suspect = entry
            entry.alarm_id = self._alarm(
                AlarmCode.POSSIBLE_RESCAN,
                f"round {self._round_no}: after {device} lost its link or restarted, the first card is the "
                "card read last before: keep it or set it aside (rescan)",
                device=device)
            return
        code = self._shoe.take(card) if card is not None else self._shoe.take_unknown()
        entry.taken = code is None
        if code is not None:
            if gap:  # the frames before it were lost too: named, and the deal stops there first
                gap_id = self._alarm(AlarmCode.SEQUENCE_GAP, f"device {device}: sequence {last} then {seq}",
                                     device=device)
                self._deal_lost_place(device, seq, gap_id, index=entry.index)
            self._set_aside(entry, code, f"a card the {self._shoe.composition.decks}-deck shoe cannot hold"
                            if code is AlarmCode.CARD_NOT_IN_SHOE else "more cards than the shoe holds")
            self._set_aside_mid_deal(entry)
        elif gap:
            self._set_aside(entry, AlarmCode.SEQUENCE_GAP, f"device {device}: sequence {last} then {seq}; "
                            "the card joins no hand")
            if card is None and self._phase in _IN_PLAY:
                self._gap_unknown.append(entry)
            self._set_aside_mid_deal(entry)
        elif self._phase in _BETWEEN:
            cleared = ("" if self._cleared or self._phase is Phase.SHOE_END
                       else ", before the table was cleared")
            self._set_aside(entry, AlarmCode.EXTRA_CARD, f"a card after round {self._round_no} was complete"
                            + cleared)
        else:
            self._place(entry)
        if entry.status == "set_aside" and len(record.cards) > _MAX_RECORD_ITEMS:
            record.cards.remove(entry)  # counted by its alarm; the journal keeps the frame

    def _set_aside(self, entry: CardEntry, code: AlarmCode, text: str) -> None:
        entry.status = "set_aside"
        entry.alarm_id = self._alarm(code, text, device=entry.device)

    def _set_aside_mid_deal(self, entry: CardEntry) -> None:
        """``entry`` (just set aside: a card carrying a sequence gap, or one the shoe cannot hold; or the
        place of lost frames, :meth:`_deal_lost_place`) came in the middle of a deal: the cards after
        it must not take the places of a card the shoe lost or of a misread card, where a face-down
        card would be published face up (blackjack's hole card in the up card's place) or hands settled
        that were never dealt. Later cards queue (private) until the supervisor enters the missing
        card(s) with ``enter_card`` (they take their places first) and acknowledges the alarm, which
        deals the queued cards on; or voids the round. Cards are placed in the order they left the shoe
        (docs/state-machine.md, "Holds").

        Only in the initial deal (``dealing``): a blackjack card after it (a hit, never public, settling
        nothing) or a card when none is due (the UTH reveal) has no place a lost card could take.

        The deal stops at the set-aside card only once every card that left the shoe before it is placed:
        behind an unreadable card, a possible re-scan or cards queued behind another set-aside card, it
        waits in the queue, in its place among them (:meth:`_reach_aside`), so the cards the supervisor
        enters for it go after the cards that came before it. One that follows the card the deal stops at
        (or another one waiting) with no card between, under the same alarm, adds nothing: the supervisor
        enters the missing cards of both in order before acknowledging."""
        alarm_id = entry.alarm_id
        if self._phase is not Phase.DEALING or alarm_id is None:
            return
        at = self._queue_at(entry)
        if self._aside is None and self._suspect is None and at == 0:
            self._aside = entry
            return
        run: set[str | None] = set()
        i = at
        while i > 0 and self._queue[i - 1].status != "queued":
            run.add(self._queue[i - 1].alarm_id)
            i -= 1
        if i == 0 and self._aside is not None:
            run.add(self._aside.alarm_id)
        if alarm_id in run:
            return
        code = self._ackable.get(alarm_id)
        if code is not None:
            self._aside_codes[entry.index] = code
        self._queue.insert(at, entry)

    def _deal_lost_place(self, device: str, seq: int | None, alarm_id: str, index: int | None = None
                         ) -> None:
        """Frames of the shoe that may have been cards of the deal in progress are gone (a gap carried by
        a frame that is no card or by a card the shoe cannot hold, the shoe's restart, a card frame
        rejected), raised as ``alarm_id``: the deal stops here as at a card set aside
        (:meth:`_set_aside_mid_deal`), so the next card does not take a lost card's place. ``index``: the
        card index the lost frames come before (default: the next card's). Nothing outside the initial
        deal."""
        if self._phase is Phase.DEALING:
            at = self._record.next_index if index is None else index
            self._set_aside_mid_deal(CardEntry(at, None, self._at, device, seq, status="gap",
                                               alarm_id=alarm_id))

    def _reach_aside(self, entry: CardEntry) -> None:
        """The deal reached a card set aside behind earlier cards (:meth:`_set_aside_mid_deal`): the cards
        after it wait for the supervisor from here. Its alarm, acknowledged meanwhile (or one alarm for it
        and an earlier set-aside card, acknowledged for that one), is raised again: acknowledged before
        the cards before it were placed, the missing cards could not have been entered in their place."""
        self._aside = entry
        code = self._aside_codes.pop(entry.index, None)
        old = entry.alarm_id
        if old in self._holds:
            return
        entry.alarm_id = self._alarm(
            code or AlarmCode.SEQUENCE_GAP,
            f"round {self._round_no}: the cards before set-aside card {entry.index} are placed; enter what "
            "is missing before it (enter_card), then acknowledge this alarm to deal on", device=entry.device)
        # the set-aside cards that followed it with no card between (one alarm for them) go with it
        limit = next((e.index for e in self._queue if e.status == "queued"), None)
        for e in self._record.cards:
            if (e.alarm_id == old and e.status in ("set_aside", "re_entered") and e.index >= entry.index
                    and (limit is None or e.index < limit)):
                e.alarm_id = entry.alarm_id

    def _queue_at(self, entry: CardEntry) -> int:
        """Where ``entry`` goes in the queue: after every queued card that left the shoe before it."""
        at = len(self._queue)
        while at > 0 and self._queue[at - 1].index > entry.index:
            at -= 1
        return at

    def _end_due(self) -> bool:
        """The held round-end button's turn has come (:attr:`_end_at`): no card drawn before it waits
        (queued, a possible re-scan, or the card or lost frames the deal stops at). Lost frames noted
        just before the button and just after it carry the same index (the next card's): they count as
        before it, and the supervisor resolves them first."""
        end = self._end_at
        if end is None:
            return False
        waiting = [*self._queue, *(e for e in (self._aside, self._suspect) if e is not None)]
        return all(e.index > end if e.status == "gap" else e.index >= end for e in waiting)

    def _reach_round_end(self) -> None:
        """The dealer's round-end button, held while cards drawn before it waited, takes effect now that
        they are placed: as :meth:`_on_button` would have applied it then (the round ends, or, the
        rules' cards not all dealt yet, ``UNEXPECTED_BUTTON`` and the round goes on)."""
        game = self._game
        assert game is not None
        self._end_at = None
        if game.initial_deal_done and self._phase is Phase.DEALING:
            self._phase = Phase.REVEAL if isinstance(game, UthRound) else Phase.PLAYING
        if not game.on_round_end():
            self._alarm(AlarmCode.UNEXPECTED_BUTTON, f"round_end in phase {self._phase.value} with cards "
                        "still due (pressed while the deal was held)")

    def _place(self, entry: CardEntry, from_queue: bool = False) -> None:
        game = self._game
        assert game is not None
        entered_past = entry.status == "entered" and self._aside is not None  # before the queued cards
        if not entered_past and (game.unresolved() is not None or self._suspect is not None
                                 or self._aside is not None or (self._queue and not from_queue)):
            entry.status = "queued"
            self._queue.insert(self._queue_at(entry), entry)  # in the order the cards left the shoe
            return
        if self._end_at is not None and entry.index >= self._end_at and entry.status != "entered":
            self._reach_round_end()  # a card drawn after the dealer's round-end button
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
        entry = self._rec().new_burn(card, self._at, device, seq, face_up=face_up and card is not None)
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
                            device=ev.device, subject=ev.spot[:64])
            return
        bound = self._max_stake.get(conf.bet)
        if ev.amount is not None and bound is not None and ev.amount > bound:
            self._alarm(AlarmCode.WAGER_LIMIT, f"seat {conf.seat} spot {ev.spot}: a sensed {conf.bet} stake "
                        f"of {ev.amount} is above the largest stake {bound} (2**53 - 1 minor units at the "
                        "wager's largest odds): the change is ignored", seat=conf.seat, spot=ev.spot,
                        device=ev.device)
            return
        before, after = self._pads.update(ev)
        phase = self._phase
        differs = before.key != after.key
        changed = differs and phase in _IN_PLAY
        if differs and phase is Phase.COMPLETE:
            self._cleared = True  # chips paid, collected or placed: the completed round was cleared
        self._keep(self._rec().spot_changes, SpotChangeRecord(
            ts=self._at, device=ev.device, device_seq=ev.seq, spot=ev.spot, state=_SPOT_STATE[ev.state],
            amount=ev.amount, after_lock=changed))
        if changed:
            self._changed[ev.spot] = True
            presence = after.amount is None and before.amount is None
            code = AlarmCode.PRESENCE_CHANGED_AFTER_LOCK if presence else AlarmCode.PAST_POSTING
            what = ("presence changed" if presence
                    else f"changed from {_bet_text(before)} to {_bet_text(after)}")
            self._alarm(code, f"seat {conf.seat} spot {ev.spot} ({conf.bet}) {what} after the wagers were "
                        "locked; settled at the locked value", seat=conf.seat, spot=ev.spot, device=ev.device)
        elif (phase is Phase.BETTING or phase is Phase.BURN) and after.present and after.amount is not None:
            self._check_limits(ev.spot, after.amount)

    def _on_button(self, button: Button) -> None:
        phase = self._phase
        if button is Button.VOID_ROUND:
            if phase in _IN_PLAY:
                self._void("void button", "void button")
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
            if phase in _IN_PLAY and game is not None and game.ends_by_button and (
                    self._end_at is not None or self._queue or self._aside is not None
                    or self._suspect is not None):
                if self._end_at is None:  # after every card out so far: it takes effect in its place
                    self._end_at = self._record.next_index
                return
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
                entry = self._record.new_card(ev.card, self._at, ev.device, ev.seq)
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
                self._alarm(AlarmCode.SHOE_EXHAUSTED, "the shoe reported empty mid-round", device=ev.device)
            elif self._phase in (Phase.BETTING, Phase.BURN, Phase.COMPLETE):
                self._phase = Phase.SHOE_END
        elif kind is ShoeStatusKind.LID_OPEN and self._phase in _IN_PLAY:
            self._alarm(AlarmCode.LID_OPEN, "the shoe's lid was opened mid-round", device=ev.device)

    def _new_shoe(self, reason: str) -> None:
        if self._phase in _IN_PLAY:
            self._void(f"{reason} mid-round", "new shoe mid-round")
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
        binding = self._binding_refusal(cmd)
        if binding:
            return CommandReply(False, binding)
        if cmd.name == "void_round":
            refusal = self._round_refusal()
            if refusal:
                return CommandReply(False, refusal)
            given = str(cmd.args.get("reason") or "").strip()
            self._void(f"by {cmd.operator}" + (f": {given}" if given else ""),
                       given[:200] or "voided by the floor")
            return CommandReply(True)
        if cmd.name == "enter_card":
            return self._enter_card(cmd)
        if cmd.name == "rescan":
            return self._rescan(cmd)
        if cmd.name == "new_shoe":
            if self._phase in _IN_PLAY:
                return CommandReply(False, f"round {self._round_no} is in play: void it first")
            self._new_shoe(f"new shoe by {cmd.operator}")
            return CommandReply(True)
        return self._ack(cmd)

    def _binding_refusal(self, cmd: Command) -> str:
        """Why a command with a ``command_id`` does not target the current round (or shoe), else ``""``.
        Commands without an id come from journals older than command ids: replayed unbound."""
        if not cmd.command_id:
            return ""
        current = f"{self._shoe.number}-{self._round_no}"
        if cmd.name in ROUND_BOUND_COMMANDS:
            shoe, rnd = _arg_number(cmd.args.get("shoe")), _arg_number(cmd.args.get("round"))
            if shoe is None or rnd is None:
                return f"{cmd.name} must name its round (args shoe and round); the current round is {current}"
            if (shoe, rnd) != (self._shoe.number, self._round_no):
                return f"{cmd.name} names round {shoe}-{rnd}, but the current round is {current}: refused"
        elif cmd.name in SHOE_BOUND_COMMANDS:
            shoe = _arg_number(cmd.args.get("shoe"))
            if shoe is None:
                return (f"{cmd.name} must name the shoe it ends (arg shoe); "
                        f"the current shoe is {self._shoe.number}")
            if shoe != self._shoe.number:
                return f"{cmd.name} names shoe {shoe}, but the current shoe is {self._shoe.number}: refused"
        return ""

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
        if not any(code.value in _HOLD_CARD_CODES for code in self._holds.values()):
            return CommandReply(False, "no unreadable card or gap waiting for a card")
        if self._suspect is not None:
            return CommandReply(False, "a possible re-scan waits for the rescan decision first")
        if (self._queue and self._aside is None) or game.next_position() is None:
            return CommandReply(False, "the rules call for no card now")
        aside = next((e for e in self._record.cards
                      if e.status == "set_aside" and e.card == card and e.taken), None)
        if aside is None:
            unknown = self._gap_unknown[0] if self._gap_unknown else None
            code = self._shoe.resolve_unknown(card) if unknown is not None else self._shoe.take(card)
            if code is not None:
                return CommandReply(False, f"{card} cannot be in the shoe any more")
            if unknown is not None:  # counted out when it left the shoe unread
                self._gap_unknown.pop(0).status = "re_entered"
        else:
            aside.status = "re_entered"
        entry = self._record.new_card(card, self._ts, None, None)
        entry.status, entry.taken = "entered", True
        self._place(entry)
        self._advance()
        return CommandReply(True)

    def _rescan(self, cmd: Command) -> CommandReply:
        """The supervisor's decision on a POSSIBLE_RESCAN card: ``keep`` (a real second copy: it takes
        its place in the deal) or ``set_aside`` (the reader reported the same card twice: it joins no
        hand and stays in the shoe's count once)."""
        action = str(cmd.args.get("action", ""))
        if action not in _RESCAN_ACTIONS:
            return CommandReply(False, f"action must be keep or set_aside, got {action[:40]!r}")
        entry = self._suspect
        if entry is None or self._phase not in _IN_PLAY:
            return CommandReply(False, "no possible re-scan waiting for a decision")
        self._suspect = None
        if entry.alarm_id is not None:
            self._release(entry.alarm_id, "acknowledged")
        if action == "set_aside":
            entry.status = "set_aside"
        else:
            assert entry.card is not None
            code = self._shoe.take(entry.card)
            entry.taken = code is None
            if code is not None:
                decks = self._shoe.composition.decks
                self._set_aside(entry, code, f"a card the {decks}-deck shoe cannot hold")
                self._set_aside_mid_deal(entry)
            else:
                entry.status = "dealt"
                self._place(entry)  # after any card queued before it (behind an unreadable card)
        self._advance()
        self._check_exhausted(entry.device)
        return CommandReply(True)

    def _ack(self, cmd: Command) -> CommandReply:
        alarm_id = str(cmd.args.get("alarm_id", cmd.args.get("alarm", "")))
        code = self._ackable.get(alarm_id)
        if code is None:
            return CommandReply(False, f"no alarm {alarm_id[:64]!r} awaiting acknowledgement")
        if alarm_id in self._holds and not ALARMS[code].ack_releases:
            by = "rescan" if code is AlarmCode.POSSIBLE_RESCAN else "enter_card"
            return CommandReply(False, f"alarm {alarm_id} ({code.value}) is released by {by} or void_round")
        self._release(alarm_id, "acknowledged")
        if self._aside is not None and self._aside.alarm_id == alarm_id:
            self._aside = None  # the supervisor has entered what was missing: the queued cards follow
        # an unreadable card that carried the gap and was not entered stays out, counted out as unknown:
        # no later entry is taken as it (one still waiting in the queue is raised again when reached)
        self._gap_unknown = [e for e in self._gap_unknown
                             if e.alarm_id != alarm_id or any(e is q for q in self._queue)]
        self._advance()
        return CommandReply(True)


def _arg_number(text: str | None) -> int | None:
    """A positive decimal number argument (``"17"``), else ``None``."""
    if text is None or not text.isascii() or not text.isdecimal() or len(text) > 16:
        return None
    value = int(text)
    return value if value >= 1 else None


def replay(config: TableConfig, inputs: Sequence[TimedInput], *,
           shoe: int = 1) -> tuple[TableMachine, list[Emit]]:
    """Feed ``inputs`` into a fresh machine; return it and every emit (crash recovery, tests)."""
    machine = TableMachine(config, shoe=shoe)
    emits: list[Emit] = []
    for inp in inputs:
        emits += machine.handle(inp)
    return machine, emits
