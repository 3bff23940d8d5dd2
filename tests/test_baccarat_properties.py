"""Property tests of the baccarat rules core over random shoes and wagers (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablesense.daemon.rules.baccarat import (
    BaccaratRules,
    coup_from_cards,
    next_card_hand,
    point_count,
    settle_baccarat,
    settle_two_card_wagers,
)
from tablesense.daemon.rules.cards import ALL_CARDS, Card
from tablesense.daemon.rules.errors import IncompleteRound, TooManyCards
from tablesense.daemon.rules.money import CommissionRule, Odds, RoundingMode, winnings
from tablesense.daemon.rules.pairs import classify_pair
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome, Wager

RULES = [BaccaratRules.from_names("baccarat", 8),
         BaccaratRules.from_names("ez-baccarat", 8, {"perfect_pairs": "25-12-5"}),
         BaccaratRules.from_names("baccarat", 6, {"tie": "9-1", "perfect_pairs": "B", "house_money": "2-11"},
                                  CommissionRule(unit=25, mode=RoundingMode.UP)),
         BaccaratRules.from_names("baccarat", 8, commission=CommissionRule(mode=RoundingMode.HALF_EVEN))]

# Seven cards from an 8-deck shoe: no card can appear more than 7 times, so every sequence is possible.
shoe_run = st.lists(st.sampled_from(ALL_CARDS), min_size=7, max_size=7)


def deal(run: list[Card]) -> list[Card]:
    """Take cards from ``run`` one at a time while next_card_hand asks for another."""
    dealt: list[Card] = []
    while next_card_hand(dealt) is not None:
        dealt.append(run[len(dealt)])
    return dealt


@given(shoe_run)
def test_every_round_uses_4_to_6_cards_and_next_card_hand_agrees_with_coup(run: list[Card]) -> None:
    dealt = deal(run)
    assert 4 <= len(dealt) <= 6
    hands = [next_card_hand(dealt[:i]) for i in range(len(dealt))]
    coup = coup_from_cards(dealt)
    assert coup.player_cards == tuple(c for c, h in zip(dealt, hands, strict=True) if h is Hand.PLAYER)
    assert coup.banker_cards == tuple(c for c, h in zip(dealt, hands, strict=True) if h is Hand.BANKER)
    assert hands[:4] == [Hand.PLAYER, Hand.BANKER, Hand.PLAYER, Hand.BANKER]
    assert coup.player_points == point_count(coup.player_cards)
    assert coup.banker_points == point_count(coup.banker_cards)
    assert 2 <= len(coup.player_cards) <= 3 and 2 <= len(coup.banker_cards) <= 3
    assert not ((coup.player_natural or coup.banker_natural) and len(dealt) > 4)
    with pytest.raises(IncompleteRound):
        coup_from_cards(dealt[:-1])
    with pytest.raises(TooManyCards):
        coup_from_cards(run[: len(dealt) + 1])
    with pytest.raises(TooManyCards):
        next_card_hand(run[: len(dealt) + 1])


@given(shoe_run)
def test_coup_facts_are_consistent(run: list[Card]) -> None:
    coup = coup_from_cards(deal(run))
    p, b = coup.player_points, coup.banker_points
    assert coup.winner is (Hand.PLAYER if p > b else Hand.BANKER if b > p else None)
    assert coup.is_dragon_7 == (coup.winner is Hand.BANKER and len(coup.banker_cards) == 3 and b == 7)
    assert coup.is_panda_8 == (coup.winner is Hand.PLAYER and len(coup.player_cards) == 3 and p == 8)
    assert coup.player_pair == (coup.player_cards[0].rank == coup.player_cards[1].rank)
    assert coup.banker_pair == (coup.banker_cards[0].rank == coup.banker_cards[1].rank)
    assert coup_from_cards(coup.cards) == coup
    d = coup.to_dict()
    assert d["winner"] in ("player", "banker", "tie")
    assert [Card.parse(t) for t in d["player"]] == list(coup.player_cards)


def _wagers(rules: BaccaratRules) -> st.SearchStrategy[list[Wager]]:
    bets = [b for b in Bet if rules.offers(b)]

    @st.composite
    def one(draw: st.DrawFn) -> Wager:
        bet = draw(st.sampled_from(bets))
        hand = draw(st.sampled_from([Hand.PLAYER, Hand.BANKER])) if bet in (
            Bet.PERFECT_PAIRS, Bet.DRAGON_BONUS) else None
        return Wager(str(draw(st.integers(1, 7))), bet, draw(st.integers(1, 10**8)), hand)

    return st.lists(one(), max_size=12)


@settings(max_examples=300)
@given(st.data(), shoe_run, st.sampled_from(RULES))
def test_settlements_are_exact_integers(data: st.DataObject, run: list[Card], rules: BaccaratRules) -> None:
    """No settlement net is ever a float; nets follow the outcome; commission only on a Banker win."""
    wagers = data.draw(_wagers(rules))
    dealt = deal(run)
    result = settle_baccarat(dealt, wagers, rules)
    assert [s.wager for s in result] == wagers
    for s in result:
        assert type(s.net) is int and type(s.commission) is int
        stake = s.wager.stake
        if s.outcome is Outcome.WIN:
            assert isinstance(s.odds, Odds)
            assert s.net == winnings(stake, s.odds) - s.commission
            assert s.net >= 0
            if s.commission:
                assert s.wager.bet is Bet.BANKER and rules.takes_commission
                exact = rules.commission.rate * stake
                assert abs(s.commission - exact) < rules.commission.unit
        elif s.outcome is Outcome.LOSE:
            assert s.net == -stake and s.odds is None and s.commission == 0
        else:
            assert s.outcome is Outcome.PUSH and s.net == 0 and s.odds is None
        assert isinstance(s.to_dict()["net"], int)
    two_card = [w for w in wagers if w.bet in (Bet.PERFECT_PAIRS, Bet.HOUSE_MONEY)]
    early = settle_two_card_wagers(dealt[:4], two_card, rules)
    assert early == [s for s in result if s.wager.bet in (Bet.PERFECT_PAIRS, Bet.HOUSE_MONEY)]


@given(shoe_run)
def test_dragon_bonus_never_wins_on_both_sides(run: list[Card]) -> None:
    rules = RULES[0]
    wagers = [Wager("1", Bet.DRAGON_BONUS, 100, Hand.PLAYER), Wager("1", Bet.DRAGON_BONUS, 100, Hand.BANKER)]
    p, b = settle_baccarat(deal(run), wagers, rules)
    assert not (p.outcome is Outcome.WIN and b.outcome is Outcome.WIN)
    assert (p.outcome is Outcome.PUSH) == (b.outcome is Outcome.PUSH)


@given(st.sampled_from(ALL_CARDS), st.sampled_from(ALL_CARDS))
def test_pair_classification_is_symmetric(a: Card, b: Card) -> None:
    assert classify_pair(a, b) == classify_pair(b, a)
