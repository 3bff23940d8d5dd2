"""The dealer's no-more-bets for the next coup pressed while the round in play is held
(docs/state-machine.md, "Holds"): an unreadable card waits for ``enter_card``, a sequence gap or a
wrong-device frame holds the round, and the dealer, who sees none of that, closes the next coup's
betting and deals it. The button waits, and every later frame of the devices with it: once the held round
is resolved (or voided) they are applied in order, as they would have been had they come then. The held
round ends in its place; the next round opens and locks with the bet pads as they were when the button
was pressed (a chip moved after the press is a change after the next round's lock); the cards drawn after
it are dealt into the next round; nothing of the next round is settled or published before.

Before the fix the button was dropped (``UNEXPECTED_BUTTON``): behind a wrong-device hold the next coup's
cards became silent hits of the held round; behind an unreadable hole card they became ``EXTRA_CARD``
(joining no hand); in baccarat they were extra cards of the held coup; the next coup's wagers were never
locked nor settled, and the chips moved for it were raised as ``PAST_POSTING`` on the held round. The
hole card and UTH hands before their reveal never reach a public channel either way."""

from __future__ import annotations

from typing import Any

from machine_support import (
    PADS,
    SHOE,
    Driver,
    baccarat_config,
    encode_all,
    uth_config,
)
from machine_support import blackjack_locked as _locked
from machine_support import leaked as _leaked
from machine_support import raised_alarm as _alarm

from tablesense.daemon.table import Emit, replay
from tablesense.daemon.table.machine import _MAX_WAITING
from tablesense.drivers.events import Button, LinkState, ShoeStatusKind, SpotChanged, SpotState

R1 = {"shoe": "1", "round": "1"}


def _rounds(emits: list[Emit]) -> set[Any]:
    """The rounds the messages in ``emits`` are about."""
    return {getattr(e.message, "round", None) for e in emits}


def _cards(record: Any) -> list[tuple[str | None, str | None, str]]:
    return [(c.card, c.position, c.status) for c in record.cards]


def _slots(d: Driver) -> list[tuple[str, str | None]]:
    return [(p, c) for _, p, c in d.machine.snapshot()["slots"]]


def _replays_alike(d: Driver) -> None:
    again, emits = replay(d.config, d.inputs)
    assert again.snapshot() == d.machine.snapshot()
    assert encode_all(emits) == encode_all(d.emits)


def test_the_next_coups_cards_behind_an_unreadable_hole_card_are_dealt_into_the_next_round() -> None:
    """5H to box 1, 7C up, 5D, the hole card unreadable, a hit 8S (queued behind it); no-more-bets for the
    next coup; PP1 raised to 1000 after the press; the next coup's 9H, 2C, 9D, KS. The supervisor enters
    the hole card (QS). Before the fix the four cards became EXTRA_CARD and round 2 never existed."""
    d = _locked()
    d.cards(["5H", "7C", "5D"])
    d.unreadable()  # the hole card
    d.card("8S")  # a hit: queued behind it
    d.button(Button.NO_MORE_BETS)
    d.bet("PP1", 1000)  # after the press: a change after round 2's lock
    d.cards(["9H", "2C", "9D", "KS"])
    held = list(d.emits)
    assert "UNEXPECTED_BUTTON" not in d.codes() and "PAST_POSTING" not in d.codes()
    assert _rounds(held) <= {None, 1} and d.state.round == 1 and d.state.held
    assert d.public_cards() == ["5H", "7C", "5D"]
    assert [(s.round, s.spot) for s in d.settlements()] == [(1, "PP1")]  # at box 1's second card
    _replays_alike(d)  # what waits is rebuilt from the journal like everything else

    out = d.command("enter_card", card="QS", **R1)
    assert out.ok
    assert "EXTRA_CARD" not in d.codes() and "UNEXPECTED_BUTTON" not in d.codes()
    (first,) = d.floor()
    assert (first.round, first.void) == (1, False)
    assert _cards(first) == [("5H", "1", "dealt"), ("7C", "dealer", "dealt"), ("5D", "1", "dealt"),
                             ("QS", "dealer", "entered"), ("8S", "play", "dealt")]
    assert (d.state.round, d.state.phase, d.state.held) == (2, "playing", False)
    assert [(w["spot"], w["stake"]) for w in d.machine.snapshot()["record"]["wagers"]] == [
        ("B1", 1000), ("PP1", 500)]  # the bet pads as they were at the press
    assert _slots(d) == [("1", "9H"), ("dealer", "2C"), ("1", "9D"), ("dealer", "KS")]
    record = d.machine.snapshot()["record"]
    ts = {c["card"]: c["ts"] for c in record["cards"]}
    assert record["locked_ts"] < ts["9H"] < ts["KS"] < d.inputs[-1].ts  # when they happened
    (past,) = [a for a in d.alarms() if a.code == "PAST_POSTING"]
    assert (past.round, past.spot) == (2, "PP1")
    assert [(s.round, s.spot, s.stake, s.category, s.net) for s in d.settlements()] == [
        (1, "PP1", 500, "colored_pair", 6000), (2, "PP1", 500, "colored_pair", 6000)]
    (change,) = record["spot_changes"]
    assert (change["spot"], change["amount"], change["after_lock"]) == ("PP1", 1000, True)
    assert d.public_cards() == ["9H", "2C", "9D"]
    assert _leaked(d, "QS", "8S", "KS") == []
    _replays_alike(d)
    d.button(Button.ROUND_END)
    assert [f.round for f in d.floor()] == [1, 2] and _leaked(d, "QS", "8S", "KS") == []


def test_the_next_coups_cards_behind_a_wrong_device_hold_are_no_hits_of_the_held_round() -> None:
    """The initial deal is out; the shoe sends a spot frame (WRONG_DEVICE holds the round); the dealer
    presses no-more-bets and deals the next coup. Before the fix the button was dropped and the four
    cards were taken, silently, as hits of round 1."""
    d = _locked()
    d.cards(["5H", "7C", "5D", "QS"])
    d.feed(SpotChanged(SHOE, d.seq(SHOE), "B1", SpotState.PLACED, 5))  # wrong device: holds
    d.button(Button.NO_MORE_BETS)
    d.cards(["9H", "2C", "9D", "KS"])
    assert d.state.round == 1 and d.public_cards() == ["5H", "7C", "5D"]
    assert d.command("ack_alarm", alarm_id=_alarm(d, "WRONG_DEVICE")).ok
    (first,) = d.floor()
    assert _cards(first) == [("5H", "1", "dealt"), ("7C", "dealer", "dealt"), ("5D", "1", "dealt"),
                             ("QS", "dealer", "dealt")]
    assert (d.state.round, d.state.phase) == (2, "playing")
    assert _slots(d) == [("1", "9H"), ("dealer", "2C"), ("1", "9D"), ("dealer", "KS")]
    assert [(s.round, s.spot) for s in d.settlements()] == [(1, "PP1"), (2, "PP1")]
    assert "UNEXPECTED_BUTTON" not in d.codes() and _leaked(d, "QS", "KS") == []
    _replays_alike(d)


def test_baccarat_no_more_bets_while_a_coup_is_held_in_dealing_locks_the_next_coup() -> None:
    """Player 4H, banker 3D, the player's second card unreadable, the banker's 9C queued behind it; the
    dealer presses no-more-bets and deals the next coup (2H 3S 6D 5H, a natural tie); player 1 takes his
    Player wager off after the press. The supervisor enters 5C: a natural 9, the coup is over with its
    four cards. Before the fix the next coup's cards were EXTRA_CARD of the held coup, held again."""
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.bet("1PP", 500)
    d.cards(["4H", "3D"])
    d.unreadable()
    d.card("9C")
    d.button(Button.NO_MORE_BETS)
    d.remove("1P")  # after the press: past-posting on coup 2, settled at its locked stake
    d.cards(["2H", "3S", "6D", "5H"])
    assert d.state.round == 1 and d.results() == [] and d.settlements() == []
    assert d.command("enter_card", card="5C", **R1).ok
    assert "EXTRA_CARD" not in d.codes() and "UNEXPECTED_BUTTON" not in d.codes()
    first, second = d.floor()
    assert [c.card for c in first.cards] == ["4H", "3D", "5C", "9C"]
    assert [c.card for c in second.cards] == ["2H", "3S", "6D", "5H"]
    assert [(w.spot, w.stake) for w in second.wagers] == [("1P", 1000), ("1PP", 500)]
    assert [(r.round, r.baccarat.winner) for r in d.results() if r.baccarat] == [(1, "player"), (2, "tie")]
    assert [(s.round, s.spot, s.outcome) for s in d.settlements()] == [
        (1, "1PP", "lose"), (1, "1P", "win"), (2, "1PP", "lose"), (2, "1P", "push")]
    (past,) = [a for a in d.alarms() if a.code == "PAST_POSTING"]
    assert past.round == 2
    _replays_alike(d)


def test_uth_hands_of_the_next_coup_stay_private_until_its_own_reveal() -> None:
    """The dealer's first card unreadable; the seat's second card, the dealer's and the board queue behind
    it; reveal; no-more-bets; the next coup dealt. Round 1 is revealed and settled once the card is
    entered; round 2 is dealt face down and public only at its own reveal."""
    d = Driver(uth_config())
    d.bet("A1", 1000)
    d.bet("U1", 500)
    d.button(Button.NO_MORE_BETS)
    d.card("AH")
    d.unreadable()  # the dealer's first card
    d.cards(["AD", "KD", "2H", "5S", "9D", "JC", "3S"])
    d.button(Button.ROUND_END)  # the reveal
    d.button(Button.NO_MORE_BETS)
    nxt = ["QH", "4C", "QD", "4S", "6H", "7H", "8C", "TD", "2S"]
    d.cards(nxt)
    assert d.state.cards == () and d.settlements() == []
    assert d.command("enter_card", card="KH", **R1).ok
    assert [(s.round, s.spot, s.category) for s in d.settlements()] == [(1, "U1", "aces")]
    assert (d.state.round, d.state.phase, d.state.cards) == (2, "reveal", ())
    assert _leaked(d, *nxt) == []
    d.button(Button.ROUND_END)
    assert [(s.round, s.category) for s in d.settlements()][-1] == (2, "face_pair")
    assert d.public_cards() == ["QH", "4C", "QD", "4S", "6H", "7H", "8C", "10D", "2S"]
    _replays_alike(d)


def test_a_no_more_bets_pressed_before_the_held_rounds_cards_are_out_is_unexpected_in_its_turn() -> None:
    """The up card's frame is lost: box 1's second card (7C) carries the gap and is set aside, the hole
    card (QS) queues; no-more-bets; two more cards. The supervisor acknowledges without entering (the
    lost frame was no card): the deal is short when the button's turn comes, so it does not apply
    (``UNEXPECTED_BUTTON``, as pressed mid-deal) and the cards after it deal the held round on."""
    d = _locked()
    d.card("5H")
    d.card("7C", skip=1)  # set aside
    d.card("QS")  # queued
    d.button(Button.NO_MORE_BETS)
    d.cards(["6D", "9S"])
    assert "UNEXPECTED_BUTTON" not in d.codes()
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok
    (unexpected,) = [a for a in d.alarms() if a.code == "UNEXPECTED_BUTTON"]
    assert "no_more_bets in phase dealing" in unexpected.text
    assert (d.state.round, d.state.phase) == (1, "playing")
    assert _slots(d) == [("1", "5H"), ("dealer", "QS"), ("1", "6D"), ("dealer", "9S")]
    assert _leaked(d, "9S") == []
    _replays_alike(d)


def test_voiding_the_held_round_opens_the_next_one_as_the_no_more_bets_left_it() -> None:
    d = _locked()
    d.cards(["5H", "7C", "5D"])
    d.unreadable()
    d.button(Button.NO_MORE_BETS)
    d.cards(["9H", "2C"])
    assert d.command("void_round", **R1).ok
    first = d.floor()[0]
    assert first.void and [c.card for c in first.cards] == ["5H", "7C", "5D", None]
    assert [(s.round, s.spot, s.outcome) for s in d.settlements()] == [(1, "PP1", "win")]  # before the hold
    assert (d.state.round, d.state.phase) == (2, "dealing") and d.public_cards() == ["9H", "2C"]
    assert "waiting" not in d.machine.snapshot()
    _replays_alike(d)


def test_buttons_behind_the_waiting_no_more_bets_apply_in_their_turn() -> None:
    """Behind the first no-more-bets the dealer deals the next coup, presses no-more-bets again (the
    coup after), changes a bet and deals on; a stray double press right after is unexpected in its turn,
    as it is on a round in play."""
    d = _locked()
    d.cards(["5H", "7C", "5D", "QS"])
    d.feed(SpotChanged(SHOE, d.seq(SHOE), "B1", SpotState.PLACED, 5))  # wrong device: holds
    d.button(Button.NO_MORE_BETS)
    d.cards(["9H", "2C", "9D", "KS", "4D"])  # round 2 with a hit
    d.bet("PP1", 800)  # before round 3's no-more-bets: a change after round 2's lock
    d.button(Button.NO_MORE_BETS)
    d.button(Button.NO_MORE_BETS)  # a double press
    d.cards(["8H", "3C", "8D", "JS"])
    assert d.state.round == 1
    assert d.command("ack_alarm", alarm_id=_alarm(d, "WRONG_DEVICE")).ok
    assert [f.round for f in d.floor()] == [1, 2]
    assert [c.card for c in d.floor()[1].cards] == ["9H", "2C", "9D", "KS", "4D"]
    assert (d.state.round, d.state.phase) == (3, "playing")
    assert [(w["spot"], w["stake"]) for w in d.machine.snapshot()["record"]["wagers"]] == [
        ("B1", 1000), ("PP1", 800)]
    assert [(a.round, a.code) for a in d.alarms() if a.code in ("PAST_POSTING", "UNEXPECTED_BUTTON")] == [
        (2, "PAST_POSTING"), (3, "UNEXPECTED_BUTTON")]
    assert [(s.round, s.spot, s.stake) for s in d.settlements()] == [
        (1, "PP1", 500), (2, "PP1", 500), (3, "PP1", 800)]
    assert _leaked(d, "QS", "KS", "4D", "JS") == []
    _replays_alike(d)


def test_a_re_read_behind_the_waiting_no_more_bets_is_a_possible_rescan_in_the_next_round() -> None:
    """The next coup's first card (9H) is read; the shoe loses its link and reports 9H again after it is
    back. The re-read is compared where it falls: in round 2, against round 2's last card."""
    d = _locked()
    d.cards(["5H", "7C", "5D"])
    d.unreadable()
    d.button(Button.NO_MORE_BETS)
    d.card("9H")
    d.link(SHOE, LinkState.DISCONNECTED)
    d.link(SHOE, LinkState.ONLINE)
    d.card("9H")  # read again
    d.cards(["2C", "9D"])
    assert d.command("enter_card", card="QS", **R1).ok
    assert d.state.round == 2 and d.state.hold_codes == ("POSSIBLE_RESCAN",)
    (rescan,) = [a for a in d.alarms() if a.code == "POSSIBLE_RESCAN"]
    assert rescan.round == 2
    assert d.command("rescan", action="set_aside", shoe="1", round="2").ok
    assert _slots(d) == [("1", "9H"), ("dealer", "2C"), ("1", "9D")]
    _replays_alike(d)


def test_frames_beyond_the_bound_are_taken_as_lost() -> None:
    """A bet pad flooding the table while the no-more-bets waits: the frames beyond the bound are not
    kept, and are raised as lost in their place once the held round is resolved."""
    d = _locked()
    d.cards(["5H", "7C", "5D"])
    d.unreadable()
    d.button(Button.NO_MORE_BETS)
    for i in range(_MAX_WAITING + 10):
        d.bet("B2", 100 + i)
    d.card("9H")
    assert len(d.machine.snapshot()["waiting"]) == _MAX_WAITING + 2  # one "lost" item for each device
    assert d.command("enter_card", card="QS", **R1).ok
    gaps = [a for a in d.alarms() if a.code == "SEQUENCE_GAP"]
    assert [(a.round, a.device, a.held) for a in gaps] == [(2, PADS, False), (2, SHOE, True)]
    assert "not applied" in gaps[0].text
    assert d.machine.snapshot()["pads"]["B2"] == (True, 100 + _MAX_WAITING - 2)
    assert "waiting" not in d.machine.snapshot()


def test_a_uth_no_more_bets_without_the_reveal_is_unexpected_as_on_a_round_not_held() -> None:
    """A UTH round ends by its reveal only: a no-more-bets on it is UNEXPECTED_BUTTON and the next card
    an extra card, held or not (this pins the waiting button to what the machine does unheld)."""
    seen = []
    for held in (False, True):
        d = Driver(uth_config())
        d.bet("A1", 1000)
        d.bet("U1", 500)
        d.button(Button.NO_MORE_BETS)
        d.cards(["AH", "KH", "AD", "KD", "2H", "5S", "9D", "JC", "3S"])
        if held:
            d.feed(SpotChanged(SHOE, d.seq(SHOE), "A1", SpotState.PLACED, 5))  # wrong device: holds
        d.button(Button.NO_MORE_BETS)
        d.card("QH")
        if held:
            assert d.codes() == ["WRONG_DEVICE"]
            assert d.command("ack_alarm", alarm_id=_alarm(d, "WRONG_DEVICE")).ok
        seen.append(([c for c in d.codes() if c != "WRONG_DEVICE"], d.state.round, d.state.phase,
                     d.state.cards))
    assert seen[0] == seen[1] == (["UNEXPECTED_BUTTON", "EXTRA_CARD"], 1, "reveal", ())


def test_a_new_shoe_behind_the_waiting_no_more_bets_ends_the_wait_and_is_its_own_replay_start() -> None:
    """A held round, the next coup's no-more-bets and two of its cards wait; then a new shoe is loaded.
    The new shoe never waits: the held round is voided in its place (a new shoe mid-round voids it), what
    waited is applied in order (the next coup opens, locks and takes its cards, and is voided in turn by
    the new shoe), then the new shoe starts. So the input that started the new shoe is the one that
    loaded it, and a machine rebuilt from it (as after a restart: the journal replays from the input that
    started a shoe) equals the original. Before, the new shoe waited too and was applied only when the
    supervisor resolved the held round: that command became the shoe's start, and a rebuild from it
    missed the new shoe's own frames."""
    from tablesense.daemon.table import Channel, TableMachine
    from tablesense.daemon.table.machine import Phase

    d = _locked()
    d.cards(["5H", "7C", "5D", "QS"])
    d.feed(SpotChanged(SHOE, d.seq(SHOE), "B1", SpotState.PLACED, 5))  # wrong device: holds
    d.button(Button.NO_MORE_BETS)
    d.cards(["9H", "2C"])
    loaded = len(d.inputs)
    d.status(ShoeStatusKind.NEW_SHOE)
    assert d.machine.snapshot()["shoe"] == 2 and "waiting" not in d.machine.snapshot()
    assert d.machine.phase is not Phase.DEALING
    voided = [r for r in d.results() if r.void]
    assert [(r.shoe, r.round) for r in voided] == [(1, 1), (1, 2)]
    d.bet("B1", 1000)
    d.bet("PP1", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards(["8H", "7D", "8D", "KC"])
    original = TableMachine(d.config)
    per_input = [original.handle(inp) for inp in d.inputs]  # no commands here
    start = next(i for i, out in enumerate(per_input)
                 if any(getattr(e.message, "shoe", None) == 2 for e in out))
    assert start == loaded
    machine = TableMachine(d.config, shoe=2)
    machine.seed_pads([i.event for i in d.inputs[:start] if isinstance(i.event, SpotChanged)])
    emits = [e for i, inp in enumerate(d.inputs[start:]) for e in machine.handle(inp) if i > 0]
    mine, theirs = machine.snapshot(), d.machine.snapshot()
    for key in ("phase", "shoe", "round", "remaining", "counts", "slots", "settled", "public", "record"):
        assert mine[key] == theirs[key], key
    keep = (Channel.SETTLEMENTS, Channel.RESULTS, Channel.FLOOR_ROUNDS, Channel.ALARMS)
    after = [e for out in per_input[start + 1:] for e in out]
    assert encode_all(e for e in emits if e.channel in keep) == encode_all(e for e in after
                                                                         if e.channel in keep)
    new_shoe = [(s.shoe, s.round, s.spot, s.net) for s in d.settlements() if s.shoe == 2]
    assert new_shoe == [(2, 1, "PP1", 6000)]  # 8H 8D: a coloured pair, 12 to 1
    _replays_alike(d)
