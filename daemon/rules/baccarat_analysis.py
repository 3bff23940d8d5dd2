"""Exact analysis of every baccarat wager: each outcome's probability, the expected return, the house edge.

Method (rules.md §0): enumerate the ordered card *values* P1 B1 P2 B2 (value 0 = 10/J/Q/K, 16·n cards in
an n-deck shoe; values 1-9, 4·n each), apply the drawing rules (:func:`player_draws`,
:func:`banker_draws`, the same functions that deal a live round), and weight every completed round by
the product of the remaining counts. Rounds that use 4 (or 5) cards are multiplied by (N-4)(N-5) (or
(N-5)), so every round is counted over the same base of N·(N-1)·…·(N-5) ordered six-card sequences,
N = 52·n. For 8 decks that base is 4,998,398,275,503,360, as Wizard of Odds counts.

Rounds are grouped by what any wager can depend on: the final Point Counts and the number of cards in
each hand (:class:`RoundKey`). For each group a representative card sequence is dealt with
:func:`coup_from_cards` and every wager is ruled by the same functions that settle real stakes
(:func:`rule_main_wager`, :func:`rule_dragon_bonus`). Perfect Pairs and House Money are enumerated over
cards (Perfect Pairs over the 52×52 ordered distinct cards, House Money over the 15 patterns of equal
ranks among the first four cards) and ruled by :func:`rule_perfect_pairs` and :func:`rule_house_money`.

Pure: no I/O, no clock. The value enumeration is memoised per deck count (a deterministic cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from tablesense.daemon.rules.analysis import OutcomeProbability, WagerAnalysis
from tablesense.daemon.rules.baccarat import (
    BaccaratRules,
    BaccaratVariant,
    Coup,
    Ruling,
    banker_draws,
    coup_from_cards,
    player_draws,
    rule_dragon_bonus,
    rule_house_money,
    rule_main_wager,
    rule_perfect_pairs,
)
from tablesense.daemon.rules.baccarat_wagers import DRAGON_7_ODDS, PANDA_8_ODDS
from tablesense.daemon.rules.cards import Card, Rank, ShoeComposition, Suit
from tablesense.daemon.rules.errors import RulesError
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome

__all__ = [
    "RoundKey",
    "analyze_baccarat",
    "house_money_weights",
    "perfect_pairs_weights",
    "round_weights",
    "six_card_base",
]


@dataclass(frozen=True, slots=True, order=True)
class RoundKey:
    """What decides every value-level wager of a round: final Point Counts and cards per hand (2 or 3).

    A hand with two cards and 8 or 9 points is a Natural (a two-card hand that did not stop the deal has
    at most 7 points).
    """

    player_points: int
    banker_points: int
    player_cards: int
    banker_cards: int


def six_card_base(decks: int) -> int:
    """N·(N-1)·…·(N-5) for N = 52·decks: the number of ordered six-card sequences every round is counted
    over (rules.md §0)."""
    n = 52 * decks
    return n * (n - 1) * (n - 2) * (n - 3) * (n - 4) * (n - 5)


def _value_card(v: int) -> Card:
    """A representative card of baccarat value ``v`` (0 -> 10♠)."""
    return Card(Rank.TEN if v == 0 else Rank(v), Suit.SPADES)


@lru_cache(maxsize=8)
def _enumerate(decks: int) -> tuple[tuple[RoundKey, int, tuple[int, ...]], ...]:
    n = 52 * decks
    counts = [16 * decks] + [4 * decks] * 9
    f4 = (n - 4) * (n - 5)
    f5 = n - 5
    size = 10 * 10 * 2 * 2
    acc = [0] * size
    rep: list[tuple[int, ...] | None] = [None] * size
    tens = range(10)
    player_draw = [player_draws(p) for p in range(8)]
    banker_after_stand = [banker_draws(b, None) for b in range(8)]
    banker_after_draw = [[banker_draws(b, p3) for p3 in tens] for b in range(8)]

    def index(p: int, b: int, pc: int, bc: int) -> int:
        return ((p * 10 + b) * 2 + pc - 2) * 2 + bc - 2

    # Unordered value pairs per hand: (p1, p2) and (p2, p1) give the same point count and the same
    # remaining shoe, so each unordered pair is weighed once with multiplicity 2 when the values differ.
    for p1 in tens:
        for p2 in range(p1, 10):
            wp = counts[p1]
            counts[p1] -= 1
            wp *= counts[p2] * (1 if p1 == p2 else 2)
            counts[p2] -= 1
            pt = (p1 + p2) % 10
            for b1 in tens:
                for b2 in range(b1, 10):
                    w4 = wp * counts[b1]
                    counts[b1] -= 1
                    w4 *= counts[b2] * (1 if b1 == b2 else 2)
                    counts[b2] -= 1
                    bt = (b1 + b2) % 10
                    prefix = (p1, b1, p2, b2)
                    if pt >= 8 or bt >= 8:
                        i = index(pt, bt, 2, 2)
                        acc[i] += w4 * f4
                        rep[i] = rep[i] or prefix
                    elif not player_draw[pt]:
                        if banker_after_stand[bt]:
                            base = index(pt, 0, 2, 3)
                            for b3 in tens:
                                i = base + ((bt + b3) % 10) * 4
                                acc[i] += w4 * counts[b3] * f5
                                rep[i] = rep[i] or (*prefix, b3)
                        else:
                            i = index(pt, bt, 2, 2)
                            acc[i] += w4 * f4
                            rep[i] = rep[i] or prefix
                    else:
                        draws = banker_after_draw[bt]
                        for p3 in tens:
                            w5 = w4 * counts[p3]
                            counts[p3] -= 1
                            pt3 = (pt + p3) % 10
                            if draws[p3]:
                                base = index(pt3, 0, 3, 3)
                                for b3 in tens:
                                    i = base + ((bt + b3) % 10) * 4
                                    acc[i] += w5 * counts[b3]
                                    rep[i] = rep[i] or (*prefix, p3, b3)
                            else:
                                i = index(pt3, bt, 3, 2)
                                acc[i] += w5 * f5
                                rep[i] = rep[i] or (*prefix, p3)
                            counts[p3] += 1
                    counts[b1] += 1
                    counts[b2] += 1
            counts[p1] += 1
            counts[p2] += 1
    out = []
    for i, w in enumerate(acc):
        r = rep[i]
        if w and r is not None:
            bc, rest = i % 2 + 2, i // 2
            pc, rest = rest % 2 + 2, rest // 2
            out.append((RoundKey(rest // 10, rest % 10, pc, bc), w, r))
    return tuple(out)


def round_weights(decks: int) -> dict[RoundKey, int]:
    """The exact weight of every kind of round for a full shoe of ``decks`` decks (1 to 8).

    Weights count ordered six-card sequences (rules.md §0) and sum to :func:`six_card_base`.

    Raises:
        RulesError: ``decks`` outside 1..8.
    """
    _check_decks(decks)
    return {k: w for k, w, _ in _enumerate(decks)}


def _check_decks(decks: int) -> None:
    if not isinstance(decks, int) or isinstance(decks, bool) or not 1 <= decks <= 8:
        raise RulesError(f"decks must be an integer from 1 to 8, got {decks!r}")


@lru_cache(maxsize=8)
def _coups(decks: int) -> tuple[tuple[Coup, int], ...]:
    out = []
    for key, w, values in _enumerate(decks):
        coup = coup_from_cards([_value_card(v) for v in values])
        got = RoundKey(coup.player_points, coup.banker_points, len(coup.player_cards), len(coup.banker_cards))
        if got != key:  # the enumeration and the dealer disagree: a defect, never silently absorbed
            raise RuntimeError(f"enumeration key {key} but coup_from_cards dealt {got} from {values}")
        out.append((coup, w))
    return tuple(out)


def perfect_pairs_weights(decks: int) -> dict[Card, dict[Card, int]]:
    """Ordered two-card weights from a full shoe: ``{first: {second: count}}`` with count
    ``n(first)·(n(second) - [first == second])``; they sum to N·(N-1).

    Raises:
        RulesError: ``decks`` outside 1..8.
    """
    _check_decks(decks)
    shoe = ShoeComposition(decks)
    counts = dict(shoe.counts())
    return {a: {b: ca * (cb - (a == b)) for b, cb in counts.items()} for a, ca in counts.items()}


def house_money_weights(decks: int) -> dict[tuple[Rank, Rank, Rank, Rank], int]:
    """Weights of the first four cards' rank patterns (P1 B1 P2 B2) from a full shoe.

    Ranks are exchangeable, so the 13⁴ ordered rank sequences fall into 15 patterns of equal and
    different ranks (e.g. "P1 = P2, the rest different"). Each pattern is keyed by a representative rank
    sequence (ace, 2, 3, 4 in order of first appearance) and weighted by the number of ordered four-card
    draws that follow it: (13)_k rank choices for k distinct ranks times, per rank used m times, the
    (4·n)_m ordered cards. The weights sum to N·(N-1)·(N-2)·(N-3).

    Raises:
        RulesError: ``decks`` outside 1..8.
    """
    _check_decks(decks)
    per_rank = 4 * decks
    out: dict[tuple[Rank, Rank, Rank, Rank], int] = {}
    for pattern in _patterns(4):
        k = max(pattern) + 1
        w = 1
        for i in range(k):  # (13)_k ways to choose the ranks of the k classes
            w *= 13 - i
        for cls in range(k):
            for j in range(pattern.count(cls)):
                w *= per_rank - j
        r1, r2, r3, r4 = (Rank(c + 1) for c in pattern)
        out[(r1, r2, r3, r4)] = w
    return out


def _patterns(length: int) -> list[tuple[int, ...]]:
    """Restricted growth strings: every way to split ``length`` positions into classes of equal ranks."""
    out: list[tuple[int, ...]] = [(0,)]
    for _ in range(length - 1):
        out = [(*p, c) for p in out for c in range(max(p) + 2)]
    return out


_OUTCOME_ORDER = {Outcome.WIN: 0, Outcome.PUSH: 1, Outcome.LOSE: 2, Outcome.VOID: 3}


def _analysis(bet: Bet, hand: Hand | None, paytable: str, rules: BaccaratRules,
              weighted: Iterable[tuple[Ruling, int]]) -> WagerAnalysis:
    by_ruling: dict[Ruling, int] = {}
    total = 0
    for ruling, w in weighted:
        by_ruling[ruling] = by_ruling.get(ruling, 0) + w
        total += w
    outcomes = [
        OutcomeProbability(category=r.category, outcome=r.outcome, odds=r.odds,
                           probability=Fraction(w, total), net_per_unit=r.net_per_unit(rules))
        for r, w in by_ruling.items()
    ]
    outcomes.sort(key=lambda o: (_OUTCOME_ORDER[o.outcome], -o.net_per_unit, o.category))
    return WagerAnalysis(bet=bet, hand=hand, paytable=paytable, outcomes=tuple(outcomes))


def _main_label(bet: Bet, rules: BaccaratRules) -> str:
    if bet is Bet.BANKER:
        if rules.variant is BaccaratVariant.EZ:
            return "1 to 1, push on Dragon 7"
        if rules.takes_commission:
            pct = rules.commission.rate * 100
            shown = str(pct.numerator) if pct.denominator == 1 else f"{float(pct):g}"
            return f"1 to 1 less {shown}% commission"
        return "1 to 1"
    if bet is Bet.TIE:
        return str(rules.tie)
    if bet is Bet.DRAGON_7:
        return str(DRAGON_7_ODDS)
    if bet is Bet.PANDA_8:
        return str(PANDA_8_ODDS)
    return "1 to 1"


def analyze_baccarat(rules: BaccaratRules) -> list[WagerAnalysis]:
    """Exact analysis of every wager ``rules`` offers, for a full shoe of ``rules.decks`` decks.

    Returns, in this order: Player, Banker, Tie, (Dragon 7 and Panda 8 on EZ Baccarat), Dragon Bonus on
    the Player and on the Banker, Perfect Pairs on the Player and on the Banker, House Money. Each
    :class:`WagerAnalysis` lists every outcome (category, odds, exact probability, exact net per unit:
    a standard Banker win nets 1 - commission rate, unrounded).

    Sources: rules.md §0 (counting), §4 (the published figures this reproduces, e.g. 8 decks Banker edge
    1.0579 %, Player 1.2351 %, Tie 8 to 1 14.3596 %).
    """
    coups = _coups(rules.decks)
    out: list[WagerAnalysis] = []
    main_bets = [Bet.PLAYER, Bet.BANKER, Bet.TIE]
    if rules.offers(Bet.DRAGON_7):
        main_bets.append(Bet.DRAGON_7)
    if rules.offers(Bet.PANDA_8):
        main_bets.append(Bet.PANDA_8)
    for bet in main_bets:
        out.append(_analysis(bet, None, _main_label(bet, rules), rules,
                             ((rule_main_wager(bet, c, rules), w) for c, w in coups)))
    for hand in (Hand.PLAYER, Hand.BANKER):
        out.append(_analysis(Bet.DRAGON_BONUS, hand, rules.dragon_bonus.name, rules,
                             ((rule_dragon_bonus(hand, c, rules.dragon_bonus), w) for c, w in coups)))
    pp = perfect_pairs_weights(rules.decks)
    pp_rulings = [(rule_perfect_pairs(a, b, rules.perfect_pairs), w)
                  for a, row in pp.items() for b, w in row.items() if w]
    # The Player hand is cards 1 and 3, the Banker hand cards 2 and 4: from a full shoe either pair of
    # positions is an ordered two-card draw, so both hands have the same distribution.
    for hand in (Hand.PLAYER, Hand.BANKER):
        out.append(_analysis(Bet.PERFECT_PAIRS, hand, rules.perfect_pairs.name, rules, pp_rulings))
    out.append(_analysis(Bet.HOUSE_MONEY, None, rules.house_money.name, rules,
                         _house_money_rulings(rules)))
    return out


def _house_money_rulings(rules: BaccaratRules) -> Iterable[tuple[Ruling, int]]:
    card = {r: Card(r, Suit.SPADES) for r in Rank}  # House Money pairs are rank-only (§ 631a.8(a)(7)(i))
    paytable = rules.house_money
    for (r1, r2, r3, r4), w in house_money_weights(rules.decks).items():
        if w:
            yield rule_house_money((card[r1], card[r3]), (card[r2], card[r4]), paytable), w

