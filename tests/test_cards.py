"""Cards and shoes: parsing and printing, colours, baccarat values, shoe composition."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tablesense.daemon.rules.cards import (
    ALL_CARDS,
    Card,
    CardNotInShoe,
    Colour,
    InvalidCard,
    Rank,
    ShoeComposition,
    Suit,
    parse_cards,
)


@pytest.mark.parametrize(("text", "rank", "suit"), [
    ("QH", Rank.QUEEN, Suit.HEARTS),
    ("qh", Rank.QUEEN, Suit.HEARTS),
    ("Qh", Rank.QUEEN, Suit.HEARTS),
    ("Q♥", Rank.QUEEN, Suit.HEARTS),
    ("10D", Rank.TEN, Suit.DIAMONDS),
    ("TD", Rank.TEN, Suit.DIAMONDS),
    ("td", Rank.TEN, Suit.DIAMONDS),
    ("10♦", Rank.TEN, Suit.DIAMONDS),
    ("AS", Rank.ACE, Suit.SPADES),
    ("A♠", Rank.ACE, Suit.SPADES),
    ("2C", Rank.TWO, Suit.CLUBS),
    ("9♣", Rank.NINE, Suit.CLUBS),
    ("JS", Rank.JACK, Suit.SPADES),
    ("KC", Rank.KING, Suit.CLUBS),
    (" 7H ", Rank.SEVEN, Suit.HEARTS),
])
def test_parse(text: str, rank: Rank, suit: Suit) -> None:
    assert Card.parse(text) == Card(rank, suit)


@pytest.mark.parametrize(("card", "printed", "pretty"), [
    (Card(Rank.QUEEN, Suit.HEARTS), "QH", "Q♥"),
    (Card(Rank.TEN, Suit.DIAMONDS), "10D", "10♦"),
    (Card(Rank.ACE, Suit.SPADES), "AS", "A♠"),
    (Card(Rank.KING, Suit.CLUBS), "KC", "K♣"),
])
def test_print(card: Card, printed: str, pretty: str) -> None:
    assert str(card) == printed
    assert card.pretty == pretty
    assert repr(card) == f"Card({printed})"


@pytest.mark.parametrize("text", ["", "Q", "1H", "11H", "QX", "ZH", "10", "100D", "QHH", "♥Q", "0S"])
def test_parse_rejects_non_cards_with_one_line(text: str) -> None:
    with pytest.raises(InvalidCard) as info:
        Card.parse(text)
    assert "\n" not in str(info.value)
    assert repr(text) in str(info.value)


def test_parse_rejects_non_text() -> None:
    with pytest.raises(InvalidCard):
        Card.parse(12)  # type: ignore[arg-type]


def test_parse_cards_stops_at_first_bad_card() -> None:
    assert parse_cards(["QH", "TD"]) == [Card(Rank.QUEEN, Suit.HEARTS), Card(Rank.TEN, Suit.DIAMONDS)]
    with pytest.raises(InvalidCard, match="XX"):
        parse_cards(["QH", "XX", "TD"])


@given(st.sampled_from(ALL_CARDS))
def test_print_parse_round_trip(card: Card) -> None:
    assert Card.parse(str(card)) == card
    assert Card.parse(card.pretty) == card
    assert Card.parse(str(card).lower()) == card


def test_colours() -> None:
    assert Suit.HEARTS.colour is Colour.RED and Suit.DIAMONDS.colour is Colour.RED
    assert Suit.SPADES.colour is Colour.BLACK and Suit.CLUBS.colour is Colour.BLACK
    assert Card.parse("QH").colour is Colour.RED


def test_baccarat_and_blackjack_values() -> None:
    expected = {Rank.ACE: 1, Rank.TWO: 2, Rank.NINE: 9, Rank.TEN: 0, Rank.JACK: 0, Rank.QUEEN: 0,
                Rank.KING: 0}
    for rank, value in expected.items():
        assert rank.baccarat_value == value
    assert [r.blackjack_value for r in (Rank.ACE, Rank.NINE, Rank.TEN, Rank.KING)] == [1, 9, 10, 10]


def test_all_cards_are_52_distinct_in_index_order() -> None:
    assert len(set(ALL_CARDS)) == 52
    assert [c.index for c in ALL_CARDS] == list(range(52))


@pytest.mark.parametrize("decks", range(1, 9))
def test_full_shoe_composition(decks: int) -> None:
    shoe = ShoeComposition(decks)
    assert shoe.size == shoe.remaining == 52 * decks
    assert shoe.dealt == 0 and shoe.penetration == 0.0
    assert all(n == decks for _, n in shoe.counts())
    assert all(shoe.count_rank(r) == 4 * decks for r in Rank)
    assert sum(shoe.count_rank(r) for r in (Rank.TEN, Rank.JACK, Rank.QUEEN, Rank.KING)) == 16 * decks


def test_shoe_take_and_put_back() -> None:
    shoe = ShoeComposition(2)
    qh = Card.parse("QH")
    shoe.take(qh)
    assert shoe.count(qh) == 1 and shoe.remaining == 103 and shoe.dealt == 1
    assert shoe.count_rank(Rank.QUEEN) == 7
    shoe.take(qh)
    assert not shoe.can_hold(qh)
    with pytest.raises(CardNotInShoe) as info:
        shoe.take(qh)
    assert "QH" in str(info.value) and "2-deck" in str(info.value)
    assert shoe.count(qh) == 0 and shoe.remaining == 102  # unchanged by the failed take
    shoe.put_back(qh)
    assert shoe.count(qh) == 1
    shoe.put_back(qh)
    with pytest.raises(ValueError, match="cannot hold another"):
        shoe.put_back(qh)


def test_shoe_copy_is_independent() -> None:
    shoe = ShoeComposition(1)
    other = shoe.copy()
    other.take(Card.parse("AS"))
    assert shoe.count(Card.parse("AS")) == 1 and other.count(Card.parse("AS")) == 0
    assert shoe.remaining == 52 and other.remaining == 51


@pytest.mark.parametrize("decks", [0, 9, -1, True, 2.0, "8"])
def test_shoe_rejects_bad_deck_counts(decks: object) -> None:
    with pytest.raises(ValueError, match="1 to 8"):
        ShoeComposition(decks)  # type: ignore[arg-type]


def test_one_deck_shoe_empties_exactly() -> None:
    shoe = ShoeComposition(1)
    for card in ALL_CARDS:
        shoe.take(card)
    assert shoe.remaining == 0 and shoe.penetration == 1.0
    with pytest.raises(CardNotInShoe):
        shoe.take(ALL_CARDS[0])
