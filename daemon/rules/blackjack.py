"""Blackjack Perfect Pairs: settlement on each box's first two cards, and its exact analysis.

Sources:
    * Perfect Pairs rule sheet, blackjack part: rule 2 (a Perfect Pairs wager may be placed
      on any box holding a blackjack wager), rules 5-7 (wins when the box's first two cards are a pair:
      mixed pair 6 to 1, coloured pair 12 to 1, perfect pair 25 to 1; alternative schedules 30-10-5,
      25-12-5, 25-15-5 in :data:`daemon.rules.pairs.BLACKJACK_PERFECT_PAIRS`), rule 8 (settled right
      after the first two cards, before the blackjack hands are played).
    * 58 Pa. Code § 627c.1(b) and the Perfect Pairs rule sheet's "face value": only cards identical in
      number or type are a pair, so a 10 and a king are not a pair here even though they may be split
      (rules.md §2).
    * rules.md §4.6: the house edges by deck count this module's :func:`analyze_blackjack` reproduces.

Eligibility (Perfect Pairs rule sheet rule 2): the blackjack wager itself is not settled by tablesense.
When the wagers of a round list at least one ``blackjack`` wager, the table's bet sensing covers the main
wagers, and a Perfect Pairs wager on a box without a blackjack wager is returned to the player
(outcome push, category ``ineligible_no_blackjack_wager``). When no blackjack wager is listed at all,
every Perfect Pairs wager is taken to stand on a box with a blackjack wager.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from tablesense.daemon.rules.analysis import OutcomeProbability, WagerAnalysis
from tablesense.daemon.rules.cards import ALL_CARDS, Card, ShoeComposition
from tablesense.daemon.rules.errors import IncompleteRound, RulesError, TooManyCards, WagerNotOffered
from tablesense.daemon.rules.money import Odds
from tablesense.daemon.rules.pairs import (
    BLACKJACK_PERFECT_PAIRS,
    PairKind,
    PairPaytable,
    classify_pair,
    lookup_paytable,
)
from tablesense.daemon.rules.settlement import Bet, Outcome, Settlement, Wager, settle_as

__all__ = [
    "BOXES",
    "DEALER",
    "DEFAULT_PERFECT_PAIRS",
    "INELIGIBLE",
    "NO_PAIR",
    "BlackjackRules",
    "analyze_blackjack",
    "grade_perfect_pairs",
    "settle_blackjack",
]

BOXES: tuple[str, ...] = ("1", "2", "3", "4", "5", "6", "7")
"""Box (seat) positions of a blackjack table, numbered from the dealer's left."""
DEALER = "dealer"
"""The dealer's position in a ``hands`` mapping."""
DEFAULT_PERFECT_PAIRS = "25-12-6"
"""The rule sheet's own schedule (Perfect Pairs rule sheet rule 7)."""
NO_PAIR = "no_pair"
"""Category of a losing Perfect Pairs wager: the first two cards are not a pair (Perfect Pairs rule sheet
rule 6)."""
INELIGIBLE = "ineligible_no_blackjack_wager"
"""Category of a Perfect Pairs wager returned because its box holds no blackjack wager (Perfect Pairs rule
sheet rule 2)."""

_PAYTABLE_BETS = frozenset({Bet.PERFECT_PAIRS})


@dataclass(frozen=True, slots=True)
class BlackjackRules:
    """The blackjack table's shoe and Perfect Pairs schedule.

    Attributes:
        decks: decks in the shoe, 1 to 8.
        perfect_pairs: the Perfect Pairs schedule (default 25-12-6, Perfect Pairs rule sheet rule 7).

    Raises:
        RulesError: ``decks`` outside 1..8.
        PaytableNotAllowed: a schedule not allowed with ``decks`` decks.
    """

    decks: int
    perfect_pairs: PairPaytable = field(
        default_factory=lambda: BLACKJACK_PERFECT_PAIRS[DEFAULT_PERFECT_PAIRS])

    def __post_init__(self) -> None:
        _check_decks(self.decks)
        lookup_paytable(BLACKJACK_PERFECT_PAIRS, self.perfect_pairs.name, self.decks, "perfect_pairs")

    @classmethod
    def from_names(cls, decks: int, paytables: Mapping[str, str] | None = None) -> BlackjackRules:
        """Build the rules from a deck count and ``{bet name: paytable name}``.

        Only ``perfect_pairs`` takes a paytable; its names are the odds, e.g. ``"30-10-5"``.

        Raises:
            RulesError: ``decks`` outside 1..8.
            WagerNotOffered: a paytable for a bet blackjack does not offer or that has no paytable.
            PaytableNotAllowed: an unknown schedule name.
        """
        _check_decks(decks)
        chosen = DEFAULT_PERFECT_PAIRS
        for bet_name, table_name in (paytables or {}).items():
            if bet_name != Bet.PERFECT_PAIRS.value:
                raise WagerNotOffered(f"blackjack has no paytable for {bet_name!r} "
                                      f"(only {Bet.PERFECT_PAIRS.value!r} takes one)")
            chosen = table_name
        return cls(decks, lookup_paytable(BLACKJACK_PERFECT_PAIRS, chosen, decks, "perfect_pairs"))

    def offers(self, bet: Bet) -> bool:
        """True for the wagers a blackjack table takes: ``perfect_pairs`` and the main ``blackjack``."""
        return bet in (Bet.PERFECT_PAIRS, Bet.BLACKJACK)

    @property
    def paytables(self) -> dict[str, str]:
        """The paytable in force per bet name, e.g. ``{"perfect_pairs": "25-12-6"}``."""
        return {Bet.PERFECT_PAIRS.value: self.perfect_pairs.name}


def _check_decks(decks: int) -> None:
    if not isinstance(decks, int) or isinstance(decks, bool) or not 1 <= decks <= ShoeComposition.MAX_DECKS:
        raise RulesError(f"decks must be an integer from 1 to {ShoeComposition.MAX_DECKS}, got {decks!r}")


def grade_perfect_pairs(first: Card, second: Card,
                        paytable: PairPaytable) -> tuple[Outcome, str, Odds | None]:
    """Decide a Perfect Pairs wager from a box's first two cards (Perfect Pairs rule sheet rules 5-7).

    Returns:
        ``(outcome, category, odds)``: a win with category ``perfect_pair``, ``colored_pair`` or
        ``mixed_pair`` and the schedule's odds, or a loss with category :data:`NO_PAIR` and no odds.
    """
    kind = classify_pair(first, second)
    if kind is None:
        return Outcome.LOSE, NO_PAIR, None
    return Outcome.WIN, kind.value, paytable.odds(kind)


def _check_hands(hands: Mapping[str, Sequence[Card]], decks: int, game: str) -> None:
    """Positions are boxes or the dealer, at most two cards each, all from one shoe of ``decks`` decks."""
    shoe = ShoeComposition(decks)
    for position, cards in hands.items():
        if position not in BOXES and position != DEALER:
            raise RulesError(f"{game}: unknown position {position!r} (boxes 1 to 7, or 'dealer')")
        if len(cards) > 2:
            raise TooManyCards(f"{game}: position {position} has {len(cards)} cards; "
                               f"give only its first two")
        for card in cards:
            try:
                shoe.take(card)
            except ValueError as exc:
                raise type(exc)(f"{game}: position {position}: {exc}") from None


def settle_blackjack(hands: Mapping[str, Sequence[Card]], wagers: Sequence[Wager],
                     rules: BlackjackRules) -> list[Settlement]:
    """Settle the Perfect Pairs wagers of one blackjack round.

    Args:
        hands: position (``"1"`` to ``"7"``, or ``"dealer"``) to that position's first two cards. The
            dealer's cards are optional and do not affect Perfect Pairs; when given they are checked
            against the shoe like every other card.
        wagers: the round's wagers; ``perfect_pairs`` wagers are settled, ``blackjack`` wagers only
            make the Perfect Pairs wager on their box eligible (Perfect Pairs rule sheet rule 2) and are
            not returned.
        rules: the table's rules.

    Returns:
        One :class:`Settlement` per Perfect Pairs wager, in the order given. Net amounts are integer
        minor units (stake times the schedule's odds on a win, minus the stake on a loss).

    Raises:
        WagerNotOffered: a bet other than ``perfect_pairs``/``blackjack``, or one naming a baccarat hand.
        RulesError: a wager's spot is not a box 1..7, or a position is unknown.
        IncompleteRound: a Perfect Pairs box with fewer than two cards.
        TooManyCards: a position with more than two cards.
        CardNotInShoe: more copies of a card than ``rules.decks`` decks hold.
    """
    for w in wagers:
        if not rules.offers(w.bet):
            raise WagerNotOffered(f"spot {w.spot}: blackjack does not offer the {w.bet.value!r} wager "
                                  f"(only perfect_pairs, with the blackjack wager)")
        if w.hand is not None:
            raise WagerNotOffered(f"spot {w.spot}: {w.bet.value} on the {w.hand.value!r} hand is a baccarat "
                                  f"wager; blackjack wagers name no hand")
        if w.spot not in BOXES:
            raise RulesError(f"spot {w.spot!r}: a blackjack wager stands on a box 1 to 7")
    _check_hands(hands, rules.decks, "blackjack")
    main_boxes = {w.spot for w in wagers if w.bet is Bet.BLACKJACK}
    settlements: list[Settlement] = []
    for w in wagers:
        if w.bet is not Bet.PERFECT_PAIRS:
            continue
        if main_boxes and w.spot not in main_boxes:
            settlements.append(settle_as(w, Outcome.PUSH, INELIGIBLE))
            continue
        cards = hands.get(w.spot, ())
        if len(cards) < 2:
            raise IncompleteRound(f"box {w.spot} holds a perfect_pairs wager but {len(cards)} of its first "
                                  f"two cards were given")
        outcome, category, odds = grade_perfect_pairs(cards[0], cards[1], rules.perfect_pairs)
        settlements.append(settle_as(w, outcome, category, odds))
    return settlements


def analyze_blackjack(rules: BlackjackRules) -> list[WagerAnalysis]:
    """Exact analysis of the Perfect Pairs wager for ``rules`` (one entry: bet ``perfect_pairs``).

    Every unordered two-card combination from a full shoe of ``rules.decks`` decks is graded by
    :func:`grade_perfect_pairs` (the settlement code itself): each pair of distinct cards once with
    weight ``count(a) * count(b)``, each card with itself with weight ``C(count, 2)``, over a base of
    ``C(52 * decks, 2)``. Reproduces rules.md §4.6 (e.g. 25-12-6 house edge 4.0964 % with 8 decks).
    """
    shoe = ShoeComposition(rules.decks)
    counts = [n for _, n in shoe.counts()]
    weight: dict[str, int] = {}
    odds_of: dict[str, Odds | None] = {}
    outcome_of: dict[str, Outcome] = {}
    for i, a in enumerate(ALL_CARDS):
        for j in range(i, len(ALL_CARDS)):
            b = ALL_CARDS[j]
            w = counts[i] * (counts[i] - 1) // 2 if i == j else counts[i] * counts[j]
            outcome, category, odds = grade_perfect_pairs(a, b, rules.perfect_pairs)
            weight[category] = weight.get(category, 0) + w
            odds_of[category], outcome_of[category] = odds, outcome
    total = shoe.size * (shoe.size - 1) // 2
    if sum(weight.values()) != total:  # pragma: no cover - a broken enumeration, not user input
        raise AssertionError("two-card enumeration does not cover the shoe")
    # Same-card combinations are graded too (weight 0 with one deck), so every category is present.
    order = [k.value for k in (PairKind.PERFECT, PairKind.COLORED, PairKind.MIXED)] + [NO_PAIR]
    outcomes = []
    for category in order:
        odds = odds_of[category]
        outcomes.append(OutcomeProbability(
            category, outcome_of[category], odds, Fraction(weight[category], total),
            odds.ratio if odds is not None else Fraction(-1)))
    return [WagerAnalysis(Bet.PERFECT_PAIRS, None, rules.perfect_pairs.name, tuple(outcomes))]
