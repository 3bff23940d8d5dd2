"""Baccarat: the deal (§ 627a.8), every third-card cell (§ 631a.11), and the round's facts."""

from __future__ import annotations

import pytest

from tablesense.daemon.rules.baccarat import (
    Coup,
    banker_draws,
    coup_from_cards,
    next_card_hand,
    player_draws,
    point_count,
)
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.errors import IncompleteRound, RulesError, TooManyCards
from tablesense.daemon.rules.settlement import Hand

P, B = Hand.PLAYER, Hand.BANKER


def cards(text: str) -> list[Card]:
    return [Card.parse(t) for t in text.split()]


def of_value(v: int, suit: str = "C") -> Card:
    """A card of baccarat value v (0 is a king)."""
    return Card.parse(("K" if v == 0 else "A" if v == 1 else str(v)) + suit)


def two_cards(total: int, suit: str) -> tuple[Card, Card]:
    """Two cards with the given two-card point count (never a pair of equal ranks unless needed)."""
    return of_value(0, suit), of_value(total, suit) if total else Card.parse("10" + suit)


# rules.md §1.5, § 631a.11 Table 1: Banker total -> draw (D) or stand (S) by the Player's third card 0..9.
TABLE_1 = {
    0: "DDDDDDDDDD",
    1: "DDDDDDDDDD",
    2: "DDDDDDDDDD",
    3: "DDDDDDDDSD",
    4: "SSDDDDDDSS",
    5: "SSSSDDDDSS",
    6: "SSSSSSDDSS",
    7: "SSSSSSSSSS",
}


def test_point_count() -> None:
    assert point_count(cards("9S 8D")) == 7
    assert point_count(cards("KS QD JH")) == 0
    assert point_count(cards("AS 10D")) == 1
    assert point_count(cards("5S 5D 9H")) == 9
    assert point_count([]) == 0


def test_initial_deal_order() -> None:
    """§ 627a.8(c): card 1 to the Player, 2 to the Banker, 3 to the Player, 4 to the Banker."""
    dealt = cards("2S 3D 4H 5C")
    assert [next_card_hand(dealt[:i]) for i in range(4)] == [P, B, P, B]


@pytest.mark.parametrize("banker_total", range(8))
@pytest.mark.parametrize("third_value", range(10))
def test_third_card_table_cell(banker_total: int, third_value: int) -> None:
    """Every cell of § 631a.11 Table 1 (Banker 3-6), plus Banker 0-2 (draws) and 7 (stands), checked for
    every Player total that draws (0-5)."""
    draws = TABLE_1[banker_total][third_value] == "D"
    assert banker_draws(banker_total, third_value) is draws
    for player_total in range(6):
        p1, p2 = two_cards(player_total, "S")
        b1, b2 = two_cards(banker_total, "D")
        p3 = of_value(third_value, "H")
        first_four = [p1, b1, p2, b2]
        assert next_card_hand(first_four) is P
        five = [*first_four, p3]
        assert next_card_hand(five) is (B if draws else None)
        if draws:
            b3 = Card.parse("AC")
            coup = coup_from_cards([*five, b3])
            assert coup.banker_cards == (b1, b2, b3)
            assert coup.banker_points == (banker_total + 1) % 10
            with pytest.raises(IncompleteRound, match="6th card"):
                coup_from_cards(five)
        else:
            coup = coup_from_cards(five)
            assert coup.banker_cards == (b1, b2)
            assert coup.banker_points == banker_total
            with pytest.raises(TooManyCards):
                coup_from_cards([*five, Card.parse("AC")])
        assert coup.player_cards == (p1, p2, p3)
        assert coup.player_points == (player_total + third_value) % 10
        assert not coup.player_natural and not coup.banker_natural


@pytest.mark.parametrize("player_total", [6, 7])
@pytest.mark.parametrize("banker_total", range(8))
def test_player_stands_on_6_and_7_banker_draws_on_0_to_5(player_total: int, banker_total: int) -> None:
    assert player_draws(player_total) is False
    banker_draws_card = banker_total <= 5
    assert banker_draws(banker_total, None) is banker_draws_card
    p1, p2 = two_cards(player_total, "S")
    b1, b2 = two_cards(banker_total, "D")
    four = [p1, b1, p2, b2]
    assert next_card_hand(four) is (B if banker_draws_card else None)
    if banker_draws_card:
        b3 = Card.parse("9H")
        coup = coup_from_cards([*four, b3])
        assert coup.player_cards == (p1, p2) and coup.banker_cards == (b1, b2, b3)
        assert coup.banker_points == (banker_total + 9) % 10
        assert next_card_hand([*four, b3]) is None
        with pytest.raises(IncompleteRound, match="5th card"):
            coup_from_cards(four)
    else:
        coup = coup_from_cards(four)
        assert coup.player_cards == (p1, p2) and coup.banker_cards == (b1, b2)
        with pytest.raises(TooManyCards):
            next_card_hand([*four, Card.parse("9H")])


@pytest.mark.parametrize("player_total", range(6))
def test_player_draws_on_0_to_5(player_total: int) -> None:
    assert player_draws(player_total) is True


@pytest.mark.parametrize(("player_total", "banker_total"),
                         [(p, b) for p in range(10) for b in range(10) if p >= 8 or b >= 8])
def test_a_natural_stops_the_deal(player_total: int, banker_total: int) -> None:
    """§ 631a.11: if either hand is a Natural (8 or 9 on two cards), neither hand gets another card."""
    p1, p2 = two_cards(player_total, "S")
    b1, b2 = two_cards(banker_total, "D")
    four = [p1, b1, p2, b2]
    assert next_card_hand(four) is None
    coup = coup_from_cards(four)
    assert coup.player_natural is (player_total >= 8)
    assert coup.banker_natural is (banker_total >= 8)
    assert (coup.player_points, coup.banker_points) == (player_total, banker_total)
    expected = P if player_total > banker_total else B if banker_total > player_total else None
    assert coup.winner is expected
    with pytest.raises(TooManyCards, match="uses 4"):
        coup_from_cards([*four, Card.parse("AS")])


def test_draw_rules_reject_impossible_totals() -> None:
    for bad in (-1, 8, 9):
        with pytest.raises(ValueError):
            player_draws(bad)
        with pytest.raises(ValueError):
            banker_draws(bad, None)
    with pytest.raises(ValueError):
        banker_draws(3, 10)


@pytest.mark.parametrize("n", range(4))
def test_too_few_cards(n: int) -> None:
    with pytest.raises(IncompleteRound, match="at least 4 cards") as info:
        coup_from_cards(cards("2S 3D 4H")[:n])
    assert isinstance(info.value, RulesError) and "\n" not in str(info.value)


def test_coup_rejects_non_cards() -> None:
    with pytest.raises(TypeError):
        coup_from_cards(["2S", "3D", "4H", "5C"])  # type: ignore[list-item]


def test_dragon_7() -> None:
    """§ 627a.1: the Banker wins with a three-card 7."""
    coup = coup_from_cards(cards("2S KD 3H 3D KC 4S"))  # P 5 draws K -> 5; B 3 draws on 0: 3+4 = 7
    assert (coup.player_points, coup.banker_points) == (5, 7)
    assert coup.winner is B and coup.is_dragon_7 and not coup.is_panda_8
    # a two-card Banker 7 is not a Dragon 7; nor is a three-card 7 that does not win
    two_card_7 = coup_from_cards(cards("2S 3D 4H 4C"))  # P 6 and B 7 both stand
    assert two_card_7.winner is B and not two_card_7.is_dragon_7
    tie7 = coup_from_cards(cards("3S KD 4H 3D 4C"))  # P 7 stands; B 3 draws 4 -> 7: a tie
    assert tie7.winner is None and tie7.banker_points == 7 and len(tie7.banker_cards) == 3
    assert not tie7.is_dragon_7


def test_panda_8() -> None:
    """§ 627a.1: the Player wins with a three-card 8."""
    coup = coup_from_cards(cards("AS KD 2H 6D 5H"))  # P 3 draws 5 -> 8; B 6 stands on 5
    assert (coup.player_points, coup.banker_points) == (8, 6)
    assert coup.winner is P and coup.is_panda_8 and not coup.is_dragon_7
    natural8 = coup_from_cards(cards("AS KD 7H 6D"))  # a two-card 8 is a Natural, not a Panda 8
    assert natural8.player_natural and not natural8.is_panda_8


def test_pair_flags_use_rank_not_value() -> None:
    coup = coup_from_cards(cards("QH JS QS 8D"))  # P Q-Q pair (§ 631a.8(a)(7)(i): two queens)
    assert coup.player_pair and not coup.banker_pair
    coup = coup_from_cards(cards("9H JS KH KD"))  # B J-K both worth 0 but not a pair (§ 627c.1(b))
    assert not coup.player_pair and not coup.banker_pair
    coup = coup_from_cards(cards("2S 5D 2H 5C KH KS"))  # both hands paired
    assert coup.player_pair and coup.banker_pair


def test_coup_accessors_and_to_dict() -> None:
    coup = coup_from_cards(cards("6D 4D 6H 9S 2S 4S"))  # the recorded Evolution round
    assert isinstance(coup, Coup)
    assert coup.cards == tuple(cards("6D 4D 6H 9S 2S 4S"))
    assert coup.hand_cards(P) == tuple(cards("6D 6H 2S"))
    assert coup.points(B) == 7 and not coup.natural(B) and not coup.is_tie
    assert coup.to_dict() == {
        "player": ["6D", "6H", "2S"], "banker": ["4D", "9S", "4S"],
        "player_points": 4, "banker_points": 7, "winner": "banker",
        "natural": False, "player_natural": False, "banker_natural": False,
        "player_pair": True, "banker_pair": False, "dragon_7": True, "panda_8": False,
    }
    tie = coup_from_cards(cards("9S 9D KH KC"))
    assert tie.is_tie and tie.result == "tie" and tie.to_dict()["natural"] is True


def test_next_card_hand_for_a_player_draw_then_banker() -> None:
    dealt = cards("2S KD 3H 3D KC 4S")
    assert [next_card_hand(dealt[:i]) for i in range(7)] == [P, B, P, B, P, B, None]
