"""Determinism and robustness of the state machine: replays give identical emits; random event
sequences never raise and keep the invariants (one settlement per wager, the information barrier)."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machine_support import PADS, SHOE, Driver, baccarat_config, blackjack_config, encode_all, uth_config

from tablesense.daemon.config import TableConfig
from tablesense.daemon.messages import FloorRound, RoundState, SettlementMessage
from tablesense.daemon.rules.cards import ALL_CARDS
from tablesense.daemon.table import Channel, Command, Emit, TableMachine, TimedInput, replay
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    CardUnreadable,
    DealerButton,
    DeviceError,
    DeviceState,
    Heartbeat,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)


def _scripted(d: Driver) -> None:
    """A busy baccarat shoe: burn, bets, pairs, an unreadable card, a past-post, a gap, void, cut card."""
    d.status(ShoeStatusKind.NEW_SHOE)
    d.cards("3H 2C 2D 2S")
    d.bet("1P", 1000)
    d.bet("1PP", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C")
    d.unreadable()
    d.card("3C")
    d.command("enter_card", card="5D")
    d.bet("1P", 9000)
    d.card("9S")
    d.bet("1B", 1000)
    d.cards("9H 3D", )
    d.card("KS", skip=1)
    d.command("void_round", reason="sequence gap")
    d.status(ShoeStatusKind.CUT_CARD)
    d.cards("4C 4D KC KD")
    d.cards("8C 8D QC QD")
    d.status(ShoeStatusKind.NEW_SHOE)
    d.cards("KH " + " ".join(["2H"] * 10))
    d.cards("7C 7D QS QH 2S")


def test_replaying_the_same_inputs_gives_the_same_emits_and_state() -> None:
    cfg = baccarat_config(burn='mode = "face_value"')
    d = Driver(cfg)
    _scripted(d)
    assert len(d.floor()) >= 3 and d.results()[0].void is False
    machine, emits = replay(cfg, d.inputs)
    assert encode_all(emits) == encode_all(d.emits)
    assert machine.snapshot() == d.machine.snapshot()
    again = TableMachine(cfg)
    second = [e for inp in d.inputs for e in again.handle(inp)]
    assert encode_all(second) == encode_all(d.emits)


def test_recovery_replays_from_the_input_that_started_the_shoe() -> None:
    cfg = baccarat_config(burn='mode = "face_value"')
    d = Driver(cfg)
    _scripted(d)
    shoe = d.machine.snapshot()["shoe"]
    start = max(i for i, inp in enumerate(d.inputs)
                if isinstance(inp.event, ShoeStatus) and inp.event.kind is ShoeStatusKind.NEW_SHOE)
    machine = TableMachine(cfg, shoe=shoe)
    machine.seed_pads([i.event for i in d.inputs[:start] if isinstance(i.event, SpotChanged)])
    emits = [e for i, inp in enumerate(d.inputs[start:]) for e in machine.handle(inp) if i > 0]
    mine, theirs = machine.snapshot(), d.machine.snapshot()
    for key in ("phase", "shoe", "round", "remaining", "counts", "slots", "settled", "public", "record"):
        assert mine[key] == theirs[key], key
    # The same settlements, results, floor records and alarm ids as the original after that input (the
    # new-shoe input itself also clears the old shoe's alarms in the original).
    original = TableMachine(cfg)
    after = [e for i, inp in enumerate(d.inputs) for e in original.handle(inp) if i > start]
    keep = (Channel.SETTLEMENTS, Channel.RESULTS, Channel.FLOOR_ROUNDS, Channel.ALARMS)
    mine_out = encode_all(e for e in emits if e.channel in keep)
    assert mine_out == encode_all(e for e in after if e.channel in keep)
    assert any(e.channel is Channel.SETTLEMENTS for e in emits)


# ------------------------------------------------------------------------------------ random sequences

_CARDS = st.sampled_from(ALL_CARDS)
_SPOTS = st.sampled_from(["1P", "1B", "1T", "1PP", "1BP", "1HM", "2P", "2PP", "B1", "PP1", "B2", "PP2", "B3",
                          "PP3", "A1", "U1", "A2", "U2", "A3", "U3", "??"])


@st.composite
def _event(draw: st.DrawFn) -> Any:
    kind = draw(st.integers(0, 99))
    if kind < 45:
        return ("card", draw(_CARDS))
    if kind < 50:
        return ("unreadable",)
    if kind < 65:
        return ("spot", draw(_SPOTS), draw(st.sampled_from(list(SpotState))),
                draw(st.one_of(st.none(), st.integers(0, 20000))))
    if kind < 75:
        return ("button", draw(st.sampled_from(list(Button))))
    if kind < 80:
        return ("status", draw(st.sampled_from(list(ShoeStatusKind))), draw(st.one_of(st.none(), _CARDS)))
    if kind < 85:
        return ("link", draw(st.sampled_from([SHOE, PADS])), draw(st.sampled_from(list(LinkState))))
    if kind < 87:
        return ("gap", draw(st.sampled_from([SHOE, PADS])))
    if kind < 89:
        return ("noise",)
    name = draw(st.sampled_from(["void_round", "enter_card", "new_shoe", "ack_alarm", "bogus"]))
    args = {"card": str(draw(_CARDS)), "alarm": f"{draw(st.integers(1, 2))}.{draw(st.integers(1, 6))}"}
    return ("command", name, args)


def _inputs(events: list[Any]) -> list[TimedInput]:
    seq = {SHOE: 0, PADS: 0}

    def nxt(dev: str) -> int:
        seq[dev] += 1
        return seq[dev]

    out: list[TimedInput] = []
    for i, e in enumerate(events):
        ts = f"2026-11-29T12:{i // 60 % 60:02d}:{i % 60:02d}Z"
        if e[0] == "card":
            ev: Any = CardDrawn(SHOE, nxt(SHOE), e[1])
        elif e[0] == "unreadable":
            ev = CardUnreadable(SHOE, nxt(SHOE))
        elif e[0] == "spot":
            ev = SpotChanged(PADS, nxt(PADS), e[1], e[2], e[3])
        elif e[0] == "button":
            ev = DealerButton(PADS, nxt(PADS), e[1])
        elif e[0] == "status":
            ev = ShoeStatus(SHOE, nxt(SHOE), e[1], e[2])
        elif e[0] == "link":
            ev = DeviceState(e[1], e[2], "test")
        elif e[0] == "gap":
            seq[e[1]] += 3
            ev = Heartbeat(e[1], nxt(e[1]))
        elif e[0] == "noise":
            ev = DeviceError(SHOE, nxt(SHOE), "E7", "jam")
        else:
            ev = Command(e[1], e[2], "fuzz")
        out.append(TimedInput(ts, ev))
    return out


_CONFIGS: list[TableConfig] = [
    baccarat_config(decks=1), baccarat_config(burn='mode = "face_value"', start="button"),
    baccarat_config(game="ez-baccarat"), blackjack_config(decks=1), blackjack_config(hole_card=False),
    uth_config(), uth_config(deal="stacks", board="before", burns=1),
]


def _check_invariants(config: TableConfig, emits: list[Emit]) -> None:
    settled: set[tuple[Any, Any, str]] = set()
    public_idx: dict[tuple[Any, Any], set[int]] = defaultdict(set)
    floors: dict[tuple[Any, Any], FloorRound] = {}
    for e in emits:
        m = e.message
        assert not (e.channel is Channel.ALARMS and m.code == "INTERNAL_ERROR")
        if isinstance(m, SettlementMessage):
            key = (m.shoe, m.round, m.spot)
            assert key not in settled, f"settled twice: {key}"
            settled.add(key)
        elif isinstance(m, RoundState):
            assert m.cards_remaining >= 0
            public_idx[(m.shoe, m.round)].update(c.index for c in m.cards)
            if config.game == "uth" and m.cards:
                assert m.revealed and m.phase in ("reveal", "complete", "shoe_end"), "UTH card unrevealed"
        elif isinstance(m, FloorRound):
            assert (m.shoe, m.round) not in floors, "two floor records for one round"
            floors[(m.shoe, m.round)] = m
    for key, idx in public_idx.items():
        floor = floors.get(key)
        if floor is None or config.game == "uth":
            continue
        face_down = {c.index for c in floor.cards if not c.face_up}
        assert not (idx & face_down), f"face-down card public in round {key}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_event(), max_size=120), st.integers(0, len(_CONFIGS) - 1))
def test_random_event_sequences_never_raise_and_keep_the_invariants(events: list[Any], which: int) -> None:
    config = _CONFIGS[which]
    inputs = _inputs(events)
    machine, emits = replay(config, inputs)
    _check_invariants(config, emits)
    for e in emits:
        msgspec.json.encode(e.message)
    again, emits2 = replay(config, inputs)
    assert encode_all(emits2) == encode_all(emits)
    assert again.snapshot() == machine.snapshot()


def test_seed_pads_restores_the_bet_pad_state_without_emitting() -> None:
    cfg = baccarat_config()
    d = Driver(cfg)
    d.bet("1P", 1000)
    d.bet("1PP", 500)
    machine = TableMachine(cfg)
    machine.seed_pads([i.event for i in d.inputs])
    expected = {"1P": (True, 1000), "1PP": (True, 500)}
    assert machine.snapshot()["pads"] == d.machine.snapshot()["pads"] == expected
    assert list(machine.snapshot()["record"]["spot_changes"]) == []


def test_seed_pads_refuses_a_stake_above_the_money_bound_as_handle_did() -> None:
    """A change :meth:`handle` ignored (WAGER_LIMIT: a stake above the money bound) is not applied when
    the pads are seeded from the journal either. Before, a restart after such a change put the absurd
    stake on the spot and the next round locked and settled it (a payout past 2**53 - 1 minor units)."""
    from fractions import Fraction

    from tablesense.daemon.rules.money import max_stake

    cfg = baccarat_config()
    d = Driver(cfg)
    bound = max_stake([Fraction(25)])  # perfect pairs paytable A: 25 to 1
    d.bet("1P", 1000)
    d.bet("1PP", bound + 1)
    assert "1PP" not in d.machine.snapshot()["pads"]
    rebuilt = Driver(cfg)
    rebuilt.machine.seed_pads([i.event for i in d.inputs if isinstance(i.event, SpotChanged)])
    assert rebuilt.machine.snapshot()["pads"] == d.machine.snapshot()["pads"] == {"1P": (True, 1000)}
    rebuilt.button(Button.NO_MORE_BETS)
    rebuilt.cards("9H 3D KS KC")  # a Player natural 9: the round is complete
    assert [(s.spot, s.stake) for s in rebuilt.settlements()] == [("1P", 1000)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.sampled_from(["baccarat", "ez-baccarat"]))
def test_every_settlement_of_a_dealt_shoe_equals_the_rules_core(seed: int, game: str) -> None:
    """Deal 30 rounds of a shuffled shoe with random wagers and unreadable cards entered by a supervisor;
    every round's settlements equal settle_baccarat on the floor record's cards and locked wagers."""
    from tablesense.daemon.rules.baccarat import settle_baccarat
    from tablesense.daemon.rules.cards import Card
    from tablesense.daemon.rules.settlement import Bet, Hand, Wager

    rng = random.Random(seed)
    cfg = baccarat_config(game=game)
    d = Driver(cfg)
    shoe = [c for c in ALL_CARDS for _ in range(cfg.shoe_decks)]
    rng.shuffle(shoe)
    for _ in range(30):
        for spot in cfg.spots:
            if rng.random() < 0.5:
                d.bet(spot, rng.choice([100, 500, 2500]))
            else:
                d.remove(spot)
        d.button(Button.NO_MORE_BETS)
        before = len(d.floor())
        while len(d.floor()) == before:
            card = shoe.pop()
            if rng.random() < 0.05:
                d.unreadable()
                assert d.command("enter_card", card=str(card)).ok
            else:
                d.card(str(card))
    rules = cfg.rules()
    assert len(d.floor()) == 30
    for floor in d.floor():
        assert not floor.void and floor.baccarat is not None
        cards = [Card.parse(c.card) for c in floor.cards if c.card is not None]
        wagers = [Wager(w.spot, Bet(w.bet), w.stake, Hand(w.hand) if w.hand else None) for w in floor.wagers]
        expected = {(s.wager.spot, s.outcome.value, s.category, s.net, s.commission)
                    for s in settle_baccarat(cards, wagers, rules)}
        got = {(s.spot, s.outcome, s.category, s.net, s.commission) for s in floor.settlements}
        assert got == expected
