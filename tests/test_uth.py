"""UTH Ultimate Pairs (58 Pa. Code § 653b.5): every line of every paytable, and exact odds."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tablesense.daemon.rules.cards import ALL_CARDS, Card, CardNotInShoe, Rank
from tablesense.daemon.rules.errors import IncompleteRound, RulesError, TooManyCards, WagerNotOffered
from tablesense.daemon.rules.money import Odds
from tablesense.daemon.rules.pairs import PaytableNotAllowed
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome, Wager
from tablesense.daemon.rules.uth import (
    INELIGIBLE,
    LOSE,
    ULTIMATE_PAIRS,
    UthRules,
    analyze_uth,
    grade_ultimate_pairs,
    qualifying_lines,
    settle_uth,
)

# 58 Pa. Code § 653b.5(f), transcribed row by row (None = "N/A"):  A      B     C     D     E     F
PAYTABLES_653B5: dict[str, tuple[int | None, ...]] = {
    "aces_with_dealer_aces":    (None, None, None, None, None, 1000),
    "red_aces":                 (None, None, 100, 50, None, None),
    "aces":                     (30, 30, 30, 25, 25, 30),
    "ace_king_suited":          (25, 20, 20, 20, 20, 25),
    "ace_queen_or_jack_suited": (20, 20, 20, 20, 20, 20),
    "ace_king":                 (15, 10, 10, 10, 10, 15),
    "face_pair":                (10, 5, 4, 5, 5, 10),
    "ace_queen_or_jack":        (5, 10, 10, 10, 10, 5),
    "low_pair":                 (3, 5, 4, 5, 5, 3),
}
COLUMN = {name: i for i, name in enumerate("ABCDEF")}

# For each line: player's cards, dealer's cards, and the line it falls back to when N/A.
EXAMPLES: dict[str, tuple[str, str, str | None]] = {
    "aces_with_dealer_aces": ("AS AC", "AH AD", "aces"),
    "red_aces": ("AH AD", "KS 2C", "aces"),
    "aces": ("AS AH", "KS 2C", None),
    "ace_king_suited": ("KD AD", "QS 2C", "ace_king"),
    "ace_queen_or_jack_suited": ("AC QC", "QS 2D", "ace_queen_or_jack"),
    "ace_king": ("AS KH", "QS 2C", None),
    "face_pair": ("JS JD", "QS 2C", None),
    "ace_queen_or_jack": ("JH AC", "QS 2C", None),
    "low_pair": ("10S 10C", "QS 2C", None),
}


def cs(text: str) -> list[Card]:
    return [Card.parse(t) for t in text.split()]


def up(spot: str, stake: int = 1000) -> Wager:
    return Wager(spot, Bet.ULTIMATE_PAIRS, stake)


def expected_pay(line: str, paytable: str) -> tuple[str, int | None]:
    """What § 653b.5(f) pays for a hand whose highest line is ``line``, following N/A fall-backs."""
    pays = PAYTABLES_653B5[line][COLUMN[paytable]]
    while pays is None:
        fallback = EXAMPLES[line][2]
        if fallback is None:
            return LOSE, None
        line = fallback
        pays = PAYTABLES_653B5[line][COLUMN[paytable]]
    return line, pays


def test_paytables_are_the_seed_exactly() -> None:
    for name, table in ULTIMATE_PAIRS.items():
        assert {line: (o.pays if o else None) for line, o in table.odds_by_line} == {
            line: row[COLUMN[name]] for line, row in PAYTABLES_653B5.items()}
        assert all(o is None or o.per == 1 for _, o in table.odds_by_line)
        assert "§ 653b.5(f)" in table.source


@pytest.mark.parametrize("paytable", "ABCDEF")
@pytest.mark.parametrize("line", list(PAYTABLES_653B5))
def test_every_line_of_every_paytable(paytable: str, line: str) -> None:
    player, dealer, _ = EXAMPLES[line]
    category, pays = expected_pay(line, paytable)
    rules = UthRules.from_names(1, {"ultimate_pairs": paytable})
    (s,) = settle_uth({"2": cs(player), "dealer": cs(dealer)}, [up("2", 500)], rules)
    assert s.category == category
    if pays is None:
        assert (s.outcome, s.net) == (Outcome.LOSE, -500)
    else:
        assert (s.outcome, s.odds, s.net) == (Outcome.WIN, Odds(pays), 500 * pays)


def test_only_the_highest_line_pays() -> None:
    """A-K suited also qualifies as A-K; A♥A♦ as A-A; only the first offered line is paid."""
    assert qualifying_lines(cs("AS KS"), None) == ("ace_king_suited", "ace_king")
    assert qualifying_lines(cs("AH AD"), cs("AS AC")) == ("aces_with_dealer_aces", "red_aces", "aces")
    rules = UthRules.from_names(1, {"ultimate_pairs": "A"})
    (s,) = settle_uth({"1": cs("AS KS")}, [up("1", 100)], rules)
    assert (s.category, s.net) == ("ace_king_suited", 2500)


@pytest.mark.parametrize(("paytable", "red", "black"), [("C", 100, 30), ("D", 50, 25), ("A", 30, 30),
                                                          ("B", 30, 30), ("E", 25, 25)])
def test_red_aces_against_black_aces(paytable: str, red: int, black: int) -> None:
    rules = UthRules.from_names(1, {"ultimate_pairs": paytable})
    result = settle_uth({"1": cs("AD AH"), "2": cs("AS AC")}, [up("1", 100), up("2", 100)], rules)
    assert [s.net for s in result] == [100 * red, 100 * black]
    (one_red,) = settle_uth({"3": cs("AH AS")}, [up("3", 100)], rules)  # one red ace is not A♥A♦
    assert one_red.net == 100 * black


def test_paytable_f_uses_the_dealer_cards() -> None:
    rules = UthRules.from_names(1, {"ultimate_pairs": "F"})
    (s,) = settle_uth({"4": cs("AS AC"), "dealer": cs("AD AH")}, [up("4", 100)], rules)
    assert (s.category, s.odds, s.net) == ("aces_with_dealer_aces", Odds(1000), 100_000)
    (s,) = settle_uth({"4": cs("AS AC"), "dealer": cs("AD KH")}, [up("4", 100)], rules)
    assert (s.category, s.net) == ("aces", 3000)


@pytest.mark.parametrize("paytable", "ABCDE")
def test_dealer_aces_pay_nothing_extra_outside_paytable_f(paytable: str) -> None:
    rules = UthRules.from_names(1, {"ultimate_pairs": paytable})
    (s,) = settle_uth({"4": cs("AS AC"), "dealer": cs("AD AH")}, [up("4", 100)], rules)
    assert s.category == "aces"


@pytest.mark.parametrize("player", ["AS AC", "7S 2C"])
def test_paytable_f_without_the_dealer_cards_is_incomplete(player: str) -> None:
    rules = UthRules.from_names(1, {"ultimate_pairs": "F"})
    with pytest.raises(IncompleteRound, match="needs the dealer's two cards"):
        settle_uth({"1": cs(player)}, [up("1")], rules)
    with pytest.raises(IncompleteRound, match="dealer has 1 card"):
        settle_uth({"1": cs(player), "dealer": cs("KD")}, [up("1")], rules)


@pytest.mark.parametrize("player", ["KS QS", "AS 10S", "AH 9H", "7C 2D", "JD 10D", "AS 2C"])
def test_hands_on_no_line_lose(player: str) -> None:
    for paytable in "ABCDEF":
        rules = UthRules.from_names(1, {"ultimate_pairs": paytable})
        (s,) = settle_uth({"6": cs(player), "dealer": cs("3H 4H")}, [up("6", 700)], rules)
        assert (s.outcome, s.category, s.net) == (Outcome.LOSE, LOSE, -700)


def test_eligibility_needs_an_ante_when_antes_are_listed() -> None:
    wagers = [Wager("1", Bet.ANTE, 1000), up("1"), up("2")]
    result = settle_uth({"1": cs("QS QH"), "2": cs("KS KH")}, wagers, UthRules.from_names())
    assert [(s.wager.spot, s.outcome, s.category, s.net) for s in result] == [
        ("1", Outcome.WIN, "face_pair", 10_000), ("2", Outcome.PUSH, INELIGIBLE, 0)]


def test_one_deck_only() -> None:
    with pytest.raises(CardNotInShoe, match="AS is already out"):
        settle_uth({"1": cs("AS KS"), "dealer": cs("AS 2C")}, [up("1")], UthRules.from_names())
    with pytest.raises(RulesError, match="decks must be 1"):
        UthRules.from_names(6)


def test_paytable_names() -> None:
    assert UthRules.from_names(1, {"ultimate_pairs": "f"}).paytable.name == "F"
    assert UthRules.from_names().paytables == {"ultimate_pairs": "A"}
    with pytest.raises(PaytableNotAllowed, match="unknown paytable 'G'"):
        UthRules.from_names(1, {"ultimate_pairs": "G"})
    with pytest.raises(WagerNotOffered, match="no paytable for 'perfect_pairs'"):
        UthRules.from_names(1, {"perfect_pairs": "A"})


@pytest.mark.parametrize("wager", [Wager("1", Bet.PERFECT_PAIRS, 100), Wager("1", Bet.BANKER, 100),
                                   Wager("1", Bet.ULTIMATE_PAIRS, 100, Hand.BANKER),
                                   Wager("dealer", Bet.ULTIMATE_PAIRS, 100)])
def test_wagers_uth_does_not_take(wager: Wager) -> None:
    with pytest.raises(RulesError):
        settle_uth({"1": cs("QS QH")}, [wager], UthRules.from_names())


def test_round_shape_errors() -> None:
    rules = UthRules.from_names()
    with pytest.raises(IncompleteRound, match="spot 3"):
        settle_uth({"3": cs("QS")}, [up("3")], rules)
    with pytest.raises(TooManyCards):
        settle_uth({"3": cs("QS QH 2C")}, [up("3")], rules)
    with pytest.raises(RulesError, match="unknown position 'board'"):
        settle_uth({"board": cs("QS QH 2C")}, [], rules)


# --- exact analysis --------------------------------------------------------------------------------

# Closed-form counts of the 1326 player hands (an oracle independent of the classifier).
COUNTS = {"aces": 6, "ace_king_suited": 4, "ace_queen_or_jack_suited": 8, "ace_king": 12, "face_pair": 18,
          "ace_queen_or_jack": 24, "low_pair": 9 * 6}


@pytest.mark.parametrize("paytable", "ABCDE")
def test_analysis_matches_closed_form(paytable: str) -> None:
    (a,) = analyze_uth(UthRules.from_names(1, {"ultimate_pairs": paytable}))
    counts = dict(COUNTS)
    if PAYTABLES_653B5["red_aces"][COLUMN[paytable]] is not None:
        counts["red_aces"], counts["aces"] = 1, 5
    probs = {o.category: o.probability for o in a.outcomes}
    assert probs == {**{k: Fraction(v, 1326) for k, v in counts.items()},
                     LOSE: Fraction(1326 - sum(counts.values()), 1326)}
    ev = sum(Fraction(PAYTABLES_653B5[k][COLUMN[paytable]] or 0) * v for k, v in counts.items())
    assert a.expected_return == (ev - (1326 - sum(counts.values()))) / 1326
    assert (a.bet, a.hand, a.paytable) == (Bet.ULTIMATE_PAIRS, None, paytable)


def test_analysis_figures() -> None:
    """House edges [computed] documented in docs/rules-blackjack-uth.md."""
    edges = {p: round(float(analyze_uth(UthRules(ULTIMATE_PAIRS[p]))[0].house_edge) * 100, 4)
             for p in "ABCDEF"}
    assert edges == {"A": 8.8989, "B": 4.5249, "C": 4.6757, "D": 4.9020, "E": 6.7873, "F": 8.5406}


def test_paytable_f_closed_form() -> None:
    (a,) = analyze_uth(UthRules.from_names(1, {"ultimate_pairs": "F"}))
    probs = {o.category: o.probability for o in a.outcomes}
    assert probs["aces_with_dealer_aces"] == Fraction(6 * 1, 1326 * 1225)
    assert probs["aces"] == Fraction(6 * 1224, 1326 * 1225)
    assert probs["low_pair"] == Fraction(54, 1326)
    assert sum(probs.values()) == 1


def test_paytable_f_dealer_classes_equal_full_enumeration() -> None:
    """The ace-count classes of analyze_uth give the same weights as grading all 1225 dealer hands.

    Only player hands holding an ace can reach a dealer-dependent line; all others are checked to
    ignore the dealer on a sample."""
    table = ULTIMATE_PAIRS["F"]
    (a,) = analyze_uth(UthRules(table))
    brute: dict[str, int] = {}
    for player in combinations(ALL_CARDS, 2):
        rest = [c for c in ALL_CARDS if c not in player]
        if Rank.ACE not in (player[0].rank, player[1].rank):
            category = grade_ultimate_pairs(player, (rest[0], rest[1]), table)[1]
            brute[category] = brute.get(category, 0) + 1225
            continue
        for dealer in combinations(rest, 2):
            category = grade_ultimate_pairs(player, dealer, table)[1]
            brute[category] = brute.get(category, 0) + 1
    total = 1326 * 1225
    assert {o.category: o.probability for o in a.outcomes} == {
        k: Fraction(v, total) for k, v in brute.items()}


@given(st.sampled_from(ALL_CARDS), st.sampled_from(ALL_CARDS), st.sampled_from(ALL_CARDS),
       st.sampled_from(ALL_CARDS))
def test_non_ace_hands_ignore_the_dealer(a: Card, b: Card, d1: Card, d2: Card) -> None:
    if a.rank is Rank.ACE and b.rank is Rank.ACE:
        return
    assert qualifying_lines((a, b), (d1, d2)) == qualifying_lines((a, b), None)


@given(st.sampled_from(ALL_CARDS), st.sampled_from(ALL_CARDS), st.sampled_from("ABCDEF"))
def test_grade_is_symmetric(a: Card, b: Card, paytable: str) -> None:
    table = ULTIMATE_PAIRS[paytable]
    dealer = (Card.parse("2C"), Card.parse("3C"))
    assert grade_ultimate_pairs((a, b), dealer, table) == grade_ultimate_pairs((b, a), dealer, table)
