"""Cards, ranks, suits and the composition of a shoe.

Ranks follow the face-value definition of the Perfect Pairs rule sheet ("face value" is the
number 2-10 or the type jack, queen, king, ace) and 58 Pa. Code § 627c.1(b): only cards identical in
number or type are of the same rank, so a jack and a queen, or a 10 and a king, are different ranks
even though baccarat counts them all as zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum, IntEnum

__all__ = [
    "ALL_CARDS",
    "Card",
    "CardNotInShoe",
    "Colour",
    "InvalidCard",
    "Rank",
    "ShoeComposition",
    "Suit",
    "parse_cards",
]


class InvalidCard(ValueError):
    """Raised when text cannot be read as a card (e.g. ``"1X"``)."""


class CardNotInShoe(ValueError):
    """Raised when a card is taken that the shoe cannot hold any more (e.g. a ninth A♠ in 8 decks)."""


class Colour(Enum):
    """Card colour: spades and clubs are black, hearts and diamonds red (Perfect Pairs rule sheet,
    definitions)."""

    BLACK = "black"
    RED = "red"


class Suit(Enum):
    """The four suits, with their one-letter code as value."""

    SPADES = "S"
    HEARTS = "H"
    DIAMONDS = "D"
    CLUBS = "C"

    @property
    def colour(self) -> Colour:
        """Red for hearts and diamonds, black for spades and clubs."""
        return Colour.RED if self in (Suit.HEARTS, Suit.DIAMONDS) else Colour.BLACK

    @property
    def symbol(self) -> str:
        """The suit symbol, e.g. ``"♥"``."""
        return _SUIT_SYMBOL[self]


_SUIT_SYMBOL = {Suit.SPADES: "♠", Suit.HEARTS: "♥", Suit.DIAMONDS: "♦", Suit.CLUBS: "♣"}
_SYMBOL_SUIT = {v: k for k, v in _SUIT_SYMBOL.items()} | {"♤": Suit.SPADES, "♡": Suit.HEARTS,
                                                         "♢": Suit.DIAMONDS, "♧": Suit.CLUBS}


class Rank(IntEnum):
    """Card rank by face value: ace = 1 ... king = 13."""

    ACE = 1
    TWO = 2
    THREE = 3
    FOUR = 4
    FIVE = 5
    SIX = 6
    SEVEN = 7
    EIGHT = 8
    NINE = 9
    TEN = 10
    JACK = 11
    QUEEN = 12
    KING = 13

    @property
    def label(self) -> str:
        """Short label: ``A``, ``2`` ... ``10``, ``J``, ``Q``, ``K``."""
        return _RANK_LABEL[self]

    @property
    def baccarat_value(self) -> int:
        """Baccarat point value: ace 1, 2-9 face value, 10/J/Q/K zero (rules.md §1.1, § 631a.6)."""
        return int(self) if self < 10 else 0

    @property
    def blackjack_value(self) -> int:
        """Blackjack value with the ace counted as 1: 10/J/Q/K are 10."""
        return min(int(self), 10)


_RANK_LABEL = {r: ("A" if r == 1 else "J" if r == 11 else "Q" if r == 12 else "K" if r == 13 else str(int(r)))
               for r in Rank}
_LABEL_RANK = {v: k for k, v in _RANK_LABEL.items()} | {"T": Rank.TEN, "1": Rank.ACE}


@dataclass(frozen=True, slots=True, order=True)
class Card:
    """One playing card. Printed as rank label then suit letter (``QH``, ``10D``).

    ``Card.parse`` accepts ``QH``, ``qh``, ``10D``, ``TD``, ``Q♥`` and ``Qh``.
    """

    rank: Rank
    suit: Suit

    @classmethod
    def parse(cls, text: str) -> Card:
        """Read a card from text; raise :class:`InvalidCard` naming the text when it is not a card."""
        if not isinstance(text, str):
            raise InvalidCard(f"not a card: {text!r}")
        t = text.strip()
        if len(t) < 2 or len(t) > 3:
            raise InvalidCard(f"not a card: {text!r}")
        rank_txt, suit_txt = t[:-1].upper(), t[-1]
        suit = _SYMBOL_SUIT.get(suit_txt)
        if suit is None:
            try:
                suit = Suit(suit_txt.upper())
            except ValueError:
                raise InvalidCard(f"not a card: {text!r} (unknown suit {suit_txt!r})") from None
        rank = _LABEL_RANK.get(rank_txt)
        if rank is None or rank_txt == "1":
            raise InvalidCard(f"not a card: {text!r} (unknown rank {rank_txt!r})")
        return cls(rank, suit)

    @property
    def colour(self) -> Colour:
        """The card's colour."""
        return self.suit.colour

    @property
    def index(self) -> int:
        """Position 0..51 in a fixed order (suit-major), used for compact shoe counts."""
        return _SUIT_ORDER[self.suit] * 13 + int(self.rank) - 1

    @property
    def pretty(self) -> str:
        """Rank label and suit symbol, e.g. ``Q♥``."""
        return f"{self.rank.label}{self.suit.symbol}"

    def __str__(self) -> str:
        return _CARD_TEXT[self.rank][self.suit]

    def __repr__(self) -> str:
        return f"Card({self})"


_SUIT_ORDER = {s: i for i, s in enumerate(Suit)}
_CARD_TEXT = {r: {s: f"{r.label}{s.value}" for s in Suit} for r in Rank}
"""Each card's text (rank label, suit letter), made once: cards are printed in every message."""
ALL_CARDS: tuple[Card, ...] = tuple(Card(r, s) for s in Suit for r in Rank)
"""The 52 distinct cards, in :attr:`Card.index` order."""


def parse_cards(texts: Iterable[str]) -> list[Card]:
    """Parse several cards; raise :class:`InvalidCard` on the first that is not a card."""
    return [Card.parse(t) for t in texts]


class ShoeComposition:
    """The cards still in a shoe of ``decks`` standard 52-card decks (1 to 8).

    Counts are kept per distinct card. Taking a card the shoe no longer holds raises
    :class:`CardNotInShoe`; the shoe is unchanged in that case.

    Raises:
        ValueError: ``decks`` outside 1..8.
    """

    __slots__ = ("_counts", "_remaining", "decks")

    MAX_DECKS = 8

    def __init__(self, decks: int) -> None:
        if not isinstance(decks, int) or isinstance(decks, bool) or not 1 <= decks <= self.MAX_DECKS:
            raise ValueError(f"decks must be an integer from 1 to {self.MAX_DECKS}, got {decks!r}")
        self.decks = decks
        self._counts = [decks] * 52
        self._remaining = 52 * decks

    @property
    def size(self) -> int:
        """Cards in the full shoe (52 per deck)."""
        return 52 * self.decks

    @property
    def remaining(self) -> int:
        """Cards left in the shoe."""
        return self._remaining

    @property
    def dealt(self) -> int:
        """Cards taken out so far (dealt, burned or otherwise removed)."""
        return self.size - self._remaining

    @property
    def penetration(self) -> float:
        """Fraction of the shoe taken out, 0.0 to 1.0 (a display figure, not money)."""
        return self.dealt / self.size

    def count(self, card: Card) -> int:
        """How many copies of ``card`` remain."""
        return self._counts[card.index]

    def count_rank(self, rank: Rank) -> int:
        """How many cards of ``rank`` remain, all suits together."""
        return sum(self._counts[_SUIT_ORDER[s] * 13 + int(rank) - 1] for s in Suit)

    def can_hold(self, card: Card) -> bool:
        """True when at least one copy of ``card`` remains."""
        return self._counts[card.index] > 0

    def take(self, card: Card) -> None:
        """Remove one copy of ``card``; raise :class:`CardNotInShoe` if none is left."""
        i = card.index
        if self._counts[i] <= 0:
            raise CardNotInShoe(
                f"{card} cannot come out of a {self.decks}-deck shoe: all {self.decks} already out")
        self._counts[i] -= 1
        self._remaining -= 1

    def put_back(self, card: Card) -> None:
        """Return one copy of ``card``; raise ``ValueError`` if the shoe would hold more than it can."""
        i = card.index
        if self._counts[i] >= self.decks:
            raise ValueError(f"{card}: a {self.decks}-deck shoe cannot hold another")
        self._counts[i] += 1
        self._remaining += 1

    def copy(self) -> ShoeComposition:
        """An independent copy."""
        other = ShoeComposition(self.decks)
        other._counts = list(self._counts)
        other._remaining = self._remaining
        return other

    def counts(self) -> Iterator[tuple[Card, int]]:
        """Each distinct card with the number remaining, in :data:`ALL_CARDS` order."""
        return zip(ALL_CARDS, self._counts, strict=True)

    def __repr__(self) -> str:
        return f"ShoeComposition(decks={self.decks}, remaining={self._remaining})"
