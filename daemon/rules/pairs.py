"""Pairs in a hand's first two cards, and the Perfect Pairs paytables.

Sources:
    * 58 Pa. Code § 627c.1(b), (d), (e): Minibaccarat Perfect Pairs; only cards identical in number or
      type are of the same rank; perfect = same suit, colored = same colour different suits,
      mixed = different colours; paytables A 25/12/6, B 30/10/5, C 25/15/5.
    * Perfect Pairs rule sheet: blackjack 25/12/6 on a box's first two cards with
      alternative schedules; baccarat 30/10/5 or 25/12/6 for 6 or 8 decks, 25/12/5 for 8 decks only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.errors import RulesError
from tablesense.daemon.rules.money import Odds

__all__ = [
    "BACCARAT_PERFECT_PAIRS",
    "BLACKJACK_PERFECT_PAIRS",
    "PairKind",
    "PairPaytable",
    "PaytableNotAllowed",
    "classify_pair",
    "is_pair",
    "lookup_paytable",
]


class PaytableNotAllowed(RulesError):
    """Raised for an unknown paytable, or one the rules do not allow with the shoe's deck count."""


class PairKind(StrEnum):
    """The grade of a two-card pair (§ 627c.1(e))."""

    PERFECT = "perfect_pair"
    COLORED = "colored_pair"
    MIXED = "mixed_pair"


def is_pair(a: Card, b: Card) -> bool:
    """True when the two cards are of identical rank (§ 627c.1(b); § 631a.8(a)(7)(i))."""
    return a.rank == b.rank


def classify_pair(a: Card, b: Card) -> PairKind | None:
    """Grade two cards as a perfect, colored or mixed pair, or ``None`` when they are not a pair.

    Symmetric in ``a`` and ``b``. J-Q and 10-K are not pairs (§ 627c.1(b)).
    """
    if a.rank != b.rank:
        return None
    if a.suit == b.suit:
        return PairKind.PERFECT
    if a.colour == b.colour:
        return PairKind.COLORED
    return PairKind.MIXED


@dataclass(frozen=True, slots=True)
class PairPaytable:
    """A Perfect Pairs paytable: odds per pair grade, the deck counts it is allowed with, its source."""

    name: str
    perfect: Odds
    colored: Odds
    mixed: Odds
    source: str
    decks: frozenset[int] = frozenset(range(1, 9))

    def odds(self, kind: PairKind) -> Odds:
        """Odds paid for ``kind``."""
        return {PairKind.PERFECT: self.perfect, PairKind.COLORED: self.colored,
                PairKind.MIXED: self.mixed}[kind]

    @property
    def label(self) -> str:
        """Odds label such as ``25-12-6``."""
        return f"{self.perfect.pays}-{self.colored.pays}-{self.mixed.pays}"


def _pt(name: str, p: int, c: int, m: int, source: str, decks: frozenset[int] | None = None) -> PairPaytable:
    return PairPaytable(name, Odds(p), Odds(c), Odds(m), source, decks or frozenset(range(1, 9)))


BACCARAT_PERFECT_PAIRS: dict[str, PairPaytable] = {
    "A": _pt("A", 25, 12, 6, "58 Pa. Code § 627c.1(d) Paytable A"),
    "B": _pt("B", 30, 10, 5, "58 Pa. Code § 627c.1(d) Paytable B"),
    "C": _pt("C", 25, 15, 5, "58 Pa. Code § 627c.1(d) Paytable C"),
    "25-12-5": _pt("25-12-5", 25, 12, 5, "Perfect Pairs rule sheet rule 8, 8 decks only",
                   frozenset({8})),
}
"""Baccarat Perfect Pairs paytables by name; "A" is the default."""
for _alias, _name in (("25-12-6", "A"), ("30-10-5", "B"), ("25-15-5", "C")):
    BACCARAT_PERFECT_PAIRS[_alias] = BACCARAT_PERFECT_PAIRS[_name]

BLACKJACK_PERFECT_PAIRS: dict[str, PairPaytable] = {
    "25-12-6": _pt("25-12-6", 25, 12, 6, "Perfect Pairs rule sheet rule 7"),
    "30-10-5": _pt("30-10-5", 30, 10, 5, "Perfect Pairs rule sheet, 'alternative payout schedules'"),
    "25-12-5": _pt("25-12-5", 25, 12, 5, "Perfect Pairs rule sheet, 'alternative payout schedules'"),
    "25-15-5": _pt("25-15-5", 25, 15, 5, "Perfect Pairs rule sheet, 'alternative payout schedules'"),
}
"""Blackjack Perfect Pairs schedules by name; "25-12-6" is the default."""


def lookup_paytable(table: dict[str, PairPaytable], name: str, decks: int, what: str) -> PairPaytable:
    """Find paytable ``name`` in ``table`` and check it is allowed with ``decks`` decks.

    Raises:
        PaytableNotAllowed: unknown name, or not allowed for the deck count (one-line message).
    """
    pt = table.get(str(name).upper() if len(str(name)) == 1 else str(name))
    if pt is None:
        raise PaytableNotAllowed(f"{what}: unknown paytable {name!r} (choose one of {', '.join(table)})")
    if decks not in pt.decks:
        allowed = ", ".join(str(d) for d in sorted(pt.decks))
        raise PaytableNotAllowed(f"{what}: paytable {name!r} is allowed with {allowed} decks only, "
                                 f"not {decks} ({pt.source})")
    return pt
