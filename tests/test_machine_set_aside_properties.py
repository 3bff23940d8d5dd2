"""Cards set aside in the middle of a deal, against the truth (docs/state-machine.md, "Holds").

One round of every game is dealt from a known shuffled one-deck shoe, and the shoe's frames are spoilt at
random: a frame lost (the next card carries a ``SEQUENCE_GAP``), a card misread as one already out
(``CARD_NOT_IN_SHOE``), a card unreadable, the link lost and the last card read again (a possible
re-scan), the shoe restarting with a card's frame unacknowledged (``DEVICE_RESTARTED``), a card frame
rejected (``INPUT_REJECTED``), several of them in one round and together. A supervisor who knows the
truth resolves them at random moments, one command at a time, as the docs tell: ``rescan`` (``keep`` for
a card of the deal, ``set_aside`` for a re-read), ``enter_card`` for an unreadable card, for the cards
missing up to a set-aside card (the lost ones and its real value), then ``ack_alarm``.

After every input: the cards placed are the true deal's first cards, each at its true position (so a
face-down card never takes a face-up place, and no card is placed twice); nothing is settled while a
card waits behind a set-aside one; no true face-down card is on a public channel (blackjack's hole card
never, UTH's cards not before the reveal). At the end the round is complete with the true cards and the
settlements of the same round dealt without a fault, and a replay of the inputs gives the same machine.
A second property feeds random irregular input with wrong commands and checks the machine never raises,
places each card at most once and can always be got out of a round with ``void_round`` (once more for
each round a no-more-bets that waited behind a held round opens: tests/test_adversarial_nmb_held.py)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machine_support import (
    SHOE,
    Driver,
    baccarat_config,
    blackjack_config,
    card_tokens,
    encode_all,
    public_payloads,
    uth_config,
)

from tablesense.daemon.config import TableConfig
from tablesense.daemon.rules.cards import Card, ShoeComposition
from tablesense.daemon.table import Channel, replay
from tablesense.daemon.table.inputs import RejectedInput
from tablesense.daemon.table.machine import Phase
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    CardUnreadable,
    DeviceError,
    DeviceIdentity,
    LinkState,
    ShoeStatusKind,
)

_CONFIGS: list[tuple[TableConfig, tuple[tuple[str, int], ...]]] = [
    (baccarat_config(decks=1), (("1P", 1000), ("1PP", 500), ("1BP", 500), ("2P", 1000))),
    (baccarat_config(decks=1, game="ez-baccarat"), (("1B", 1000), ("1PP", 500), ("1T", 500))),
    (blackjack_config(decks=1), (("B1", 1000), ("PP1", 500), ("B2", 1000), ("PP2", 500))),
    (blackjack_config(decks=1, hole_card=False), (("B1", 1000), ("PP1", 500), ("B3", 1000))),
    (uth_config(), (("A1", 1000), ("U1", 500), ("A2", 1000), ("U2", 500))),
    (uth_config(deal="stacks", board="before", burns=1), (("A1", 1000), ("U1", 500))),
]
_FAULTS = ("ok",) * 6 + ("lost", "misread", "unreadable", "reread", "restart", "rejected")


def _deck(seed: int) -> list[Card]:
    cards = [c for c, _ in ShoeComposition(1).counts()]
    random.Random(seed).shuffle(cards)
    return cards


def _identity(d: Driver, session: str) -> None:
    """The shoe announces itself (a session other than its last one: it restarted)."""
    d.feed(DeviceIdentity(SHOE, d.seq(SHOE), "acme", "CS-8", "2.4.1", "SN12345", session))


def _start(config: TableConfig, bets: tuple[tuple[str, int], ...]) -> Driver:
    d = Driver(config)
    _identity(d, "s0")
    d.status(ShoeStatusKind.NEW_SHOE)
    for spot, amount in bets:
        d.bet(spot, amount)
    d.button(Button.NO_MORE_BETS)
    return d


def _true_round(config: TableConfig, bets: tuple[tuple[str, int], ...],
                deck: list[Card]) -> tuple[list[tuple[str, str]], list[tuple[str, str, int]], Driver]:
    """The round dealt without a fault: its slots (position, card) and settlements."""
    d = _start(config, bets)
    for card in deck:
        if d.machine.phase is not Phase.DEALING:
            break
        d.card(str(card))
    if d.machine.phase in (Phase.PLAYING, Phase.REVEAL):
        d.button(Button.ROUND_END)
    slots = [(p, str(c)) for _, p, c in d.machine.snapshot()["slots"]]
    return slots, [(s.spot, s.outcome, s.net) for s in d.settlements()], d


@dataclass
class _Truth:
    slots: list[tuple[str, str]]
    face_down: set[str]
    """Cards not public before the reveal."""
    never: set[str]
    """Cards never public (blackjack's hole card)."""
    by_seq: dict[int, int] = field(default_factory=dict)
    """Shoe frame sequence -> index in the true deal (cards only)."""
    lost: set[int] = field(default_factory=set)
    """The cards (index in the true deal) whose frame was lost so far."""


def _supervise(d: Driver, truth: _Truth) -> bool:
    """One command of a supervisor who knows the truth; False when nothing is left to do."""
    m = d.machine
    snap = m.snapshot()
    rnd = {"shoe": str(snap["shoe"]), "round": str(snap["round"])}
    placed = snap["slots"]
    if snap["suspect"] is not None:  # a re-read joins no hand; a card of the deal (misread as the card
        suspect = m._suspect        # read last, after a restart) is kept: it takes its place, set aside
        real = suspect is not None and suspect.device_seq in truth.by_seq
        assert d.command("rescan", action="keep" if real else "set_aside", **rnd).ok, d.replies[-1]
        return True
    unresolved = next((i for i, (_, pos, card) in enumerate(placed) if card is None and pos != "burn"), None)
    if unresolved is not None:
        assert d.command("enter_card", card=truth.slots[unresolved][1], **rnd).ok, d.replies[-1]
        return True
    j = len(placed)
    aside = m._aside  # the card (or lost frame) the deal stops at, and its alarm
    if aside is not None:
        alarm = aside.alarm_id
        queued = [truth.by_seq[e.device_seq] for e in m._queue
                  if e.status == "queued" and e.device_seq is not None]
        limit = min(queued, default=len(truth.slots))  # the first card waiting in the queue
        waiting = {id(e) for e in m._queue}
        ends = [truth.by_seq[e.device_seq] for e in m._record.cards
                if e.alarm_id == alarm and id(e) not in waiting and e.device_seq in truth.by_seq
                and e.status in ("set_aside", "re_entered") and truth.by_seq[e.device_seq] < limit]
        if j < limit and (j in truth.lost or (ends and j <= max(ends))):
            assert d.command("enter_card", card=truth.slots[j][1], **rnd).ok, d.replies[-1]
        else:
            assert d.command("ack_alarm", alarm_id=alarm).ok, d.replies[-1]
        return True
    holds = snap["holds"]
    if holds:
        codes = set(holds.values())
        if (j < len(truth.slots) and not snap["queue"] and m.phase is Phase.DEALING
                and codes & {"SEQUENCE_GAP", "CARD_NOT_IN_SHOE", "DEVICE_RESTARTED", "INPUT_REJECTED"}):
            assert d.command("enter_card", card=truth.slots[j][1], **rnd).ok, d.replies[-1]
        else:
            assert d.command("ack_alarm", alarm_id=min(holds)).ok, d.replies[-1]
        return True
    if m.phase in (Phase.PLAYING, Phase.REVEAL) and j >= len(truth.slots):
        d.button(Button.ROUND_END)
        return True
    return False


def _check(d: Driver, truth: _Truth, before: int, revealed: bool) -> None:
    snap = d.machine.snapshot()
    placed = [(pos, card) for _, pos, card in snap["slots"]]
    assert len(placed) <= len(truth.slots), placed
    for (pos, card), (tpos, tcard) in zip(placed, truth.slots, strict=False):
        assert pos == tpos and card in (None, tcard), (placed, truth.slots)
    new = d.emits[before:]
    if snap["aside"] is not None or snap["queue"]:
        assert not d.settlements(new), "settled while cards wait"
    hidden = truth.never | (truth.face_down if not revealed else set())
    for payload in public_payloads(new):
        assert not (card_tokens(payload) & hidden), payload[:300]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(_CONFIGS) - 1), st.integers(0, 2**32),
       st.lists(st.sampled_from(_FAULTS), max_size=14), st.lists(st.integers(0, 3), max_size=40))
def test_a_supervisor_who_knows_the_truth_always_gets_the_true_round(which: int, seed: int, faults: list[str],
                                                                      pace: list[int]) -> None:
    config, bets = _CONFIGS[which]
    deck = _deck(seed)
    slots, settlements, clean = _true_round(config, bets, deck)
    rec = {c["card"]: c for c in clean.machine.snapshot()["record"]["cards"]}
    face_down = {c for _, c in slots if not rec[c]["face_up"]}
    if config.game == "uth":  # face down until the reveal, which publishes hands and board
        truth = _Truth(slots, {c for p, c in slots if p != "burn"}, {c for p, c in slots if p == "burn"})
    else:
        truth = _Truth(slots, face_down, face_down)
    d = _start(config, bets)
    paces = iter(pace)
    revealed = False

    def step(feed: Any) -> None:
        nonlocal revealed
        before = len(d.emits)
        feed()
        revealed = revealed or d.machine.public_state.revealed
        _check(d, truth, before, revealed)

    taken: list[Card] = []  # cards the machine has read and taken out of the shoe
    last: Card | None = None  # the card the shoe read last
    previous = "ok"
    for k, (_, text) in enumerate(slots):
        fault = faults[k] if k < len(faults) else "ok"
        card = Card.parse(text)
        if fault == "reread" and previous in ("ok", "reread") and last is not None:
            read_again = last  # the link drops and the reader reports its last card again
            step(lambda: d.link(SHOE, LinkState.DISCONNECTED))
            step(lambda: d.link(SHOE, LinkState.ONLINE))
            step(lambda c=read_again: d.card(str(c)))
        if fault == "restart":  # the card's frame, not yet acknowledged, dies with the shoe's restart
            truth.lost.add(k)
            step(lambda k=k: _identity(d, f"s{k + 1}"))
            previous = fault
            continue
        seq = d.seq(SHOE)
        if fault == "lost":
            truth.lost.add(k)  # the frame is lost: the next frame carries the gap
        elif fault == "rejected":  # its application raised: journaled as rejected, nothing applied
            truth.lost.add(k)
            step(lambda s=seq, c=card: d.feed(RejectedInput(kind="CardDrawn", payload=f'{{"card":"{c}"}}',
                                                            error="KeyError: x", device=SHOE, seq=s)))
        elif fault == "misread" and taken:
            step(lambda s=seq: d.feed(CardDrawn(SHOE, s, taken[0])))  # a card already out
            truth.by_seq[seq], last = k, taken[0]
        elif fault == "unreadable":
            step(lambda s=seq: d.feed(CardUnreadable(SHOE, s)))
            truth.by_seq[seq] = k
        else:
            step(lambda s=seq, c=card: d.feed(CardDrawn(SHOE, s, c)))
            truth.by_seq[seq], last = k, card
            taken.append(card)
        previous = fault
        for _ in range(next(paces, 0)):
            if not _supervise(d, truth):
                break
            _check(d, truth, len(d.emits), revealed)
    # a frame after the last card: a lost last card shows as a gap here
    step(lambda: d.feed(DeviceError(SHOE, d.seq(SHOE), "E1", "jam")))
    for _ in range(200):
        before = len(d.emits)
        if not _supervise(d, truth):
            break
        revealed = revealed or d.machine.public_state.revealed
        _check(d, truth, before, revealed)
    snap = d.machine.snapshot()
    assert snap["phase"] in ("complete", "shoe_end"), (snap["phase"], snap["holds"], snap["queue"])
    assert [(p, c if c is not None or p != "burn" else t) for (_, p, c), (_, t) in zip(snap["slots"], slots,
                                                                                     strict=False)] == slots
    assert snap["remaining"] == clean.machine.snapshot()["remaining"]
    assert [(s.spot, s.outcome, s.net) for s in d.settlements()] == settlements
    again, emits = replay(config, d.inputs)
    assert again.snapshot() == snap
    assert encode_all(emits) == encode_all(d.emits)


# ------------------------------------------------------------------------------------ random irregular input


@st.composite
def _action(draw: st.DrawFn) -> tuple[Any, ...]:
    kind = draw(st.integers(0, 99))
    if kind < 40:
        return ("card", draw(st.integers(0, 51)), draw(st.sampled_from([0, 0, 0, 1, 2])))
    if kind < 45:
        return ("unreadable", draw(st.sampled_from([0, 0, 1])))
    if kind < 52:
        return ("link", draw(st.sampled_from([LinkState.DISCONNECTED, LinkState.ONLINE])))
    if kind < 60:
        return ("button", draw(st.sampled_from(list(Button))))
    if kind < 64:
        return ("status", draw(st.sampled_from([ShoeStatusKind.CUT_CARD, ShoeStatusKind.EMPTY,
                                                ShoeStatusKind.NEW_SHOE, ShoeStatusKind.BURN])))
    name = draw(st.sampled_from(["enter_card", "enter_card", "ack_alarm", "ack_alarm", "rescan", "void_round",
                                 "new_shoe"]))
    return ("command", name, draw(st.integers(0, 51)), draw(st.integers(0, 9)), draw(st.booleans()))


def _apply(d: Driver, a: tuple[Any, ...], deck: list[Card], bets: tuple[tuple[str, int], ...]) -> None:
    m = d.machine
    snap = m.snapshot()
    if a[0] == "card":
        d.card(str(deck[a[1]]), skip=a[2])
    elif a[0] == "unreadable":
        d.feed(CardUnreadable(SHOE, d.seq(SHOE, a[1])))
    elif a[0] == "link":
        d.link(SHOE, a[1])
    elif a[0] == "button":
        if a[1] is Button.NO_MORE_BETS and m.phase in (Phase.BETTING, Phase.COMPLETE):
            for spot, amount in bets:
                d.bet(spot, amount)
        d.button(a[1])
    elif a[0] == "status":
        d.status(a[1])
    else:
        _, name, card, pick, wrong = a
        rnd = {"shoe": str(snap["shoe"]), "round": str(snap["round"] + (1 if wrong else 0))}
        if name == "enter_card":
            d.command(name, card=str(deck[card]), **rnd)
        elif name == "rescan":
            d.command(name, action="keep" if pick % 2 else "set_aside", **rnd)
        elif name == "void_round":
            d.command(name, **rnd)
        elif name == "new_shoe":
            d.command(name, shoe=rnd["shoe"])
        else:
            ids = sorted(a for a, _, _ in snap["alarms"]) or ["1.1"]
            d.command(name, alarm_id=ids[pick % len(ids)] if not wrong else f"{snap['shoe']}.{pick + 40}")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(_CONFIGS) - 1), st.integers(0, 2**32), st.lists(_action(), max_size=60))
def test_random_irregular_input_never_jams_the_table(which: int, seed: int,
                                                     actions: list[tuple[Any, ...]]) -> None:
    config, bets = _CONFIGS[which]
    deck = _deck(seed)
    d = _start(config, bets)
    for a in actions:
        _apply(d, a, deck, bets)  # InputRejected would fail the test
        snap = d.machine.snapshot()
        placed = [i for i, _, _ in snap["slots"]]
        assert len(placed) == len(set(placed)), "a card placed twice"
        assert not set(placed) & set(snap["queue"]), "a card placed and queued"
    for _ in range(len(actions) + 1):  # a no-more-bets that waited behind a voided round opens the next
        snap = d.machine.snapshot()
        if d.machine.phase not in (Phase.DEALING, Phase.PLAYING, Phase.REVEAL):
            break
        assert d.command("void_round", shoe=str(snap["shoe"]), round=str(snap["round"])).ok, d.replies[-1]
    assert d.machine.phase not in (Phase.DEALING, Phase.PLAYING, Phase.REVEAL)
    assert d.machine.snapshot()["queue"] == [] and d.machine.snapshot()["aside"] is None
    assert "waiting" not in d.machine.snapshot()
    again, emits = replay(config, d.inputs)
    assert again.snapshot() == d.machine.snapshot()
    assert encode_all(emits) == encode_all(d.emits)
    settled = [(s.shoe, s.round, s.spot) for s in d.settlements()]
    assert len(settled) == len(set(settled)), "a wager settled twice"
    assert all(e.channel is not Channel.ALARMS or e.message.code != "INPUT_REJECTED" for e in d.emits)
