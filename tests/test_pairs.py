"""Pairs: same rank by face value (§ 627c.1(b)), pair grades (§ 627c.1(e)), Perfect Pairs paytables."""

from __future__ import annotations

from itertools import product
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tablesense.daemon.rules.cards import ALL_CARDS, Card, ShoeComposition
from tablesense.daemon.rules.money import Odds
from tablesense.daemon.rules.pairs import (
    BACCARAT_PERFECT_PAIRS,
    BLACKJACK_PERFECT_PAIRS,
    PairKind,
    PaytableNotAllowed,
    classify_pair,
    is_pair,
    lookup_paytable,
)


def c(text: str) -> Card:
    return Card.parse(text)


@pytest.mark.parametrize(("a", "b", "kind"), [
    ("JS", "JS", PairKind.PERFECT),    # § 627c.1(b) example: two jacks
    ("4H", "4H", PairKind.PERFECT),    # § 627c.1(b) example: two 4s
    ("4H", "4D", PairKind.COLORED),
    ("4S", "4C", PairKind.COLORED),
    ("4H", "4S", PairKind.MIXED),
    ("QD", "QC", PairKind.MIXED),
    ("AS", "AS", PairKind.PERFECT),
    ("10H", "TH", PairKind.PERFECT),
])
def test_pair_grades(a: str, b: str, kind: PairKind) -> None:
    assert classify_pair(c(a), c(b)) is kind
    assert is_pair(c(a), c(b))


@pytest.mark.parametrize(("a", "b"), [("JS", "QS"), ("10H", "KH"), ("TH", "JH"), ("QS", "KS"), ("AS", "2S"),
                                      ("9D", "10D")])
def test_equal_baccarat_value_is_not_a_pair(a: str, b: str) -> None:
    assert classify_pair(c(a), c(b)) is None
    assert not is_pair(c(a), c(b))


@given(st.sampled_from(ALL_CARDS), st.sampled_from(ALL_CARDS))
def test_pair_classification_is_symmetric(a: Card, b: Card) -> None:
    assert classify_pair(a, b) == classify_pair(b, a)
    assert is_pair(a, b) == is_pair(b, a) == (classify_pair(a, b) is not None)


@pytest.mark.parametrize(("name", "perfect", "colored", "mixed"), [
    ("A", 25, 12, 6), ("B", 30, 10, 5), ("C", 25, 15, 5), ("25-12-5", 25, 12, 5),
    ("25-12-6", 25, 12, 6), ("30-10-5", 30, 10, 5), ("25-15-5", 25, 15, 5),
])
def test_baccarat_perfect_pairs_paytables(name: str, perfect: int, colored: int, mixed: int) -> None:
    pt = BACCARAT_PERFECT_PAIRS[name]
    assert pt.odds(PairKind.PERFECT) == Odds(perfect)
    assert pt.odds(PairKind.COLORED) == Odds(colored)
    assert pt.odds(PairKind.MIXED) == Odds(mixed)
    assert pt.label == f"{perfect}-{colored}-{mixed}"
    assert pt.source


@pytest.mark.parametrize(("name", "perfect", "colored", "mixed"), [
    ("25-12-6", 25, 12, 6), ("30-10-5", 30, 10, 5), ("25-12-5", 25, 12, 5), ("25-15-5", 25, 15, 5),
])
def test_blackjack_perfect_pairs_paytables(name: str, perfect: int, colored: int, mixed: int) -> None:
    pt = BLACKJACK_PERFECT_PAIRS[name]
    assert (pt.perfect, pt.colored, pt.mixed) == (Odds(perfect), Odds(colored), Odds(mixed))


def test_25_12_5_needs_8_decks() -> None:
    assert lookup_paytable(BACCARAT_PERFECT_PAIRS, "25-12-5", 8, "perfect_pairs").name == "25-12-5"
    for decks in (1, 6, 7):
        with pytest.raises(PaytableNotAllowed, match="8 decks only") as info:
            lookup_paytable(BACCARAT_PERFECT_PAIRS, "25-12-5", decks, "perfect_pairs")
        assert "\n" not in str(info.value)


def test_lookup_by_letter_any_case_and_unknown() -> None:
    assert lookup_paytable(BACCARAT_PERFECT_PAIRS, "b", 6, "perfect_pairs").name == "B"
    with pytest.raises(PaytableNotAllowed, match="unknown paytable 'Z'"):
        lookup_paytable(BACCARAT_PERFECT_PAIRS, "Z", 8, "perfect_pairs")


@pytest.mark.parametrize("decks", range(1, 9))
def test_pair_counts_match_closed_forms(decks: int) -> None:
    """Enumerate every unordered two-card draw of the shoe through classify_pair and compare with the
    closed forms of rules.md §4.4: perfect 52·C(n,2), colored 26·n², mixed 52·n², base C(52n,2)."""
    counts = dict(ShoeComposition(decks).counts())
    tally = dict.fromkeys([*PairKind, None], 0)
    for a, b in product(ALL_CARDS, repeat=2):
        ordered = counts[a] * (counts[b] - (a == b))
        tally[classify_pair(a, b)] += ordered
    assert all(v % 2 == 0 for v in tally.values())
    n = decks
    assert tally[PairKind.PERFECT] // 2 == 52 * comb(n, 2)
    assert tally[PairKind.COLORED] // 2 == 26 * n * n
    assert tally[PairKind.MIXED] // 2 == 52 * n * n
    assert sum(tally.values()) // 2 == comb(52 * n, 2)
    if decks == 8:  # WoO's 8-deck table: 1,456 / 1,664 / 3,328 / 79,872 of 86,320
        assert [tally[k] // 2 for k in (*PairKind, None)] == [1456, 1664, 3328, 79872]
