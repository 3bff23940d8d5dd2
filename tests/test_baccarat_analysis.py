"""Exact baccarat analysis: the published figures of rules.md §4, asserted to the digits given."""

from __future__ import annotations

import json
from fractions import Fraction
from math import comb

import pytest

from tablesense.daemon.rules.analysis import WagerAnalysis
from tablesense.daemon.rules.baccarat import BaccaratRules
from tablesense.daemon.rules.baccarat_analysis import (
    RoundKey,
    analyze_baccarat,
    house_money_weights,
    perfect_pairs_weights,
    round_weights,
    six_card_base,
)
from tablesense.daemon.rules.errors import RulesError
from tablesense.daemon.rules.money import CommissionRule, Odds
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome

P, B = Hand.PLAYER, Hand.BANKER
TOTAL_8 = 4_998_398_275_503_360
BANKER_8 = 2_292_252_566_437_888
PLAYER_8 = 2_230_518_282_592_256
TIE_8 = 475_627_426_473_216


def analyses(variant: str = "baccarat", decks: int = 8, paytables: dict[str, str] | None = None,
             commission: CommissionRule | None = None) -> dict[tuple[Bet, Hand | None], WagerAnalysis]:
    rules = BaccaratRules.from_names(variant, decks, paytables, commission)
    return {(a.bet, a.hand): a for a in analyze_baccarat(rules)}


def pct(x: Fraction, places: int) -> str:
    return f"{float(x * 100):.{places}f}"


def prob(a: WagerAnalysis, category: str) -> Fraction:
    [p] = [o.probability for o in a.outcomes if o.category == category]
    return p


@pytest.fixture(scope="module")
def std8() -> dict[tuple[Bet, Hand | None], WagerAnalysis]:
    return analyses()


@pytest.fixture(scope="module")
def ez8() -> dict[tuple[Bet, Hand | None], WagerAnalysis]:
    return analyses("ez-baccarat")


def test_six_card_base() -> None:
    assert six_card_base(8) == TOTAL_8 == 416 * 415 * 414 * 413 * 412 * 411
    assert sum(round_weights(8).values()) == TOTAL_8


def test_main_outcome_counts_8_decks(std8: dict[tuple[Bet, Hand | None], WagerAnalysis]) -> None:
    """rules.md §4.1: WoO's 8-deck combination counts, exactly."""
    weights = round_weights(8)
    banker = sum(w for k, w in weights.items() if k.banker_points > k.player_points)
    player = sum(w for k, w in weights.items() if k.player_points > k.banker_points)
    tie = sum(w for k, w in weights.items() if k.player_points == k.banker_points)
    assert (banker, player, tie) == (BANKER_8, PLAYER_8, TIE_8)
    a = std8[(Bet.PLAYER, None)]
    assert prob(a, "banker_win") == Fraction(BANKER_8, TOTAL_8)
    assert prob(a, "player_win") == Fraction(PLAYER_8, TOTAL_8)
    assert prob(a, "tie") == Fraction(TIE_8, TOTAL_8)
    assert [f"{float(prob(a, c)):.6f}" for c in ("banker_win", "player_win", "tie")] == \
        ["0.458597", "0.446247", "0.095156"]


def test_main_edges_8_decks(std8: dict[tuple[Bet, Hand | None], WagerAnalysis]) -> None:
    """rules.md §4.1: Banker 1.0579 % (5 %), Player 1.2351 %, Tie 8 to 1 14.3596 %."""
    assert pct(std8[(Bet.BANKER, None)].house_edge, 4) == "1.0579"
    assert pct(std8[(Bet.PLAYER, None)].house_edge, 4) == "1.2351"
    assert pct(std8[(Bet.TIE, None)].house_edge, 4) == "14.3596"
    banker_win = [o for o in std8[(Bet.BANKER, None)].outcomes if o.outcome is Outcome.WIN]
    assert [(o.category, o.odds, o.net_per_unit) for o in banker_win] == [("banker_win", Odds(1),
                                                                           Fraction(19, 20))]


def test_banker_edge_4_percent_and_tie_9_to_1() -> None:
    """rules.md §4.1: Banker at 4 % commission 0.5993 %; Tie at 9 to 1 4.8440 %."""
    a = analyses(paytables={"tie": "9-1"}, commission=CommissionRule(rate=Fraction(4, 100)))
    assert pct(a[(Bet.BANKER, None)].house_edge, 4) == "0.5993"
    assert pct(a[(Bet.TIE, None)].house_edge, 4) == "4.8440"
    assert a[(Bet.TIE, None)].paytable == "9 to 1"
    assert a[(Bet.BANKER, None)].paytable == "1 to 1 less 4% commission"


def test_ez_dragon_7_and_panda_8(ez8: dict[tuple[Bet, Hand | None], WagerAnalysis]) -> None:
    """rules.md §4.2: Dragon 7 p = 0.022534, EV -0.076113 (7.61 %); Panda 8 p = 0.034543, EV -0.101876."""
    d7, p8 = ez8[(Bet.DRAGON_7, None)], ez8[(Bet.PANDA_8, None)]
    assert f"{float(prob(d7, 'dragon_7')):.6f}" == "0.022534"
    assert f"{float(prob(d7, 'dragon_7')):.9f}" == "0.022533821"
    assert f"{float(d7.expected_return):.6f}" == "-0.076113" and pct(d7.house_edge, 2) == "7.61"
    assert f"{float(prob(p8, 'panda_8')):.6f}" == "0.034543"
    assert f"{float(prob(p8, 'panda_8')):.9f}" == "0.034543218"
    assert f"{float(p8.expected_return):.6f}" == "-0.101876" and pct(p8.house_edge, 2) == "10.19"
    assert pct(d7.house_edge, 4) == "7.6113" and pct(p8.house_edge, 4) == "10.1876"  # 888 blog figures


def test_ez_banker_pushes_on_dragon_7(ez8: dict[tuple[Bet, Hand | None], WagerAnalysis],
                                      std8: dict[tuple[Bet, Hand | None], WagerAnalysis]) -> None:
    banker = ez8[(Bet.BANKER, None)]
    d7 = prob(ez8[(Bet.DRAGON_7, None)], "dragon_7")
    assert prob(banker, "dragon_7") == d7
    assert prob(banker, "banker_win") + d7 == prob(std8[(Bet.PLAYER, None)], "banker_win")
    assert banker.expected_return == prob(banker, "banker_win") - prob(banker, "player_win")
    assert banker.paytable == "1 to 1, push on Dragon 7"
    assert all(o.net_per_unit in (1, 0, -1) for o in banker.outcomes)


def test_dragon_bonus_edges(std8: dict[tuple[Bet, Hand | None], WagerAnalysis]) -> None:
    """rules.md §4.3: 2.65 % on the Player side, 9.37 % on the Banker side (8 decks)."""
    player, banker = std8[(Bet.DRAGON_BONUS, P)], std8[(Bet.DRAGON_BONUS, B)]
    assert pct(player.house_edge, 2) == "2.65"
    assert pct(banker.house_edge, 2) == "9.37"
    categories = {"natural_win", "natural_tie", "win_by_9", "win_by_8", "win_by_7", "win_by_6", "win_by_5",
                  "win_by_4", "lose"}
    assert {o.category for o in player.outcomes} == categories == {o.category for o in banker.outcomes}
    # a natural tie is the same event for both sides; so is "a natural wins" overall
    assert prob(player, "natural_tie") == prob(banker, "natural_tie")


@pytest.mark.parametrize(("paytable", "edge"), [
    ("A", "4.0964"), ("B", "3.3735"), ("C", "2.1687"), ("25-12-5", "7.9518"),
])
def test_perfect_pairs_edges_8_decks(paytable: str, edge: str) -> None:
    """rules.md §4.4: § 627c.1 paytables A, B, C and the 8-deck 25/12/5, per hand."""
    a = analyses(paytables={"perfect_pairs": paytable})
    for hand in (P, B):
        assert pct(a[(Bet.PERFECT_PAIRS, hand)].house_edge, 4) == edge
        assert a[(Bet.PERFECT_PAIRS, hand)].paytable == paytable


def test_perfect_pairs_probabilities_8_decks(std8: dict[tuple[Bet, Hand | None], WagerAnalysis]) -> None:
    a = std8[(Bet.PERFECT_PAIRS, P)]
    base = comb(416, 2)
    assert prob(a, "perfect_pair") == Fraction(1456, base)
    assert prob(a, "colored_pair") == Fraction(1664, base)
    assert prob(a, "mixed_pair") == Fraction(3328, base)
    assert prob(a, "no_pair") == Fraction(79872, base)
    assert sum(sum(row.values()) for row in perfect_pairs_weights(8).values()) == 416 * 415


def _house_money_closed_form(decks: int) -> tuple[Fraction, Fraction]:
    """P(both hands paired), P(exactly one) from C(.,.) counts: unordered two-card hands, Player then
    Banker, C(N,2)·C(N-2,2) in all."""
    n, k = 52 * decks, 4 * decks
    base = comb(n, 2) * comb(n - 2, 2)
    both = 13 * comb(k, 2) * comb(k - 2, 2) + 13 * 12 * comb(k, 2) ** 2
    player_pair = 13 * comb(k, 2) * comb(n - 2, 2)  # the Banker's two cards are anything
    one = 2 * (player_pair - both)
    return Fraction(both, base), Fraction(one, base)


@pytest.mark.parametrize("decks", [1, 2, 6, 8])
def test_house_money_matches_closed_form(decks: int) -> None:
    """§ 631a.8(a)(7): no published figure (rules.md §4.5); enumeration through the ruling function must
    equal the closed form, and the probabilities must sum to 1."""
    a = analyses(decks=decks)[(Bet.HOUSE_MONEY, None)]
    both, one = _house_money_closed_form(decks)
    assert prob(a, "both_pairs") == both
    assert prob(a, "one_pair") == one
    assert prob(a, "no_pair") == 1 - both - one
    assert sum(o.probability for o in a.outcomes) == 1
    assert a.expected_return == 15 * both + 3 * one - (1 - both - one)
    n = 52 * decks
    assert sum(house_money_weights(decks).values()) == n * (n - 1) * (n - 2) * (n - 3)


def test_house_money_8_decks_value() -> None:
    a = analyses()[(Bet.HOUSE_MONEY, None)]
    assert f"{float(a.house_edge):.6f}" == "0.357764"  # computed, no parlay (no published figure)


@pytest.mark.parametrize("decks", range(1, 9))
def test_every_analysis_is_a_distribution(decks: int) -> None:
    assert sum(round_weights(decks).values()) == six_card_base(decks)
    for variant in ("baccarat", "ez-baccarat"):
        for a in analyze_baccarat(BaccaratRules.from_names(variant, decks)):
            assert sum(o.probability for o in a.outcomes) == 1, (variant, a.bet, a.hand)
            assert all(o.probability > 0 for o in a.outcomes)
            assert len({o.category for o in a.outcomes}) == len(a.outcomes)


def test_wager_list_and_order(std8: dict[tuple[Bet, Hand | None], WagerAnalysis],
                              ez8: dict[tuple[Bet, Hand | None], WagerAnalysis]) -> None:
    common = [(Bet.DRAGON_BONUS, P), (Bet.DRAGON_BONUS, B), (Bet.PERFECT_PAIRS, P), (Bet.PERFECT_PAIRS, B),
              (Bet.HOUSE_MONEY, None)]
    main = [(Bet.PLAYER, None), (Bet.BANKER, None), (Bet.TIE, None)]
    assert list(std8) == main + common
    assert list(ez8) == [*main, (Bet.DRAGON_7, None), (Bet.PANDA_8, None), *common]


def test_to_dict_is_json(std8: dict[tuple[Bet, Hand | None], WagerAnalysis]) -> None:
    d = std8[(Bet.PERFECT_PAIRS, P)].to_dict()
    json.dumps(d)
    assert d["bet"] == "perfect_pairs" and d["hand"] == "player" and d["paytable"] == "A"
    assert d["house_edge"] == 0.040964
    assert [o["category"] for o in d["outcomes"]] == ["perfect_pair", "colored_pair", "mixed_pair", "no_pair"]
    assert d["outcomes"][0]["fraction"] == str(Fraction(1456, comb(416, 2))).replace(" ", "")


def test_round_weights_rejects_bad_decks() -> None:
    with pytest.raises(RulesError):
        round_weights(9)
    with pytest.raises(RulesError):
        house_money_weights(0)


# ----------------------------------------------------------------------------------- independent oracle

_TABLE_1 = {0: "DDDDDDDDDD", 1: "DDDDDDDDDD", 2: "DDDDDDDDDD", 3: "DDDDDDDDSD", 4: "SSDDDDDDSS",
            5: "SSSSDDDDSS", 6: "SSSSSSDDSS", 7: "SSSSSSSSSS"}


def _oracle_round_weights(decks: int) -> dict[RoundKey, int]:
    """A straightforward re-implementation of rules.md §0 with its own drawing table: every ordered
    (P1, B1, P2, B2) and third cards, no grouping, no shared code with the rules core."""
    n = 52 * decks
    counts = [16 * decks] + [4 * decks] * 9
    out: dict[RoundKey, int] = {}

    def add(key: RoundKey, w: int) -> None:
        out[key] = out.get(key, 0) + w

    def take(v: int) -> int:
        c = counts[v]
        counts[v] -= 1
        return c

    for p1 in range(10):
        w1 = take(p1)
        for b1 in range(10):
            w2 = w1 * take(b1)
            for p2 in range(10):
                w3 = w2 * take(p2)
                for b2 in range(10):
                    w4 = w3 * take(b2)
                    pt, bt = (p1 + p2) % 10, (b1 + b2) % 10
                    if pt >= 8 or bt >= 8 or (pt >= 6 and bt >= 6):
                        add(RoundKey(pt, bt, 2, 2), w4 * (n - 4) * (n - 5))
                    elif pt >= 6:
                        for b3 in range(10):
                            add(RoundKey(pt, (bt + b3) % 10, 2, 3), w4 * counts[b3] * (n - 5))
                    else:
                        for p3 in range(10):
                            w5 = w4 * take(p3)
                            pt3 = (pt + p3) % 10
                            if _TABLE_1[bt][p3] == "D":
                                for b3 in range(10):
                                    add(RoundKey(pt3, (bt + b3) % 10, 3, 3), w5 * counts[b3])
                            else:
                                add(RoundKey(pt3, bt, 3, 2), w5 * (n - 5))
                            counts[p3] += 1
                    counts[b2] += 1
                counts[p2] += 1
            counts[b1] += 1
        counts[p1] += 1
    return {k: w for k, w in out.items() if w}


def test_round_weights_match_an_independent_oracle_for_one_deck() -> None:
    """The grouped enumeration equals a plain one for a single deck, where running out of a value
    matters most (only 4 aces)."""
    assert round_weights(1) == _oracle_round_weights(1)
