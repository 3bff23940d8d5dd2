"""Blackjack Perfect Pairs (Perfect Pairs rule sheet; rules.md §2 and §4.6): settlement and exact analysis."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tablesense.daemon.rules.blackjack import (
    INELIGIBLE,
    NO_PAIR,
    BlackjackRules,
    analyze_blackjack,
    grade_perfect_pairs,
    settle_blackjack,
)
from tablesense.daemon.rules.cards import ALL_CARDS, Card, CardNotInShoe
from tablesense.daemon.rules.errors import IncompleteRound, RulesError, TooManyCards, WagerNotOffered
from tablesense.daemon.rules.money import Odds
from tablesense.daemon.rules.pairs import BLACKJACK_PERFECT_PAIRS, PaytableNotAllowed
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome, Wager


def c(text: str) -> Card:
    return Card.parse(text)


def hands(**by_position: str) -> dict[str, list[Card]]:
    """``hands(b3="QH QD", dealer="9S 7C")`` -> {"3": [QH, QD], "dealer": [9S, 7C]}."""
    return {k.removeprefix("b"): [c(t) for t in v.split()] for k, v in by_position.items()}


def pp(spot: str, stake: int = 1000) -> Wager:
    return Wager(spot, Bet.PERFECT_PAIRS, stake)


def bj(spot: str, stake: int = 1000) -> Wager:
    return Wager(spot, Bet.BLACKJACK, stake)


# --- the published / computed grid (rules.md §4.6): house edge in percent to 4 decimals -------------

GRID = {  # decks: (P(perfect), P(colored), P(mixed), {schedule: edge %})
    1: (0.0, 0.019608, 0.039216, {"25-12-6": 47.0588, "30-10-5": 54.9020, "25-12-5": 50.9804,
                                  "25-15-5": 45.0980}),
    2: (0.009709, 0.019417, 0.038835, {"25-12-6": 22.3301, "30-10-5": 25.2427, "25-12-5": 26.2136,
                                       "25-15-5": 20.3883}),
    4: (0.014493, 0.019324, 0.038647, {"25-12-6": 10.1449, "30-10-5": 10.6280, "25-12-5": 14.0097,
                                       "25-15-5": 8.2126}),
    5: (0.015444, 0.019305, 0.038610, {"25-12-6": 7.7220, "30-10-5": 7.7220, "25-12-5": 11.5830,
                                       "25-15-5": 5.7915}),
    6: (0.016077, 0.019293, 0.038585, {"25-12-6": 6.1093, "30-10-5": 5.7878, "25-12-5": 9.9678,
                                       "25-15-5": 4.1801}),
    8: (0.016867, 0.019277, 0.038554, {"25-12-6": 4.0964, "30-10-5": 3.3735, "25-12-5": 7.9518,
                                       "25-15-5": 2.1687}),
}


@pytest.mark.parametrize("decks", sorted(GRID))
@pytest.mark.parametrize("schedule", ["25-12-6", "30-10-5", "25-12-5", "25-15-5"])
def test_house_edge_grid(decks: int, schedule: str) -> None:
    (analysis,) = analyze_blackjack(BlackjackRules.from_names(decks, {"perfect_pairs": schedule}))
    assert analysis.bet is Bet.PERFECT_PAIRS and analysis.hand is None and analysis.paytable == schedule
    assert round(float(analysis.house_edge) * 100, 4) == GRID[decks][3][schedule]
    probs = {o.category: o.probability for o in analysis.outcomes}
    perfect, colored, mixed, _ = GRID[decks]
    assert round(float(probs["perfect_pair"]), 6) == perfect
    assert round(float(probs["colored_pair"]), 6) == colored
    assert round(float(probs["mixed_pair"]), 6) == mixed
    assert sum(probs.values()) == 1


@pytest.mark.parametrize(("decks", "edge"), [(1, "47.06"), (2, "22.33"), (4, "10.14"), (6, "6.11"),
                                             (8, "4.10")])
def test_issue_figures_25_12_6(decks: int, edge: str) -> None:
    (analysis,) = analyze_blackjack(BlackjackRules(decks))
    assert f"{float(analysis.house_edge) * 100:.2f}" == edge


@pytest.mark.parametrize("decks", range(1, 9))
def test_enumeration_matches_closed_form_counts(decks: int) -> None:
    """An independent oracle (rules.md §4.6): perfect 52·C(n,2), colored 26·n², mixed 52·n² of C(52n,2)."""
    (analysis,) = analyze_blackjack(BlackjackRules(decks))
    base = comb(52 * decks, 2)
    expected = {"perfect_pair": Fraction(52 * comb(decks, 2), base),
                "colored_pair": Fraction(26 * decks ** 2, base),
                "mixed_pair": Fraction(52 * decks ** 2, base)}
    expected[NO_PAIR] = 1 - sum(expected.values())
    assert {o.category: o.probability for o in analysis.outcomes} == expected
    assert [o.category for o in analysis.outcomes] == ["perfect_pair", "colored_pair", "mixed_pair", NO_PAIR]


def test_wizard_of_odds_8_deck_counts() -> None:
    (analysis,) = analyze_blackjack(BlackjackRules(8))
    counts = {o.category: o.probability * 86_320 for o in analysis.outcomes}
    assert counts == {"perfect_pair": 1456, "colored_pair": 1664, "mixed_pair": 3328, NO_PAIR: 79_872}
    assert analysis.expected_return == Fraction(-3536, 86_320)  # WoO table A: -0.040964
    assert analysis.to_dict()["expected_return"] == -0.040964


# --- settlement -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("schedule", "perfect", "colored", "mixed"), [
    ("25-12-6", 25, 12, 6), ("30-10-5", 30, 10, 5), ("25-12-5", 25, 12, 5), ("25-15-5", 25, 15, 5)])
def test_every_schedule_line(schedule: str, perfect: int, colored: int, mixed: int) -> None:
    rules = BlackjackRules.from_names(6, {"perfect_pairs": schedule})
    round_hands = hands(b1="QH QH", b2="7S 7C", b3="4D 4S", b4="KS 10S", dealer="9S 9S")
    result = settle_blackjack(round_hands, [pp("1", 500), pp("2", 500), pp("3", 500), pp("4", 500)], rules)
    assert [(s.wager.spot, s.outcome, s.category, s.odds, s.net) for s in result] == [
        ("1", Outcome.WIN, "perfect_pair", Odds(perfect), 500 * perfect),
        ("2", Outcome.WIN, "colored_pair", Odds(colored), 500 * colored),
        ("3", Outcome.WIN, "mixed_pair", Odds(mixed), 500 * mixed),
        ("4", Outcome.LOSE, NO_PAIR, None, -500),
    ]


def test_default_schedule_is_25_12_6() -> None:
    assert BlackjackRules(6).perfect_pairs.label == "25-12-6"
    assert BlackjackRules.from_names(6).paytables == {"perfect_pairs": "25-12-6"}


@pytest.mark.parametrize("two", ["JH QH", "10S KS", "AS 2S", "9D 10D"])
def test_same_value_is_not_a_pair(two: str) -> None:
    """Only identical face value pairs (Perfect Pairs rule sheet, "face value"; § 627c.1(b)); a K-10 split
    is no pair."""
    (s,) = settle_blackjack(hands(b5=two), [pp("5")], BlackjackRules(8))
    assert (s.outcome, s.category, s.net) == (Outcome.LOSE, NO_PAIR, -1000)


def test_dealer_cards_do_not_matter() -> None:
    rules = BlackjackRules(2)
    a = settle_blackjack(hands(b1="8H 8D"), [pp("1")], rules)
    b = settle_blackjack(hands(b1="8H 8D", dealer="8S 8C"), [pp("1")], rules)
    assert a == b and a[0].category == "colored_pair" and a[0].net == 12_000


def test_eligibility_needs_a_blackjack_wager_on_the_box_when_main_wagers_are_listed() -> None:
    """Perfect Pairs rule sheet rule 2: Perfect Pairs on a box with a blackjack wager; box 2 has none ->
    returned."""
    wagers = [bj("1"), pp("1", 200), pp("2", 300)]
    result = settle_blackjack(hands(b1="5C 5C", b2="6C 6C"), wagers, BlackjackRules(6))
    assert [(s.wager.spot, s.outcome, s.category, s.net) for s in result] == [
        ("1", Outcome.WIN, "perfect_pair", 5000),
        ("2", Outcome.PUSH, INELIGIBLE, 0),
    ]


def test_without_any_blackjack_wager_every_perfect_pairs_wager_is_eligible() -> None:
    result = settle_blackjack(hands(b2="6C 6C", b7="2H 3H"), [pp("2"), pp("7")], BlackjackRules(6))
    assert [s.outcome for s in result] == [Outcome.WIN, Outcome.LOSE]


def test_blackjack_wager_alone_is_not_settled() -> None:
    assert settle_blackjack(hands(b1="AS KS"), [bj("1")], BlackjackRules(6)) == []


def test_two_wagers_on_one_box_are_settled_separately() -> None:
    result = settle_blackjack(hands(b3="9S 9H"), [pp("3", 100), pp("3", 2500)], BlackjackRules(6))
    assert [s.net for s in result] == [600, 15_000]


@pytest.mark.parametrize("given_hands", [{}, {"4": "QH"}, {"1": "QH QD"}])
def test_box_with_a_wager_but_too_few_cards_is_incomplete(given_hands: dict[str, str]) -> None:
    with pytest.raises(IncompleteRound, match="box 4"):
        settle_blackjack(hands(**{f"b{k}": v for k, v in given_hands.items()}), [pp("4")], BlackjackRules(6))


def test_more_than_two_cards_is_rejected() -> None:
    with pytest.raises(TooManyCards, match="position 1 has 3 cards"):
        settle_blackjack(hands(b1="QH QD 5C"), [pp("1")], BlackjackRules(6))


def test_cards_are_checked_against_the_shoe_including_the_dealer() -> None:
    with pytest.raises(CardNotInShoe, match="AS cannot come out of a 1-deck shoe"):
        settle_blackjack(hands(b1="AS 2C", dealer="AS 3D"), [pp("1")], BlackjackRules(1))
    with pytest.raises(CardNotInShoe):
        settle_blackjack(hands(b1="QH QH", b2="QH 2C"), [pp("1")], BlackjackRules(2))
    assert settle_blackjack(hands(b1="QH QH", b2="QH 2C"), [pp("1")], BlackjackRules(3))[0].net == 25_000


def test_a_perfect_pair_cannot_come_from_one_deck() -> None:
    with pytest.raises(CardNotInShoe):
        settle_blackjack(hands(b1="QH QH"), [pp("1")], BlackjackRules(1))


@pytest.mark.parametrize("wager", [Wager("1", Bet.TIE, 100), Wager("1", Bet.ULTIMATE_PAIRS, 100),
                                   Wager("1", Bet.PERFECT_PAIRS, 100, Hand.PLAYER)])
def test_wagers_blackjack_does_not_offer(wager: Wager) -> None:
    with pytest.raises(WagerNotOffered):
        settle_blackjack(hands(b1="QH QD"), [wager], BlackjackRules(6))


@pytest.mark.parametrize("spot", ["0", "8", "dealer", ""])
def test_wager_spot_must_be_a_box(spot: str) -> None:
    with pytest.raises(RulesError, match="box 1 to 7"):
        settle_blackjack(hands(b1="QH QD"), [pp(spot)], BlackjackRules(6))


def test_unknown_position_in_hands() -> None:
    with pytest.raises(RulesError, match="unknown position '9'"):
        settle_blackjack({"9": [c("QH"), c("QD")]}, [], BlackjackRules(6))


@pytest.mark.parametrize("decks", [0, 9, -1])
def test_deck_count_out_of_range(decks: int) -> None:
    with pytest.raises(RulesError, match="decks must be an integer from 1 to 8"):
        BlackjackRules.from_names(decks)
    with pytest.raises(RulesError):
        BlackjackRules(decks)


def test_unknown_schedule_and_foreign_paytables() -> None:
    with pytest.raises(PaytableNotAllowed, match="unknown paytable 'A'"):
        BlackjackRules.from_names(6, {"perfect_pairs": "A"})
    with pytest.raises(WagerNotOffered, match="no paytable for 'ultimate_pairs'"):
        BlackjackRules.from_names(6, {"ultimate_pairs": "F"})


def test_offers() -> None:
    rules = BlackjackRules(6)
    assert {b for b in Bet if rules.offers(b)} == {Bet.PERFECT_PAIRS, Bet.BLACKJACK}


# --- properties ------------------------------------------------------------------------------------

cards = st.sampled_from(ALL_CARDS)


@given(cards, cards, st.sampled_from(sorted(BLACKJACK_PERFECT_PAIRS)))
def test_grade_is_symmetric(a: Card, b: Card, schedule: str) -> None:
    table = BLACKJACK_PERFECT_PAIRS[schedule]
    assert grade_perfect_pairs(a, b, table) == grade_perfect_pairs(b, a, table)


@given(cards, cards, st.integers(min_value=1, max_value=10**9),
       st.sampled_from(sorted(BLACKJACK_PERFECT_PAIRS)))
def test_net_is_exact_integer(a: Card, b: Card, stake: int, schedule: str) -> None:
    rules = BlackjackRules.from_names(8, {"perfect_pairs": schedule})
    (s,) = settle_blackjack({"1": [a, b]}, [pp("1", stake)], rules)
    assert type(s.net) is int
    if a.rank == b.rank:
        assert s.outcome is Outcome.WIN and s.odds is not None and s.net == stake * s.odds.pays
    else:
        assert s.outcome is Outcome.LOSE and s.net == -stake
