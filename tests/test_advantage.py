"""Advantage-play watch: exact pair-wager expected returns from the cards remaining in the shoe.

Oracles: the full-shoe analyses (rules.md §4.4, §4.6: WoO's figures, e.g. Perfect Pairs A -0.040964), and a
brute-force enumeration of every ordered deal from a small remainder, settled through the settlement
functions a live round uses (settle_two_card_wagers, settle_blackjack) with real stakes in cents.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import permutations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablesense.daemon.rules.advantage import (
    AdvantageFigure,
    AdvantageWatch,
    PairWager,
    advantage_report,
    favourable,
    house_money_pair_weights,
    offered_pair_wagers,
    ordered_two_card_weights,
    pair_kind_weights,
    parse_threshold,
)
from tablesense.daemon.rules.baccarat import BaccaratRules, settle_two_card_wagers
from tablesense.daemon.rules.baccarat_analysis import (
    analyze_baccarat,
    house_money_weights,
    perfect_pairs_weights,
)
from tablesense.daemon.rules.blackjack import BlackjackRules, analyze_blackjack, settle_blackjack
from tablesense.daemon.rules.cards import ALL_CARDS, Card, Rank, ShoeComposition
from tablesense.daemon.rules.settlement import Bet, Hand, Wager
from tablesense.daemon.rules.uth import UthRules

P, B = Hand.PLAYER, Hand.BANKER
STAKE = 1000


def remainder(decks: int, keep: list[Card]) -> ShoeComposition:
    """A shoe of ``decks`` decks with every card taken out except ``keep`` (a multiset)."""
    shoe = ShoeComposition(decks)
    left = {c: decks for c in ALL_CARDS}
    for c in keep:
        left[c] -= 1
    for c, n in left.items():
        for _ in range(n):
            shoe.take(c)
    return shoe


def cards_of(shoe: ShoeComposition) -> list[Card]:
    return [c for c, n in shoe.counts() for _ in range(n)]


def bac_rules(pp: str = "A", hm: str = "3-15", decks: int = 8) -> BaccaratRules:
    return BaccaratRules.from_names("baccarat", decks, {"perfect_pairs": pp, "house_money": hm})


def figures(report: list[AdvantageFigure]) -> dict[tuple[Bet, Hand | None], Fraction]:
    return {(f.bet, f.hand): f.expected_return for f in report}


# ------------------------------------------------------------------------------------ full shoe = analysis

@pytest.mark.parametrize("decks", [6, 8])
@pytest.mark.parametrize("pp", ["A", "B", "C"])
def test_full_baccarat_shoe_equals_the_analysis(decks: int, pp: str) -> None:
    rules = bac_rules(pp, "3-15", decks)
    analysis = {(a.bet, a.hand): a.expected_return for a in analyze_baccarat(rules)}
    report = advantage_report(ShoeComposition(decks), offered_pair_wagers(rules, ["perfect_pairs",
                                                                                   "house_money"]))
    assert [(f.bet, f.hand) for f in report] == [(Bet.PERFECT_PAIRS, P), (Bet.PERFECT_PAIRS, B),
                                                 (Bet.HOUSE_MONEY, None)]
    for f in report:
        assert f.expected_return == analysis[(f.bet, f.hand)]
        assert f.paytable == (pp if f.bet is Bet.PERFECT_PAIRS else "3-15")


def test_published_8_deck_perfect_pairs_figures() -> None:
    """rules.md §4.4/§4.6: 25/12/6 -0.040964, 30/10/5 -0.033735, 25/15/5 -0.021687, 25/12/5 -0.079518."""
    for pp, published in (("A", "-0.040964"), ("B", "-0.033735"), ("C", "-0.021687"),
                          ("25-12-5", "-0.079518")):
        wagers = offered_pair_wagers(bac_rules(pp), ["perfect_pairs"])
        [player, *_] = advantage_report(ShoeComposition(8), wagers)
        assert f"{float(player.expected_return):.6f}" == published
    assert advantage_report(ShoeComposition(8), offered_pair_wagers(bac_rules(), ["perfect_pairs"]))[0] \
        .expected_return == Fraction(-17, 415)


@pytest.mark.parametrize("decks", [1, 2, 6, 8])
@pytest.mark.parametrize("pt", ["25-12-6", "30-10-5", "25-15-5"])
def test_full_blackjack_shoe_equals_the_analysis(decks: int, pt: str) -> None:
    rules = BlackjackRules.from_names(decks, {"perfect_pairs": pt})
    [analysis] = analyze_blackjack(rules)
    wagers = offered_pair_wagers(rules, ["blackjack", "perfect_pairs"])
    [fig] = advantage_report(ShoeComposition(decks), wagers)
    assert (fig.bet, fig.hand, fig.paytable) == (Bet.PERFECT_PAIRS, None, pt)
    assert fig.expected_return == analysis.expected_return
    if decks == 2 and pt == "25-12-6":
        assert f"{float(fig.expected_return):.6f}" == "-0.223301"  # WoO, rules.md §4.6


@pytest.mark.parametrize("decks", [1, 4, 8])
def test_weights_generalise_the_full_shoe_functions(decks: int) -> None:
    shoe = ShoeComposition(decks)
    assert ordered_two_card_weights(shoe) == perfect_pairs_weights(decks)
    by_side: dict[tuple[bool, bool], int] = {}
    for (r1, r2, r3, r4), w in house_money_weights(decks).items():
        key = (r1 == r3, r2 == r4)
        by_side[key] = by_side.get(key, 0) + w
    assert house_money_pair_weights(shoe) == {k: by_side.get(k, 0) for k in house_money_pair_weights(shoe)}
    kinds = pair_kind_weights(shoe)
    n = 52 * decks
    assert sum(kinds.values()) == n * (n - 1)
    assert kinds[None] == sum(w for a, row in ordered_two_card_weights(shoe).items()
                              for b, w in row.items() if a.rank != b.rank)


# ------------------------------------------------------------------------------------ brute force

def brute_force_baccarat(shoe: ShoeComposition,
                         rules: BaccaratRules) -> dict[tuple[Bet, Hand | None], Fraction]:
    """Every ordered deal of the first four cards from the remainder, each copy a distinct object,
    settled by settle_two_card_wagers with real stakes."""
    wagers = [Wager("pp", Bet.PERFECT_PAIRS, STAKE, P), Wager("bp", Bet.PERFECT_PAIRS, STAKE, B),
              Wager("hm", Bet.HOUSE_MONEY, STAKE)]
    nets = [0, 0, 0]
    count = 0
    for four in permutations(cards_of(shoe), 4):
        for i, s in enumerate(settle_two_card_wagers(four, wagers, rules)):
            nets[i] += s.net
        count += 1
    keys = [(Bet.PERFECT_PAIRS, P), (Bet.PERFECT_PAIRS, B), (Bet.HOUSE_MONEY, None)]
    return {k: Fraction(n, count * STAKE) for k, n in zip(keys, nets, strict=True)}


def brute_force_blackjack(shoe: ShoeComposition, rules: BlackjackRules) -> Fraction:
    wagers = [Wager("3", Bet.BLACKJACK, STAKE), Wager("3", Bet.PERFECT_PAIRS, STAKE)]
    total = count = 0
    for two in permutations(cards_of(shoe), 2):
        [s] = settle_blackjack({"3": list(two)}, wagers, rules)
        total += s.net
        count += 1
    return Fraction(total, count * STAKE)


SMALL = [Card.parse(t) for t in ("7S", "7S", "7H", "7C", "7D", "KD", "2C", "2C", "QH")]


def test_small_composition_matches_brute_force() -> None:
    shoe = remainder(2, SMALL)
    rules = bac_rules("B", "3-15", 2)
    got = figures(advantage_report(shoe, offered_pair_wagers(rules, ["perfect_pairs", "house_money"])))
    assert got == brute_force_baccarat(shoe, rules)
    bj = BlackjackRules.from_names(2, {"perfect_pairs": "25-12-6"})
    [fig] = advantage_report(shoe, offered_pair_wagers(bj, ["perfect_pairs"]))
    assert fig.expected_return == brute_force_blackjack(shoe, bj)
    assert fig.expected_return > 0  # five sevens in nine cards


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(ALL_CARDS[:3] + ALL_CARDS[13:16] + ALL_CARDS[26:29] + ALL_CARDS[39:42]),
                min_size=4, max_size=7),
       st.sampled_from(["A", "B", "C"]), st.sampled_from(["3-15", "2-20"]))
def test_any_small_remainder_matches_brute_force(keep: list[Card], pp: str, hm: str) -> None:
    """Remainders of a 2-deck shoe drawn from aces, twos and threes of all suits: many pairs of every
    grade. A copy beyond two of one card is dropped (the shoe cannot hold it)."""
    seen: dict[Card, int] = {}
    kept = []
    for c in keep:
        if seen.get(c, 0) < 2:
            seen[c] = seen.get(c, 0) + 1
            kept.append(c)
    shoe = remainder(2, kept)
    rules = bac_rules(pp, hm, 2)
    report = advantage_report(shoe, offered_pair_wagers(rules, ["perfect_pairs", "house_money"]))
    if len(kept) < 4:
        assert [f.bet for f in report] == [Bet.PERFECT_PAIRS, Bet.PERFECT_PAIRS]
        return
    assert figures(report) == brute_force_baccarat(shoe, rules)


def test_too_few_cards_leaves_the_wager_out() -> None:
    rules = bac_rules("A", "3-15", 1)
    wagers = offered_pair_wagers(rules, ["perfect_pairs", "house_money"])
    three = remainder(1, [Card.parse(t) for t in ("AS", "AH", "2C")])
    assert [f.bet for f in advantage_report(three, wagers)] == [Bet.PERFECT_PAIRS, Bet.PERFECT_PAIRS]
    one = remainder(1, [Card.parse("AS")])
    assert advantage_report(one, wagers) == []


# ------------------------------------------------------------------------------------ turning positive

def test_rank_rich_remainder_turns_positive() -> None:
    """Late in an 8-deck shoe with 24 sevens among the last 60 cards every pair wager favours the player."""
    sevens = [c for c in ALL_CARDS if c.rank is Rank.SEVEN] * 6  # 24 sevens, 6 of each suit
    others = [c for c in ALL_CARDS if c.rank not in (Rank.SEVEN,)][:36]  # 36 distinct non-sevens
    shoe = remainder(8, sevens + others)
    assert shoe.remaining == 60
    rules = bac_rules()
    report = advantage_report(shoe, offered_pair_wagers(rules, ["perfect_pairs", "house_money"]))
    assert all(f.expected_return > 0 for f in report)
    assert favourable(report) == report
    assert favourable(report, parse_threshold("1000%")) == []
    full = advantage_report(ShoeComposition(8), offered_pair_wagers(rules, ["perfect_pairs", "house_money"]))
    assert favourable(full) == []


def test_depleted_of_pairs_stays_negative() -> None:
    shoe = remainder(8, list(ALL_CARDS[:13]))  # one card of each rank: no pair possible at all
    rules = bac_rules()
    report = advantage_report(shoe, offered_pair_wagers(rules, ["perfect_pairs", "house_money"]))
    assert [f.expected_return for f in report] == [-1, -1, -1]


# ------------------------------------------------------------------------------------ offered wagers

def test_offered_pair_wagers_per_game() -> None:
    rules = bac_rules()
    assert offered_pair_wagers(rules, ["player", "banker"]) == []
    hm = PairWager(Bet.HOUSE_MONEY, None, rules.house_money)
    assert offered_pair_wagers(rules, ["house_money"]) == [hm]
    bj = BlackjackRules.from_names(6, None)
    assert offered_pair_wagers(bj, ["blackjack"]) == []
    uth = UthRules.from_names(1, None)
    assert offered_pair_wagers(uth, ["ante", "ultimate_pairs"]) == []  # one deck reshuffled per round


def test_unknown_wager_is_refused() -> None:
    with pytest.raises(ValueError, match="not a pair wager"):
        advantage_report(ShoeComposition(8), [PairWager(Bet.TIE, None, bac_rules().perfect_pairs)])


# ------------------------------------------------------------------------------------ threshold & watch

@pytest.mark.parametrize(("text", "value"), [("0", Fraction(0)), ("0.005", Fraction(1, 200)),
                                             ("-0.01", Fraction(-1, 100)), ("1/200", Fraction(1, 200)),
                                             ("0.5%", Fraction(1, 200)), (" 2 % ", Fraction(1, 50))])
def test_parse_threshold(text: str, value: Fraction) -> None:
    assert parse_threshold(text) == value


@pytest.mark.parametrize("text", ["", "abc", "nan", "inf", "1/0", "11", "-150%", "1001%", "0.1.2", "x" * 40,
                                  "1e999999"])
def test_parse_threshold_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="advantage_threshold") as exc:
        parse_threshold(text)
    assert "\n" not in str(exc.value)


def fig(er: Fraction, hand: Hand | None = P) -> AdvantageFigure:
    return AdvantageFigure(Bet.PERFECT_PAIRS, hand, "A", er)


def test_watch_raises_once_and_clears() -> None:
    watch = AdvantageWatch(Fraction(0))
    assert watch.update([fig(Fraction(-1, 10)), fig(Fraction(-1, 10), B)]) == ([], [])
    up = fig(Fraction(1, 50))
    assert watch.update([up, fig(Fraction(-1, 10), B)]) == ([up], [])
    assert watch.update([fig(Fraction(1, 40)), fig(Fraction(-1, 10), B)]) == ([], [])  # still up: no repeat
    assert watch.active == [fig(Fraction(1, 40))]
    at = fig(Fraction(0))  # not strictly above the threshold
    assert watch.update([at, fig(Fraction(-1, 10), B)]) == ([], [at])
    assert watch.update([up]) == ([up], [])
    assert watch.reset() == [up]
    assert watch.active == []


def test_figure_text() -> None:
    f = fig(Fraction(-17, 415))
    assert f.fraction == "-17/415"
    assert f.percent == "-4.0964"
    assert f.key == ("perfect_pairs", "player")
    assert f.describe() == ("perfect_pairs on player (paytable A): expected return -4.0964 % per unit "
                            "(-17/415)")
    assert fig(Fraction(1, 3), None).percent == "+33.3333"
    assert fig(Fraction(1, 3), None).detail(Fraction(1, 200)) == {
        "bet": "perfect_pairs", "hand": "", "paytable": "A", "expected_return": "1/3", "percent": "+33.3333",
        "threshold": "1/200"}
