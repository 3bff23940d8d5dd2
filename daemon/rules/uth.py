"""Ultimate Texas Hold 'Em Ultimate Pairs: paytables A-F, settlement and exact analysis.

Source: 58 Pa. Code § 653b.5. The wager is decided on the player's two individual cards,
and with paytable F on the player's two cards combined with the dealer's two cards (§ 653b.5(e)); it
pays at the odds of one of the paytables A-F selected by the certificate holder (§ 653b.5(f)). The
paytable rows, from the highest, are:

=================================  ======  ======  ======  ======  ======  =========
line (category)                    A       B       C       D       E       F
=================================  ======  ======  ======  ======  ======  =========
A-A with dealer A-A                N/A     N/A     N/A     N/A     N/A     1000 to 1
A♥ A♦ (red aces)                   N/A     N/A     100     50      N/A     N/A
A-A (aces)                         30      30      30      25      25      30
A-K suited                         25      20      20      20      20      25
A-Q or A-J suited                  20      20      20      20      20      20
A-K                                15      10      10      10      10      15
K-K, Q-Q or J-J (face pair)        10      5       4       5       5       10
A-Q or A-J                         5       10      10      10      10      5
pair of 10s or less (low pair)     3       5       4       5       5       3
=================================  ======  ======  ======  ======  ======  =========

Only the highest qualifying line pays: a hand is graded by the first line, in the order above, that it
qualifies for and the paytable offers (an N/A line is skipped, so A♥A♦ under paytable A is paid as
A-A). Anything else loses (category ``lose``). The game is dealt from one 52-card deck (rules.md §3).

Eligibility (§ 653b.5(a): offered to a player who has placed the Ante and Blind wagers): the Ante is
not settled by tablesense. When the wagers of a round list at least one ``ante`` wager, an Ultimate
Pairs wager on a spot without one is returned (push, category ``ineligible_no_ante_wager``); when no
ante wager is listed, every Ultimate Pairs wager is taken to be eligible. A fold does not affect the
Ultimate Pairs wager (§ 653b.5(c)).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from tablesense.daemon.rules.analysis import OutcomeProbability, WagerAnalysis
from tablesense.daemon.rules.cards import ALL_CARDS, Card, CardNotInShoe, Rank, ShoeComposition, Suit
from tablesense.daemon.rules.errors import IncompleteRound, RulesError, TooManyCards, WagerNotOffered
from tablesense.daemon.rules.money import Odds
from tablesense.daemon.rules.pairs import PaytableNotAllowed
from tablesense.daemon.rules.settlement import Bet, Outcome, Settlement, Wager, settle_as

__all__ = [
    "DEALER",
    "DEFAULT_ULTIMATE_PAIRS",
    "INELIGIBLE",
    "LINES",
    "LOSE",
    "SPOTS",
    "ULTIMATE_PAIRS",
    "UltimatePairsPaytable",
    "UthRules",
    "analyze_uth",
    "grade_ultimate_pairs",
    "qualifying_lines",
    "settle_uth",
]

SPOTS: tuple[str, ...] = ("1", "2", "3", "4", "5", "6", "7")
"""Player positions of the table, numbered from the dealer's left."""
DEALER = "dealer"
"""The dealer's position in a ``hands`` mapping."""
LOSE = "lose"
"""Category of a losing Ultimate Pairs wager: no line of the paytable qualifies."""
INELIGIBLE = "ineligible_no_ante_wager"
"""Category of an Ultimate Pairs wager returned because its spot holds no Ante wager (§ 653b.5(a))."""
DEFAULT_ULTIMATE_PAIRS = "A"
"""Paytable used when none is named (the regulation names no default; A is its first)."""

ACES_WITH_DEALER_ACES = "aces_with_dealer_aces"
RED_ACES = "red_aces"
ACES = "aces"
ACE_KING_SUITED = "ace_king_suited"
ACE_QUEEN_OR_JACK_SUITED = "ace_queen_or_jack_suited"
ACE_KING = "ace_king"
FACE_PAIR = "face_pair"
ACE_QUEEN_OR_JACK = "ace_queen_or_jack"
LOW_PAIR = "low_pair"

LINES: tuple[str, ...] = (ACES_WITH_DEALER_ACES, RED_ACES, ACES, ACE_KING_SUITED, ACE_QUEEN_OR_JACK_SUITED,
                          ACE_KING, FACE_PAIR, ACE_QUEEN_OR_JACK, LOW_PAIR)
"""The paytable lines of § 653b.5(f), highest first."""


@dataclass(frozen=True, slots=True)
class UltimatePairsPaytable:
    """One paytable of § 653b.5(f): odds per line (``None`` = N/A, not offered), and its source."""

    name: str
    odds_by_line: tuple[tuple[str, Odds | None], ...]
    source: str

    def odds(self, line: str) -> Odds | None:
        """The odds the paytable pays for ``line``, or ``None`` when it does not offer it."""
        return dict(self.odds_by_line)[line]

    @property
    def offered_lines(self) -> tuple[str, ...]:
        """The lines this paytable pays, highest first."""
        return tuple(line for line, odds in self.odds_by_line if odds is not None)

    @property
    def needs_dealer_cards(self) -> bool:
        """True when a line depends on the dealer's two cards (paytable F, § 653b.5(e))."""
        return self.odds(ACES_WITH_DEALER_ACES) is not None


def _paytable(name: str, pays: Sequence[int | None]) -> UltimatePairsPaytable:
    return UltimatePairsPaytable(
        name, tuple((line, Odds(p) if p is not None else None) for line, p in zip(LINES, pays, strict=True)),
        f"58 Pa. Code § 653b.5(f) Paytable {name}")


ULTIMATE_PAIRS: dict[str, UltimatePairsPaytable] = {
    # lines:     AA+dAA  A♥A♦  AA  AKs AQs/AJs AK  KK-JJ AQ/AJ 22-TT
    "A": _paytable("A", (None, None, 30, 25, 20, 15, 10, 5, 3)),
    "B": _paytable("B", (None, None, 30, 20, 20, 10, 5, 10, 5)),
    "C": _paytable("C", (None, 100, 30, 20, 20, 10, 4, 10, 4)),
    "D": _paytable("D", (None, 50, 25, 20, 20, 10, 5, 10, 5)),
    "E": _paytable("E", (None, None, 25, 20, 20, 10, 5, 10, 5)),
    "F": _paytable("F", (1000, None, 30, 25, 20, 15, 10, 5, 3)),
}
"""The six Ultimate Pairs paytables of § 653b.5(f), by letter."""

_RED_ACES = frozenset({Card(Rank.ACE, Suit.HEARTS), Card(Rank.ACE, Suit.DIAMONDS)})
_FACES = frozenset({Rank.KING, Rank.QUEEN, Rank.JACK})


def qualifying_lines(player: Sequence[Card], dealer: Sequence[Card] | None) -> tuple[str, ...]:
    """Every line of § 653b.5(f) the player's two cards qualify for, highest first.

    ``dealer`` (the dealer's two cards) is only looked at for the A-A with dealer A-A line; ``None``
    means the dealer's cards are not known, and that line is then left out.

    Raises:
        ValueError: ``player`` is not two cards or ``dealer`` is not two cards.
    """
    if len(player) != 2:
        raise ValueError(f"Ultimate Pairs needs the player's two cards, got {len(player)}")
    a, b = player
    lines: list[str] = []
    if a.rank == b.rank:
        if a.rank is Rank.ACE:
            if dealer is not None:
                if len(dealer) != 2:
                    raise ValueError(f"the dealer has two cards, got {len(dealer)}")
                if all(c.rank is Rank.ACE for c in dealer):
                    lines.append(ACES_WITH_DEALER_ACES)
            if {a, b} == _RED_ACES:
                lines.append(RED_ACES)
            lines.append(ACES)
        elif a.rank in _FACES:
            lines.append(FACE_PAIR)
        else:
            lines.append(LOW_PAIR)
        return tuple(lines)
    ranks = {a.rank, b.rank}
    if Rank.ACE in ranks:
        other = (ranks - {Rank.ACE}).pop()
        suited = a.suit == b.suit
        if other is Rank.KING:
            lines += [ACE_KING_SUITED] if suited else []
            lines.append(ACE_KING)
        elif other in (Rank.QUEEN, Rank.JACK):
            lines += [ACE_QUEEN_OR_JACK_SUITED] if suited else []
            lines.append(ACE_QUEEN_OR_JACK)
    return tuple(lines)


def grade_ultimate_pairs(player: Sequence[Card], dealer: Sequence[Card] | None,
                         paytable: UltimatePairsPaytable) -> tuple[Outcome, str, Odds | None]:
    """Decide an Ultimate Pairs wager: the highest qualifying line the paytable offers pays.

    Returns:
        ``(outcome, category, odds)``: a win with the line's category and odds, or a loss with
        category :data:`LOSE`.

    Raises:
        IncompleteRound: paytable F without the dealer's two cards (§ 653b.5(e)).
        ValueError: ``player`` or ``dealer`` is not two cards.
    """
    if paytable.needs_dealer_cards and dealer is None:
        raise IncompleteRound(f"Ultimate Pairs paytable {paytable.name} needs the dealer's two cards "
                              f"(58 Pa. Code § 653b.5(e))")
    for line in qualifying_lines(player, dealer):
        odds = paytable.odds(line)
        if odds is not None:
            return Outcome.WIN, line, odds
    return Outcome.LOSE, LOSE, None


@dataclass(frozen=True, slots=True)
class UthRules:
    """The UTH table's Ultimate Pairs paytable (one 52-card deck, rules.md §3)."""

    paytable: UltimatePairsPaytable

    decks = 1
    """UTH is dealt from a single deck."""

    @classmethod
    def from_names(cls, decks: int = 1, paytables: Mapping[str, str] | None = None) -> UthRules:
        """Build the rules from ``{bet name: paytable letter}`` (only ``ultimate_pairs``, ``A``-``F``).

        Raises:
            RulesError: ``decks`` is not 1.
            WagerNotOffered: a paytable for a bet other than ``ultimate_pairs``.
            PaytableNotAllowed: a letter other than A-F.
        """
        if decks != 1 or isinstance(decks, bool):
            raise RulesError(f"uth is dealt from one 52-card deck; decks must be 1, got {decks!r}")
        name = DEFAULT_ULTIMATE_PAIRS
        for bet_name, table_name in (paytables or {}).items():
            if bet_name != Bet.ULTIMATE_PAIRS.value:
                raise WagerNotOffered(f"uth has no paytable for {bet_name!r} "
                                      f"(only {Bet.ULTIMATE_PAIRS.value!r} takes one)")
            name = table_name
        paytable = ULTIMATE_PAIRS.get(str(name).strip().upper())
        if paytable is None:
            raise PaytableNotAllowed(f"ultimate_pairs: unknown paytable {name!r} "
                                     f"(choose one of {', '.join(ULTIMATE_PAIRS)}, § 653b.5(f))")
        return cls(paytable)

    def offers(self, bet: Bet) -> bool:
        """True for ``ultimate_pairs`` and the ``ante`` that makes it eligible."""
        return bet in (Bet.ULTIMATE_PAIRS, Bet.ANTE)

    @property
    def paytables(self) -> dict[str, str]:
        """The paytable in force per bet name, e.g. ``{"ultimate_pairs": "F"}``."""
        return {Bet.ULTIMATE_PAIRS.value: self.paytable.name}


def settle_uth(hands: Mapping[str, Sequence[Card]], wagers: Sequence[Wager],
               rules: UthRules) -> list[Settlement]:
    """Settle the Ultimate Pairs wagers of one UTH round (§ 653b.5(d)-(f)).

    Args:
        hands: position (``"1"`` to ``"7"``, or ``"dealer"``) to its two cards. The dealer's cards are
            needed with paytable F, optional otherwise (checked against the deck when given).
        wagers: ``ultimate_pairs`` wagers are settled; ``ante`` wagers only make the Ultimate Pairs
            wager on their spot eligible and are not returned.
        rules: the table's paytable.

    Returns:
        One :class:`Settlement` per Ultimate Pairs wager, in the order given (integer minor units).

    Raises:
        WagerNotOffered: a bet the game does not offer, or one naming a baccarat hand.
        RulesError: a wager's spot is not 1..7, or a position is unknown.
        IncompleteRound: a wagering spot with fewer than two cards; paytable F without the dealer's two.
        TooManyCards: a position with more than two cards.
        CardNotInShoe: a card twice (one deck).
    """
    for w in wagers:
        if not rules.offers(w.bet):
            raise WagerNotOffered(f"spot {w.spot}: uth does not offer the {w.bet.value!r} wager "
                                  f"(only ultimate_pairs, with the ante)")
        if w.hand is not None:
            raise WagerNotOffered(f"spot {w.spot}: {w.bet.value} on the {w.hand.value!r} hand is a baccarat "
                                  f"wager; uth wagers name no hand")
        if w.spot not in SPOTS:
            raise RulesError(f"spot {w.spot!r}: a uth wager stands on a spot 1 to 7")
    shoe = ShoeComposition(1)
    for position, cards in hands.items():
        if position not in SPOTS and position != DEALER:
            raise RulesError(f"uth: unknown position {position!r} (spots 1 to 7, or 'dealer')")
        if len(cards) > 2:
            raise TooManyCards(f"uth: position {position} has {len(cards)} cards; "
                               f"give only its two hole cards")
        for card in cards:
            try:
                shoe.take(card)
            except CardNotInShoe:
                raise CardNotInShoe(f"uth: position {position}: {card} is already out "
                                    f"(one 52-card deck)") from None
    dealer = hands.get(DEALER)
    if dealer is not None and len(dealer) < 2:
        raise IncompleteRound(f"uth: the dealer has {len(dealer)} card(s); give both or none")
    ante_spots = {w.spot for w in wagers if w.bet is Bet.ANTE}
    settlements: list[Settlement] = []
    for w in wagers:
        if w.bet is not Bet.ULTIMATE_PAIRS:
            continue
        if ante_spots and w.spot not in ante_spots:
            settlements.append(settle_as(w, Outcome.PUSH, INELIGIBLE))
            continue
        cards = hands.get(w.spot, ())
        if len(cards) < 2:
            raise IncompleteRound(f"spot {w.spot} holds an ultimate_pairs wager but {len(cards)} of its two "
                                  f"cards were given")
        outcome, category, odds = grade_ultimate_pairs(cards, dealer, rules.paytable)
        settlements.append(settle_as(w, outcome, category, odds))
    return settlements


def analyze_uth(rules: UthRules) -> list[WagerAnalysis]:
    """Exact analysis of the Ultimate Pairs wager under ``rules.paytable`` (one entry).

    Every one of the C(52, 2) = 1326 player two-card hands is graded by :func:`grade_ultimate_pairs`
    (the settlement code itself), each with equal weight.

    With paytable F the dealer's two cards come from the 50 remaining cards (C(50, 2) = 1225 hands per
    player hand, base 1326 × 1225). :func:`qualifying_lines` looks at the dealer's hand only through
    "are both cards aces", so the dealer hands fall into three classes by their number of aces: with
    ``a`` aces and ``n`` other cards remaining, two aces (weight C(a, 2)), one ace (a·n) and none
    (C(n, 2)). One real dealer hand of each non-empty class is graded with its exact weight; a test
    checks this against grading all 1225 dealer hands for every player hand holding an ace.
    """
    paytable = rules.paytable
    weights: dict[str, int] = {}
    total = 0
    for i, a in enumerate(ALL_CARDS):
        for b in ALL_CARDS[i + 1:]:
            player = (a, b)
            if not paytable.needs_dealer_cards:
                _add(weights, grade_ultimate_pairs(player, None, paytable)[1], 1)
                total += 1
                continue
            for dealer, w in _dealer_classes(player):
                _add(weights, grade_ultimate_pairs(player, dealer, paytable)[1], w)
                total += w
    outcomes = [
        OutcomeProbability(line, Outcome.WIN, odds, Fraction(weights.get(line, 0), total), odds.ratio)
        for line, odds in paytable.odds_by_line if odds is not None
    ]
    outcomes.append(OutcomeProbability(LOSE, Outcome.LOSE, None, Fraction(weights.get(LOSE, 0), total),
                                       Fraction(-1)))
    return [WagerAnalysis(Bet.ULTIMATE_PAIRS, None, paytable.name, tuple(outcomes))]


def _add(weights: dict[str, int], category: str, w: int) -> None:
    weights[category] = weights.get(category, 0) + w


def _dealer_classes(player: tuple[Card, Card]) -> list[tuple[tuple[Card, Card], int]]:
    """Representative dealer hands with exact weights, one per ace count (see :func:`analyze_uth`)."""
    rest = [c for c in ALL_CARDS if c not in player]
    aces = [c for c in rest if c.rank is Rank.ACE]
    others = [c for c in rest if c.rank is not Rank.ACE]
    a, n = len(aces), len(others)
    classes: list[tuple[tuple[Card, Card], int]] = []
    if a >= 2:
        classes.append(((aces[0], aces[1]), a * (a - 1) // 2))
    if a >= 1 and n >= 1:
        classes.append(((aces[0], others[0]), a * n))
    if n >= 2:
        classes.append(((others[0], others[1]), n * (n - 1) // 2))
    return classes
