"""Advantage-play watch: the exact expected return of every pair wager for the next round.

Pair wagers are decided by a hand's (or box's) first two cards, so their value depends on the cards still
in the shoe. When enough cards of one rank (or one suit within a rank) remain, a Perfect Pairs or House
Money wager can become player-favourable; a card counter who tracks this bets the side wager only then.
This module computes, from the shoe's remaining :class:`~daemon.rules.cards.ShoeComposition`, the exact
expected return (a :class:`~fractions.Fraction`, net per unit staked) of:

* baccarat **Perfect Pairs** on the Player hand (cards 1 and 3) and on the Banker hand (cards 2 and 4)
  (58 Pa. Code § 627c.1(b)-(e); Perfect Pairs rule sheet rule 8). Any two positions of a uniformly
  shuffled remainder are an ordered two-card draw from it, so both hands have the same distribution;
* baccarat **House Money** (a pair in either hand's first two cards, 58 Pa. Code § 631a.8(a)(7)): the
  ordered first four cards P1 B1 P2 B2 drawn from the remainder;
* blackjack **Perfect Pairs** on a box's first two cards (Perfect Pairs rule sheet rules 5-7): again an
  ordered two-card draw, whatever the box's position in the deal;
* UTH **Ultimate Pairs** is not applicable: Ultimate Texas Hold 'Em is dealt from one 52-card deck
  shuffled before every round (rules.md §3), so nothing carries over from one round to the next and the
  expected return is the constant of :func:`daemon.rules.uth.analyze_uth`.

Cards that left the shoe unread (or sit behind the cut card) are unknown to everyone; by exchangeability
they do not change the distribution of the next cards, so the composition of *known* remaining cards
(``ShoeTracker.composition``) is exactly what to use.

Counting (rules.md §0): ordered draws weighted by the remaining counts. Two-card weights are
``n(a)·(n(b) - [a = b])`` over every ordered pair of distinct cards (:func:`ordered_two_card_weights`, the
composition-taking generalisation of :func:`daemon.rules.baccarat_analysis.perfect_pairs_weights`), graded
by :func:`daemon.rules.pairs.classify_pair`; House Money weights come from the per-rank counts in closed
form (:func:`house_money_pair_weights`). Every payout is ruled by the settlement code itself
(:func:`daemon.rules.baccarat.rule_perfect_pairs`, :func:`daemon.rules.baccarat.rule_house_money`,
:func:`daemon.rules.blackjack.grade_perfect_pairs`). A report costs well under a millisecond.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from math import gcd
from operator import itemgetter, mul
from typing import Any, NamedTuple

from tablesense.daemon.rules.baccarat import BaccaratRules, rule_house_money, rule_perfect_pairs
from tablesense.daemon.rules.baccarat_wagers import HouseMoneyPaytable
from tablesense.daemon.rules.blackjack import BlackjackRules, grade_perfect_pairs
from tablesense.daemon.rules.cards import ALL_CARDS, Card, Rank, ShoeComposition, Suit
from tablesense.daemon.rules.pairs import PairKind, PairPaytable, classify_pair
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome

__all__ = [
    "DEFAULT_THRESHOLD",
    "AdvantageFigure",
    "AdvantageWatch",
    "PairWager",
    "advantage_report",
    "favourable",
    "house_money_pair_weights",
    "offered_pair_wagers",
    "ordered_two_card_weights",
    "pair_kind_weights",
    "parse_threshold",
]

DEFAULT_THRESHOLD = Fraction(0)
"""Raise when a wager's expected return per unit is strictly above this (0: any player edge)."""

_MAX_THRESHOLD_CHARS = 32


class PairWager(NamedTuple):
    """A pair wager a table offers.

    Attributes:
        bet: :attr:`Bet.PERFECT_PAIRS` or :attr:`Bet.HOUSE_MONEY`.
        hand: the baccarat hand of a Perfect Pairs wager; ``None`` for a blackjack box's Perfect Pairs
            and for House Money.
        paytable: a :class:`PairPaytable` (Perfect Pairs) or :class:`HouseMoneyPaytable`.
    """

    bet: Bet
    hand: Hand | None
    paytable: PairPaytable | HouseMoneyPaytable


class AdvantageFigure(NamedTuple):
    """The exact expected return of one pair wager for the next round.

    Attributes:
        bet: the wager (``perfect_pairs`` or ``house_money``).
        hand: ``player``/``banker`` for baccarat Perfect Pairs, else ``None``.
        paytable: the paytable's name (``A``, ``25-12-6``, ``3-15`` ...).
        expected_return: exact net result per unit staked (positive: the player has the edge).
    """

    bet: Bet
    hand: Hand | None
    paytable: str
    expected_return: Fraction

    @property
    def key(self) -> tuple[str, str | None]:
        """``(bet, hand)`` as strings: what identifies the wager across rounds."""
        return self.bet.value, self.hand.value if self.hand else None

    @property
    def fraction(self) -> str:
        """The expected return as an exact fraction string, e.g. ``"-2051/50050"``."""
        return f"{self.expected_return.numerator}/{self.expected_return.denominator}"

    @property
    def percent(self) -> str:
        """The expected return in percent with four decimals (display only), e.g. ``"+1.2345"``."""
        q = Decimal(self.expected_return.numerator) * 100 / Decimal(self.expected_return.denominator)
        return f"{q.quantize(Decimal('0.0001')):+}"

    def detail(self, threshold: Fraction = DEFAULT_THRESHOLD) -> dict[str, str]:
        """The alarm's structured fields, all strings (docs/advantage-watch.md): ``bet``, ``hand``
        (``""`` when none), ``paytable``, ``expected_return`` (exact fraction), ``percent`` and
        ``threshold`` (exact fraction)."""
        return {"bet": self.bet.value, "hand": self.hand.value if self.hand else "",
                "paytable": self.paytable, "expected_return": self.fraction, "percent": self.percent,
                "threshold": f"{threshold.numerator}/{threshold.denominator}"}

    def describe(self) -> str:
        """One line for people, e.g. ``perfect_pairs on player (paytable A): expected return +1.2345 %``."""
        where = f" on {self.hand.value}" if self.hand else ""
        return (f"{self.bet.value}{where} (paytable {self.paytable}): expected return {self.percent} % "
                f"per unit ({self.fraction})")


# --------------------------------------------------------------------------------------------- weights

@lru_cache(maxsize=1)
def _pair_index_groups() -> dict[PairKind, tuple[tuple[int, int], ...]]:
    """Every ordered pair of card indices (i, j) that :func:`classify_pair` grades as a pair, by grade.

    Perfect pairs are the same card twice (same rank and suit), so only i == j entries carry them.
    """
    groups: dict[PairKind, list[tuple[int, int]]] = {k: [] for k in PairKind}
    for a in ALL_CARDS:
        for b in ALL_CARDS:
            kind = classify_pair(a, b)
            if kind is not None:
                groups[kind].append((a.index, b.index))
    return {k: tuple(v) for k, v in groups.items()}


@lru_cache(maxsize=1)
def _pair_index_columns() -> dict[PairKind, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """:func:`_pair_index_groups` by grade as ``(same, firsts, seconds)``: the indices i of the (i, i)
    entries (weight n(i)·(n(i) - 1)), and the columns of the (i, j) entries with i != j (weight
    n(i)·n(j)), so a weight is two sums over the counts (same figures, none of the per-entry tests)."""
    out = {}
    for kind, idx in _pair_index_groups().items():
        same = tuple(i for i, j in idx if i == j)
        other = [(i, j) for i, j in idx if i != j]
        out[kind] = (same, tuple(i for i, _ in other), tuple(j for _, j in other))
    return out


def _counts(composition: ShoeComposition) -> list[int]:
    return [n for _, n in composition.counts()]


def ordered_two_card_weights(composition: ShoeComposition) -> dict[Card, dict[Card, int]]:
    """Ordered two-card weights from the cards remaining in ``composition``: ``{first: {second: w}}``
    with ``w = n(first)·(n(second) - [first = second])``; they sum to R·(R-1), R = cards remaining.

    For a full shoe this equals :func:`daemon.rules.baccarat_analysis.perfect_pairs_weights` (decks).
    """
    counts = dict(composition.counts())
    return {a: {b: ca * (cb - (a == b)) for b, cb in counts.items()} for a, ca in counts.items()}


def pair_kind_weights(composition: ShoeComposition) -> dict[PairKind | None, int]:
    """Ordered two-card draws from ``composition`` by pair grade (``None``: not a pair).

    The weights sum to R·(R-1) (R = cards remaining; 0 when fewer than two remain). Same figures as
    grading every entry of :func:`ordered_two_card_weights` with :func:`classify_pair`, computed from the
    208 pairing index pairs only.
    """
    n = _counts(composition)
    out: dict[PairKind | None, int] = {}
    paired = 0
    for kind, (same, firsts, seconds) in _pair_index_columns().items():
        w = sum(map(mul, itemgetter(*firsts)(n), itemgetter(*seconds)(n))) if firsts else 0
        w += sum(k * (k - 1) for k in itemgetter(*same)(n)) if same else 0
        out[kind] = w
        paired += w
    r = composition.remaining
    out[None] = r * (r - 1) - paired
    return out


def house_money_pair_weights(composition: ShoeComposition) -> dict[tuple[bool, bool], int]:
    """Ordered four-card draws P1 B1 P2 B2 from ``composition`` by (Player paired, Banker paired).

    A pair is two cards of the same rank, any suits (§ 631a.8(a)(7)(i)). With r_k cards of rank k left,
    R in all, s2 = Σ r_k(r_k-1), s4 = Σ r_k(r_k-1)(r_k-2)(r_k-3):
    both paired = s2² - Σ (r_k(r_k-1))² + s4; Player paired = s2·(R-2)(R-3) (= Banker paired);
    the weights sum to R(R-1)(R-2)(R-3). For a full shoe they aggregate
    :func:`daemon.rules.baccarat_analysis.house_money_weights` (decks).
    """
    n = _counts(composition)  # card index = suit * 13 + rank - 1 (ShoeComposition.count_rank)
    per_rank = [n[i] + n[i + 13] + n[i + 26] + n[i + 39] for i in range(13)]
    r = sum(per_rank)
    pairs = [k * (k - 1) for k in per_rank]
    s2 = sum(pairs)
    both = s2 * s2 - sum(p * p for p in pairs) + sum(p * (k - 2) * (k - 3) for k, p in zip(per_rank, pairs,
                                                                                         strict=True))
    one_side = s2 * (r - 2) * (r - 3) if r >= 4 else 0
    total = r * (r - 1) * (r - 2) * (r - 3) if r >= 4 else 0
    if r < 4:
        both = 0
    only = one_side - both
    return {(True, True): both, (True, False): only, (False, True): only,
            (False, False): total - 2 * only - both}


# --------------------------------------------------------------------------------------------- rulings

_REPR: dict[PairKind | None, tuple[Card, Card]] = {
    PairKind.PERFECT: (Card(Rank.ACE, Suit.SPADES), Card(Rank.ACE, Suit.SPADES)),
    PairKind.COLORED: (Card(Rank.ACE, Suit.SPADES), Card(Rank.ACE, Suit.CLUBS)),
    PairKind.MIXED: (Card(Rank.ACE, Suit.SPADES), Card(Rank.ACE, Suit.HEARTS)),
    None: (Card(Rank.ACE, Suit.SPADES), Card(Rank.TWO, Suit.SPADES)),
}
"""A representative card pair of each grade, ruled by the settlement functions."""


def _net(outcome: Outcome, odds: Any) -> Fraction:
    if outcome is Outcome.WIN:
        return Fraction(odds.ratio)
    return Fraction(-1) if outcome is Outcome.LOSE else Fraction(0)


@lru_cache(maxsize=64)
def _perfect_pairs_net(wager: PairWager) -> dict[PairKind | None, Fraction]:
    """The net result per unit of each grade (the same for every round: kept per wager; read only)."""
    pt = wager.paytable
    assert isinstance(pt, PairPaytable)
    out: dict[PairKind | None, Fraction] = {}
    for kind, (a, b) in _REPR.items():
        if wager.hand is None:  # a blackjack box: the blackjack settlement function
            outcome, _, odds = grade_perfect_pairs(a, b, pt)
            out[kind] = _net(outcome, odds)
        else:
            ruling = rule_perfect_pairs(a, b, pt)
            out[kind] = _net(ruling.outcome, ruling.odds)
    return out


@lru_cache(maxsize=64)
def _house_money_net(paytable: HouseMoneyPaytable) -> dict[tuple[bool, bool], Fraction]:
    """The net result per unit of each (Player paired, Banker paired) (kept per paytable; read only)."""
    pair, other = _REPR[PairKind.COLORED], _REPR[None]
    out = {}
    for p, b in ((True, True), (True, False), (False, True), (False, False)):
        ruling = rule_house_money(pair if p else other, pair if b else other, paytable)
        out[(p, b)] = _net(ruling.outcome, ruling.odds)
    return out


def _expected(weights: Mapping[Any, int], net: Mapping[Any, Fraction]) -> Fraction | None:
    """Σ w·net / Σ w, exactly: over the common denominator of the nets, one integer sum and one
    reduction (the same :class:`~fractions.Fraction` as summing the reduced terms one by one)."""
    total = sum(weights.values())
    if total <= 0:
        return None
    common = 1
    for k, w in weights.items():
        if w:
            d = net[k].denominator
            common = common * d // gcd(common, d)
    numerator = sum(w * net[k].numerator * (common // net[k].denominator) for k, w in weights.items() if w)
    return Fraction(numerator, total * common)


# --------------------------------------------------------------------------------------------- report

def offered_pair_wagers(rules: object, offered: Iterable[str]) -> list[PairWager]:
    """The pair wagers a table offers, from its rules object and the bet names of its ``[wagers]``.

    * :class:`BaccaratRules`: ``perfect_pairs`` gives Perfect Pairs on the Player and on the Banker hand;
      ``house_money`` gives House Money; each with the rules' paytable.
    * :class:`BlackjackRules`: ``perfect_pairs`` gives one box wager (hand ``None``).
    * anything else (UTH's ``UthRules``): none. Ultimate Pairs is dealt from one deck shuffled before
      every round, so there is no shoe to watch.
    """
    names = {str(b).strip().lower() for b in offered}
    out: list[PairWager] = []
    if isinstance(rules, BaccaratRules):
        if Bet.PERFECT_PAIRS.value in names:
            out += [PairWager(Bet.PERFECT_PAIRS, h, rules.perfect_pairs) for h in (Hand.PLAYER, Hand.BANKER)]
        if Bet.HOUSE_MONEY.value in names:
            out.append(PairWager(Bet.HOUSE_MONEY, None, rules.house_money))
    elif isinstance(rules, BlackjackRules) and Bet.PERFECT_PAIRS.value in names:
        out.append(PairWager(Bet.PERFECT_PAIRS, None, rules.perfect_pairs))
    return out


def advantage_report(composition: ShoeComposition,
                     offered_wagers: Iterable[PairWager]) -> list[AdvantageFigure]:
    """The exact expected return of each of ``offered_wagers`` for a round dealt from ``composition``.

    Args:
        composition: the cards known to remain in the shoe (after the round just completed).
        offered_wagers: e.g. from :func:`offered_pair_wagers`.

    Returns:
        One :class:`AdvantageFigure` per wager, in the order given; a wager is left out when the shoe
        holds too few cards to deal it (fewer than 2 for Perfect Pairs, 4 for House Money).

    Raises:
        ValueError: a wager that is neither Perfect Pairs nor House Money, or a paytable of the wrong kind.
    """
    two: dict[PairKind | None, int] | None = None
    four: dict[tuple[bool, bool], int] | None = None
    out: list[AdvantageFigure] = []
    for wager in offered_wagers:
        bet, hand, pt = wager
        if bet is Bet.PERFECT_PAIRS and isinstance(pt, PairPaytable):
            if two is None:
                two = pair_kind_weights(composition)
            er = _expected(two, _perfect_pairs_net(wager))
        elif bet is Bet.HOUSE_MONEY and isinstance(pt, HouseMoneyPaytable) and hand is None:
            if four is None:
                four = house_money_pair_weights(composition)
            er = _expected(four, _house_money_net(pt))
        else:
            raise ValueError(f"not a pair wager the advantage watch knows: {bet!s} with "
                             f"{type(pt).__name__}")
        if er is not None:
            out.append(AdvantageFigure(bet, hand, pt.name, er))
    return out


def parse_threshold(text: str) -> Fraction:
    """Read the ``[integrity] advantage_threshold`` setting: an exact decimal (``"0"``, ``"0.005"``,
    ``"-0.01"``), a fraction (``"1/200"``) or a percentage (``"0.5%"``), as expected return per unit.

    Raises:
        ValueError: anything else, or a value outside -1 .. 10 (-100 % .. +1000 %): one line naming the
            text. Floats are never used.
    """
    t = str(text).strip()
    if not t or len(t) > _MAX_THRESHOLD_CHARS:
        raise ValueError(f"advantage_threshold: not an exact decimal: {str(text)[:_MAX_THRESHOLD_CHARS]!r}")
    scale = Fraction(1)
    if t.endswith("%"):
        t, scale = t[:-1].strip(), Fraction(1, 100)
    try:
        if "/" in t:
            value = Fraction(t)
        else:
            d = Decimal(t)
            if not d.is_finite() or abs(d.adjusted()) > 9:
                raise InvalidOperation
            value = Fraction(d)
    except (ValueError, ZeroDivisionError, InvalidOperation):
        raise ValueError(f"advantage_threshold: not an exact decimal: {str(text)!r} "
                         "(e.g. \"0\", \"0.005\" or \"0.5%\")") from None
    value *= scale
    if not -1 <= value <= 10:
        raise ValueError(f"advantage_threshold: {str(text)!r} is outside -100 % .. +1000 %")
    return value


def favourable(report: Iterable[AdvantageFigure],
               threshold: Fraction = DEFAULT_THRESHOLD) -> list[AdvantageFigure]:
    """The figures whose expected return is strictly above ``threshold``."""
    return [f for f in report if f.expected_return > threshold]


class AdvantageWatch:
    """Which pair wagers are currently above the threshold, so an alarm is raised once when a wager
    turns favourable and cleared once when it stops being so (not once per round).

    Pure state: ``update(report)`` returns ``(raised, cleared)``; ``reset()`` at a new shoe.
    """

    def __init__(self, threshold: Fraction = DEFAULT_THRESHOLD) -> None:
        self.threshold = Fraction(threshold)
        self._active: dict[tuple[str, str | None], AdvantageFigure] = {}

    @property
    def active(self) -> list[AdvantageFigure]:
        """The figures above the threshold at the last update (the latest figure of each)."""
        return list(self._active.values())

    def update(self, report: Iterable[AdvantageFigure]
               ) -> tuple[list[AdvantageFigure], list[AdvantageFigure]]:
        """Apply one round's report: the figures newly above the threshold (``raised``), and the latest
        figure of each wager that was above and no longer is, or is no longer in the report (``cleared``)."""
        seen: dict[tuple[str, str | None], AdvantageFigure] = {f.key: f for f in report}
        raised = [f for k, f in seen.items() if f.expected_return > self.threshold and k not in self._active]
        cleared = [seen.get(k, f) for k, f in self._active.items()
                   if k not in seen or seen[k].expected_return <= self.threshold]
        for f in cleared:
            self._active.pop(f.key, None)
        for k, f in seen.items():
            if f.expected_return > self.threshold:
                self._active[k] = f
        return raised, cleared

    def reset(self) -> list[AdvantageFigure]:
        """Forget every active figure (a new shoe); return them (to clear their alarms)."""
        out, self._active = list(self._active.values()), {}
        return out
