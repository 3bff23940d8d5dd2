"""Baccarat settlement: every wager, every paytable line, commission, EZ, errors (§ 631a.8, § 627c.1)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tablesense.daemon.rules.baccarat import (
    BaccaratRules,
    BaccaratVariant,
    InvalidRulesSubmission,
    Ruling,
    coup_from_cards,
    rule_dragon_bonus,
    settle_baccarat,
    settle_two_card_wagers,
)
from tablesense.daemon.rules.baccarat_wagers import (
    DRAGON_BONUS_PAYTABLES,
    lookup_dragon_bonus,
    lookup_fixed_odds,
    lookup_house_money,
    lookup_tie,
)
from tablesense.daemon.rules.cards import Card, CardNotInShoe
from tablesense.daemon.rules.errors import IncompleteRound, RulesError, TooManyCards, WagerNotOffered
from tablesense.daemon.rules.money import CommissionRule, Odds, RoundingMode
from tablesense.daemon.rules.pairs import PaytableNotAllowed
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome, Settlement, Wager

P, B = Hand.PLAYER, Hand.BANKER
STD = BaccaratRules.from_names("baccarat", 8)
EZ = BaccaratRules.from_names("ez-baccarat", 8)

PLAYER_NATURAL_9 = "9S KD KH 7D"  # P 9 natural, B 7
NATURALS_9_8 = "9S 8D KH KD"  # P natural 9, B natural 8
NATURAL_TIE = "9S 9D KH KC"
BANKER_NATURAL = "2S 5D 3H 3C"  # P 5, B natural 8
DRAGON_7 = "2S KD 3H 3D KC 4S"  # P 5; B 3 draws to a three-card 7
PANDA_8 = "AS KD 2H 6D 5H"  # P 3 draws to a three-card 8; B 6 stands
BANKER_PLAIN_WIN = "2S 3D 4H 4C"  # P 6, B 7, both stand


def cards(text: str) -> list[Card]:
    return [Card.parse(t) for t in text.split()]


def settle(text: str, bet: Bet, hand: Hand | None = None, stake: int = 1000,
           rules: BaccaratRules = STD) -> Settlement:
    [s] = settle_baccarat(cards(text), [Wager("1", bet, stake, hand)], rules)
    assert s.wager.stake == stake
    return s


# --------------------------------------------------------------------------------------------- rules


def test_defaults() -> None:
    assert STD.variant is BaccaratVariant.STANDARD and STD.decks == 8
    assert STD.commission == CommissionRule()
    assert STD.tie == Odds(8)
    assert STD.perfect_pairs.name == "A"
    assert STD.dragon_bonus.name == "standard"
    assert (STD.house_money.one_pair, STD.house_money.both_pairs) == (Odds(3), Odds(15))
    assert EZ.commission.rate == 0 and not EZ.takes_commission and STD.takes_commission


def test_from_names_paytables() -> None:
    rules = BaccaratRules.from_names("baccarat", 8, {"perfect_pairs": "25-12-5", "tie": "9 to 1",
                                                     "house_money": "4-20", "dragon_bonus": "standard"})
    assert rules.perfect_pairs.name == "25-12-5" and rules.tie == Odds(9)
    assert (rules.house_money.one_pair, rules.house_money.both_pairs) == (Odds(4), Odds(20))
    six = BaccaratRules.from_names("baccarat", 6, {"perfect_pairs": "c", "tie": "8-1"})
    assert six.perfect_pairs.name == "C"
    assert BaccaratRules.from_names("EZ-Baccarat", 8, {"dragon_7": "40-1", "panda_8": "25 to 1"}) == EZ
    assert BaccaratRules.from_names("ez-baccarat", 8, commission=CommissionRule(rate=Fraction(0))) == EZ


@pytest.mark.parametrize(("args", "error", "text"), [
    (("punto", 8), InvalidRulesSubmission, "unknown baccarat game"),
    (("baccarat", 9), InvalidRulesSubmission, "decks"),
    (("baccarat", 0), InvalidRulesSubmission, "decks"),
    (("baccarat", 6, {"perfect_pairs": "25-12-5"}), PaytableNotAllowed, "8 decks only"),
    (("baccarat", 8, {"perfect_pairs": "Z"}), PaytableNotAllowed, "unknown paytable"),
    (("baccarat", 8, {"tie": "7-1"}), PaytableNotAllowed, "8-1 or 9-1"),
    (("baccarat", 8, {"tie": "lots"}), PaytableNotAllowed, "tie"),
    (("baccarat", 8, {"dragon_bonus": "golden"}), PaytableNotAllowed, "dragon_bonus"),
    (("baccarat", 8, {"house_money": "15-3"}), PaytableNotAllowed, "house_money"),
    (("baccarat", 8, {"house_money": "x"}), PaytableNotAllowed, "house_money"),
    (("baccarat", 8, {"dragon_7": "40-1"}), InvalidRulesSubmission, "no paytable for bet 'dragon_7'"),
    (("baccarat", 8, {"player": "1-1"}), InvalidRulesSubmission, "no paytable"),
    (("baccarat", 8, {"ultimate_pairs": "A"}), InvalidRulesSubmission, "no paytable"),
    (("ez-baccarat", 8, {"dragon_7": "30-1"}), PaytableNotAllowed, "only 40-1"),
    (("ez-baccarat", 8, None, CommissionRule()), InvalidRulesSubmission, "no commission"),
])
def test_from_names_errors_are_one_line_rules_errors(args: tuple[object, ...], error: type[Exception],
                                                     text: str) -> None:
    with pytest.raises(error, match=text) as info:
        BaccaratRules.from_names(*args)  # type: ignore[arg-type]
    assert isinstance(info.value, RulesError)
    assert "\n" not in str(info.value)


def test_direct_construction_is_validated() -> None:
    with pytest.raises(InvalidRulesSubmission):
        BaccaratRules(BaccaratVariant.EZ, 8)  # EZ with the default 5 % commission
    with pytest.raises(PaytableNotAllowed):
        BaccaratRules(BaccaratVariant.STANDARD, 6, perfect_pairs=STD.__class__.from_names(
            "baccarat", 8, {"perfect_pairs": "25-12-5"}).perfect_pairs)


def test_offers() -> None:
    for bet in (Bet.PLAYER, Bet.BANKER, Bet.TIE, Bet.DRAGON_BONUS, Bet.PERFECT_PAIRS, Bet.HOUSE_MONEY):
        assert STD.offers(bet) and EZ.offers(bet)
    for bet in (Bet.DRAGON_7, Bet.PANDA_8):
        assert EZ.offers(bet) and not STD.offers(bet)
    for bet in (Bet.BLACKJACK, Bet.ANTE, Bet.ULTIMATE_PAIRS):
        assert not STD.offers(bet) and not EZ.offers(bet)


def test_paytable_lookups() -> None:
    assert lookup_tie("8") == Odds(8) and lookup_tie("9:1") == Odds(9)
    assert lookup_dragon_bonus("30-10-6-4-2-1") is DRAGON_BONUS_PAYTABLES["standard"]
    assert lookup_house_money("standard").name == "3-15"
    assert lookup_fixed_odds("dragon_7", "40 to 1", Odds(40)) == Odds(40)
    with pytest.raises(ValueError):
        DRAGON_BONUS_PAYTABLES["standard"].odds_for_margin(0)


# --------------------------------------------------------------------------------------------- main wagers


@pytest.mark.parametrize(("text", "bet", "outcome", "category", "net"), [
    (PLAYER_NATURAL_9, Bet.PLAYER, Outcome.WIN, "player_win", 1000),
    (PLAYER_NATURAL_9, Bet.BANKER, Outcome.LOSE, "player_win", -1000),
    (PLAYER_NATURAL_9, Bet.TIE, Outcome.LOSE, "player_win", -1000),
    (BANKER_NATURAL, Bet.PLAYER, Outcome.LOSE, "banker_win", -1000),
    (BANKER_NATURAL, Bet.BANKER, Outcome.WIN, "banker_win", 950),
    (BANKER_NATURAL, Bet.TIE, Outcome.LOSE, "banker_win", -1000),
    (NATURAL_TIE, Bet.PLAYER, Outcome.PUSH, "tie", 0),  # § 631a.8(a)(2)(iii)
    (NATURAL_TIE, Bet.BANKER, Outcome.PUSH, "tie", 0),  # § 631a.8(a)(1)(iii)
    (NATURAL_TIE, Bet.TIE, Outcome.WIN, "tie", 8000),   # § 631a.8(a)(3)(i), 8 to 1
    (DRAGON_7, Bet.BANKER, Outcome.WIN, "banker_win", 950),  # a Dragon 7 is an ordinary win on standard
    (PANDA_8, Bet.PLAYER, Outcome.WIN, "player_win", 1000),
])
def test_main_wagers_standard(text: str, bet: Bet, outcome: Outcome, category: str, net: int) -> None:
    s = settle(text, bet)
    assert (s.outcome, s.category, s.net) == (outcome, category, net)
    assert s.odds == (None if outcome is not Outcome.WIN else Odds(8) if bet is Bet.TIE else Odds(1))
    assert s.commission == (50 if bet is Bet.BANKER and outcome is Outcome.WIN else 0)


def test_banker_commission_700_cents_nets_665() -> None:
    s = settle(BANKER_PLAIN_WIN, Bet.BANKER, stake=700)
    assert (s.outcome, s.odds, s.commission, s.net) == (Outcome.WIN, Odds(1), 35, 665)
    assert s.to_dict() == {"spot": "1", "bet": "banker", "hand": None, "stake": 700, "outcome": "win",
                           "category": "banker_win", "odds": "1 to 1", "net": 665, "commission": 35}


@pytest.mark.parametrize(("stake", "rule", "commission"), [
    (10, CommissionRule(), 1),  # 0.5 cent rounds half up
    (10, CommissionRule(mode=RoundingMode.HALF_EVEN), 0),
    (10, CommissionRule(mode=RoundingMode.DOWN), 0),
    (1, CommissionRule(mode=RoundingMode.UP), 1),
    (700, CommissionRule(unit=25), 25),
    (700, CommissionRule(unit=25, mode=RoundingMode.UP), 50),
    (700, CommissionRule(rate=Fraction(4, 100)), 28),
    (12345, CommissionRule(), 617),  # 617.25
])
def test_banker_commission_rounding(stake: int, rule: CommissionRule, commission: int) -> None:
    rules = BaccaratRules.from_names("baccarat", 8, commission=rule)
    s = settle(BANKER_PLAIN_WIN, Bet.BANKER, stake=stake, rules=rules)
    assert s.commission == commission and s.net == stake - commission
    assert type(s.net) is int and type(s.commission) is int


def test_tie_9_to_1() -> None:
    rules = BaccaratRules.from_names("baccarat", 8, {"tie": "9-1"})
    s = settle(NATURAL_TIE, Bet.TIE, stake=500, rules=rules)
    assert (s.outcome, s.odds, s.net) == (Outcome.WIN, Odds(9), 4500)


@pytest.mark.parametrize(("text", "bet", "outcome", "category", "odds", "net"), [
    (BANKER_NATURAL, Bet.BANKER, Outcome.WIN, "banker_win", 1, 1000),      # no commission
    (BANKER_PLAIN_WIN, Bet.BANKER, Outcome.WIN, "banker_win", 1, 1000),
    (DRAGON_7, Bet.BANKER, Outcome.PUSH, "dragon_7", None, 0),              # § 631a.8(a)(1)(i),(iii)
    (DRAGON_7, Bet.PLAYER, Outcome.LOSE, "banker_win", None, -1000),        # § 631a.8(a)(2)(ii)
    (DRAGON_7, Bet.DRAGON_7, Outcome.WIN, "dragon_7", 40, 40000),           # § 631a.8(a)(5)(i)
    (DRAGON_7, Bet.PANDA_8, Outcome.LOSE, "lose", None, -1000),
    (DRAGON_7, Bet.TIE, Outcome.LOSE, "banker_win", None, -1000),
    (PANDA_8, Bet.PLAYER, Outcome.WIN, "player_win", 1, 1000),              # § 631a.8(a)(2)(i)
    (PANDA_8, Bet.BANKER, Outcome.LOSE, "player_win", None, -1000),
    (PANDA_8, Bet.PANDA_8, Outcome.WIN, "panda_8", 25, 25000),              # § 631a.8(a)(6)(i)
    (PANDA_8, Bet.DRAGON_7, Outcome.LOSE, "lose", None, -1000),
    (NATURAL_TIE, Bet.BANKER, Outcome.PUSH, "tie", None, 0),
    (NATURAL_TIE, Bet.DRAGON_7, Outcome.LOSE, "lose", None, -1000),
    (PLAYER_NATURAL_9, Bet.PANDA_8, Outcome.LOSE, "lose", None, -1000),    # a natural 9 is no Panda 8
])
def test_ez_baccarat(text: str, bet: Bet, outcome: Outcome, category: str, odds: int | None,
                     net: int) -> None:
    s = settle(text, bet, rules=EZ)
    assert (s.outcome, s.category, s.net, s.commission) == (outcome, category, net, 0)
    assert s.odds == (Odds(odds) if odds else None)


def test_ez_tie_wager_pays_8_to_1() -> None:
    assert settle(NATURAL_TIE, Bet.TIE, rules=EZ).net == 8000


# --------------------------------------------------------------------------------------------- Dragon Bonus


def _db_round_player_nine_against(banker_final: int) -> str:
    """P 2+3 = 5 draws a 4 -> three-card 9; B K+K = 0 draws a card worth ``banker_final``."""
    third = "K" if banker_final == 0 else "A" if banker_final == 1 else str(banker_final)
    return f"2S KD 3H KC 4S {third}D"


def _db_round_banker_nine_against(player_final: int) -> str:
    """P K+K = 0 draws a card worth ``player_final``; B K+K = 0 draws a 9."""
    third = "K" if player_final == 0 else "A" if player_final == 1 else str(player_final)
    return f"KS KD KH KC {third}H 9D"


@pytest.mark.parametrize(("margin", "odds"), [(9, 30), (8, 10), (7, 6), (6, 4), (5, 2), (4, 1)])
@pytest.mark.parametrize("hand", [P, B])
def test_dragon_bonus_non_natural_win_lines(hand: Hand, margin: int, odds: int) -> None:
    """§ 631a.8(a)(4)(i)(C): a non-natural hand winning by 4 or more; standard paytable 30/10/6/4/2/1."""
    text = (_db_round_player_nine_against if hand is P else _db_round_banker_nine_against)(9 - margin)
    s = settle(text, Bet.DRAGON_BONUS, hand, stake=100)
    assert (s.outcome, s.category, s.odds, s.net) == (Outcome.WIN, f"win_by_{margin}", Odds(odds), 100 * odds)
    other = settle(text, Bet.DRAGON_BONUS, B if hand is P else P, stake=100)
    assert (other.outcome, other.category, other.net) == (Outcome.LOSE, "lose", -100)


@pytest.mark.parametrize("margin", [1, 2, 3, 0])
@pytest.mark.parametrize("hand", [P, B])
def test_dragon_bonus_non_natural_small_win_or_tie_loses(hand: Hand, margin: int) -> None:
    """§ 631a.8(a)(4)(ii)(B),(C)."""
    text = (_db_round_player_nine_against if hand is P else _db_round_banker_nine_against)(9 - margin)
    for h in (P, B):
        s = settle(text, Bet.DRAGON_BONUS, h, stake=100)
        assert (s.outcome, s.category, s.net) == (Outcome.LOSE, "lose", -100)


def test_dragon_bonus_two_card_non_natural_win_by_4() -> None:
    s = settle("3S KD 4H 3C KS", Bet.DRAGON_BONUS, P)  # P 7 stands; B 3 draws K -> 3
    assert (s.outcome, s.category, s.net) == (Outcome.WIN, "win_by_4", 1000)


@pytest.mark.parametrize(("text", "hand", "outcome", "category", "net"), [
    (PLAYER_NATURAL_9, P, Outcome.WIN, "natural_win", 1000),   # (i)(A)
    (PLAYER_NATURAL_9, B, Outcome.LOSE, "lose", -1000),        # (ii)(B)
    (NATURALS_9_8, P, Outcome.WIN, "natural_win", 1000),       # (i)(B): natural 9 against natural 8
    (NATURALS_9_8, B, Outcome.LOSE, "lose", -1000),            # (ii)(A): natural 8 against natural 9
    (NATURAL_TIE, P, Outcome.PUSH, "natural_tie", 0),          # (iii)
    (NATURAL_TIE, B, Outcome.PUSH, "natural_tie", 0),
    (BANKER_NATURAL, B, Outcome.WIN, "natural_win", 1000),
    (BANKER_NATURAL, P, Outcome.LOSE, "lose", -1000),
    ("9S 8D KH QD", P, Outcome.WIN, "natural_win", 1000),
    ("8S 8D KH QD", P, Outcome.PUSH, "natural_tie", 0),
    ("7S 8D KH QD", P, Outcome.LOSE, "lose", -1000),           # a two-card 7 against a natural 8
])
def test_dragon_bonus_naturals(text: str, hand: Hand, outcome: Outcome, category: str, net: int) -> None:
    s = settle(text, Bet.DRAGON_BONUS, hand)
    assert (s.outcome, s.category, s.net) == (outcome, category, net)


def test_dragon_bonus_alternative_paytable() -> None:
    rules = BaccaratRules.from_names("baccarat", 8, {"dragon_bonus": "30-10-4-4-2-2"})
    s = settle(_db_round_player_nine_against(2), Bet.DRAGON_BONUS, P, stake=100, rules=rules)  # by 7
    assert (s.category, s.net) == ("win_by_7", 400)
    s = settle(_db_round_player_nine_against(5), Bet.DRAGON_BONUS, P, stake=100, rules=rules)  # by 4
    assert (s.category, s.net) == ("win_by_4", 200)


def test_dragon_bonus_same_on_ez() -> None:
    s = settle(_db_round_player_nine_against(0), Bet.DRAGON_BONUS, P, stake=100, rules=EZ)
    assert (s.category, s.net) == ("win_by_9", 3000)


# --------------------------------------------------------------------------------------------- pairs


@pytest.mark.parametrize(("paytable", "perfect", "colored", "mixed"), [
    ("A", 25, 12, 6), ("B", 30, 10, 5), ("C", 25, 15, 5), ("25-12-5", 25, 12, 5),
])
@pytest.mark.parametrize("hand", [P, B])
def test_perfect_pairs_every_line(paytable: str, perfect: int, colored: int, mixed: int, hand: Hand) -> None:
    """§ 627c.1(d) paytables A, B, C and the rule sheet's 8-deck 25/12/5, on either hand."""
    rules = BaccaratRules.from_names("baccarat", 8, {"perfect_pairs": paytable})
    pairs = {"perfect_pair": ("4H", "4H", perfect), "colored_pair": ("4H", "4D", colored),
             "mixed_pair": ("4H", "4S", mixed)}
    for category, (a, b, odds) in pairs.items():
        # the paired cards go to ``hand``; the other hand gets 9-K (a natural: the round ends on 4 cards)
        text = f"{a} 9C {b} KC" if hand is P else f"9C {a} KC {b}"
        s = settle(text, Bet.PERFECT_PAIRS, hand, stake=200, rules=rules)
        assert (s.outcome, s.category, s.odds, s.net) == (Outcome.WIN, category, Odds(odds), 200 * odds)
        other = settle(text, Bet.PERFECT_PAIRS, B if hand is P else P, stake=200, rules=rules)
        assert (other.outcome, other.category, other.net) == (Outcome.LOSE, "no_pair", -200)


def test_perfect_pairs_jack_queen_is_not_a_pair() -> None:
    s = settle("JH 9C QH KC", Bet.PERFECT_PAIRS, P)
    assert (s.outcome, s.category) == (Outcome.LOSE, "no_pair")


def test_perfect_pairs_both_hands_both_paid() -> None:
    """§ 627c.1(c)(1): wagers on both hands, both paired: each is paid."""
    wagers = [Wager("3", Bet.PERFECT_PAIRS, 100, P), Wager("3", Bet.PERFECT_PAIRS, 100, B)]
    s1, s2 = settle_baccarat(cards("QH 5S QH 5C KD KS"), wagers, STD)
    assert (s1.category, s1.net, s2.category, s2.net) == ("perfect_pair", 2500, "colored_pair", 1200)


@pytest.mark.parametrize(("text", "category", "net"), [
    ("QH 5S QS 3C", "one_pair", 300),        # § 631a.8(a)(7)(i): two queens, any suits (Player)
    ("5S QH 3C QS", "one_pair", 300),        # the Banker's pair
    ("QH 5S QS 5C KD KS", "both_pairs", 1500),
    ("JH 5S QH 3C", "no_pair", -100),         # J-Q is not a pair
    ("2S 3D 4H 4C", "no_pair", -100),         # § 631a.8(a)(7)(ii): neither hand paired
])
def test_house_money(text: str, category: str, net: int) -> None:
    s = settle(text, Bet.HOUSE_MONEY, stake=100)
    assert (s.category, s.net) == (category, net)
    s4 = settle_two_card_wagers(cards(text)[:4], [Wager("1", Bet.HOUSE_MONEY, 100)], STD)
    assert s4 == [s]


def test_house_money_configurable_odds() -> None:
    rules = BaccaratRules.from_names("baccarat", 8, {"house_money": "2-10"})
    assert settle("QH 5S QS 5C KD KS", Bet.HOUSE_MONEY, stake=100, rules=rules).net == 1000
    assert settle("QH 5S QS 3C", Bet.HOUSE_MONEY, stake=100, rules=rules).net == 200


def test_two_card_wagers_settle_on_four_cards_and_agree_with_the_round() -> None:
    """§ 627a.8(d), § 627c.1(c): Perfect Pairs and House Money are settled before any third card."""
    full = cards("QH 5S QS 5C KD KS")
    wagers = [Wager("1", Bet.PERFECT_PAIRS, 100, P), Wager("1", Bet.PERFECT_PAIRS, 100, B),
              Wager("2", Bet.HOUSE_MONEY, 300)]
    early = settle_two_card_wagers(full[:4], wagers, STD)
    assert early == settle_baccarat(full, wagers, STD)
    assert [s.category for s in early] == ["mixed_pair", "colored_pair", "both_pairs"]


# --------------------------------------------------------------------------------------------- errors


def test_two_card_wagers_errors() -> None:
    four = cards("QH 5S QS 5C")
    pp = [Wager("1", Bet.PERFECT_PAIRS, 100, P)]
    with pytest.raises(IncompleteRound, match="first 4 cards, got 3"):
        settle_two_card_wagers(four[:3], pp, STD)
    with pytest.raises(TooManyCards):
        settle_two_card_wagers([*four, Card.parse("KD")], pp, STD)
    with pytest.raises(IncompleteRound, match="player needs the complete round"):
        settle_two_card_wagers(four, [Wager("1", Bet.PLAYER, 100)], STD)
    with pytest.raises(CardNotInShoe):
        settle_two_card_wagers(cards("QH 5S QH 5C"), pp, BaccaratRules.from_names("baccarat", 1))


@pytest.mark.parametrize(("wager", "rules", "text"), [
    (Wager("1", Bet.DRAGON_7, 100), STD, "dragon_7 is not offered at baccarat"),
    (Wager("1", Bet.PANDA_8, 100), STD, "panda_8 is not offered"),
    (Wager("1", Bet.ULTIMATE_PAIRS, 100), STD, "not offered"),
    (Wager("1", Bet.BLACKJACK, 100), EZ, "not offered"),
    (Wager("1", Bet.PERFECT_PAIRS, 100), STD, "needs a hand"),
    (Wager("1", Bet.DRAGON_BONUS, 100), EZ, "needs a hand"),
    (Wager("1", Bet.TIE, 100, P), STD, "not placed on a hand"),
    (Wager("1", Bet.HOUSE_MONEY, 100, B), STD, "not placed on a hand"),
    (Wager("1", Bet.PLAYER, 100, B), STD, "cannot name the banker hand"),
])
def test_wager_not_offered(wager: Wager, rules: BaccaratRules, text: str) -> None:
    with pytest.raises(WagerNotOffered, match=text) as info:
        settle_baccarat(cards(PLAYER_NATURAL_9), [wager], rules)
    assert "\n" not in str(info.value) and f"spot {wager.spot}" in str(info.value)


def test_player_and_banker_wagers_may_name_their_own_hand() -> None:
    s1, s2 = settle_baccarat(cards(PLAYER_NATURAL_9),
                             [Wager("1", Bet.PLAYER, 100, P), Wager("1", Bet.BANKER, 100, B)], STD)
    assert (s1.net, s2.net) == (100, -100)


def test_card_not_in_shoe() -> None:
    one_deck = BaccaratRules.from_names("baccarat", 1)
    with pytest.raises(CardNotInShoe, match="QS cannot come out of a 1-deck shoe"):
        settle_baccarat(cards("AH QS 7S QS"), [Wager("1", Bet.PLAYER, 100)], one_deck)
    # the same round is fine from 8 decks (the recorded Ezugi round 1)
    assert settle_baccarat(cards("AH QS 7S QS"), [Wager("1", Bet.PLAYER, 100)], STD)[0].net == 100


def test_round_length_errors() -> None:
    w = [Wager("1", Bet.PLAYER, 100)]
    with pytest.raises(IncompleteRound):
        settle_baccarat(cards("2S KD 3H"), w, STD)
    with pytest.raises(IncompleteRound, match="5th card"):
        settle_baccarat(cards("2S KD 3H 3D"), w, STD)
    with pytest.raises(TooManyCards):
        settle_baccarat(cards("9S KD KH 7D 2C"), w, STD)


def test_no_wagers_settles_nothing_but_still_checks_cards() -> None:
    assert settle_baccarat(cards(PLAYER_NATURAL_9), [], STD) == []
    with pytest.raises(IncompleteRound):
        settle_baccarat(cards("9S KD"), [], STD)


def test_several_wagers_in_order() -> None:
    wagers = [Wager("1", Bet.BANKER, 700), Wager("2", Bet.TIE, 100), Wager("3", Bet.DRAGON_BONUS, 50, B),
              Wager("4", Bet.PERFECT_PAIRS, 25, P), Wager("5", Bet.HOUSE_MONEY, 10)]
    result = settle_baccarat(cards(BANKER_NATURAL), wagers, STD)
    assert [s.wager for s in result] == wagers
    assert [s.net for s in result] == [665, -100, 50, -25, -10]


def test_ruling_net_per_unit_is_exact() -> None:
    coup = coup_from_cards(cards(BANKER_NATURAL))
    win = Ruling(Outcome.WIN, "banker_win", Odds(1), commission_applies=True)
    assert win.net_per_unit(STD) == Fraction(19, 20)
    assert win.net_per_unit(BaccaratRules.from_names("baccarat", 8, commission=CommissionRule(
        rate=Fraction(4, 100)))) == Fraction(24, 25)
    assert Ruling(Outcome.LOSE, "lose").net_per_unit(STD) == -1
    assert Ruling(Outcome.PUSH, "tie").net_per_unit(STD) == 0
    assert rule_dragon_bonus(B, coup, STD.dragon_bonus).net_per_unit(STD) == 1


def test_variant_given_as_text_is_coerced() -> None:
    rules = BaccaratRules("ez-baccarat", 8, commission=CommissionRule(rate=Fraction(0)))  # type: ignore[arg-type]
    assert rules.variant is BaccaratVariant.EZ and rules.offers(Bet.DRAGON_7)
    with pytest.raises(InvalidRulesSubmission, match="unknown baccarat game"):
        BaccaratRules("punto", 8)  # type: ignore[arg-type]
