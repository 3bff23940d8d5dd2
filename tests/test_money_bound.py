"""The money bound: stakes bounded so that stake x the largest odds of the wager's paytable stays at most
2**53 - 1 (every amount published exact in JSON), in the config, ``tablesense settle`` and the pads input
(the pads case: tests/test_machine_intake.py). Defect: a Perfect Pairs 25 to 1 win on a stake of
2**53 - 1 published a net above 2**53 - 1."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tablesense.daemon.cli import UsageError
from tablesense.daemon.commands.settle import settle_document
from tablesense.daemon.config import ConfigError, parse_config
from tablesense.daemon.rules.games import get_game
from tablesense.daemon.rules.money import MAX_AMOUNT, Odds, max_stake, wager_odds, winnings

CONFIG = """
table = "t"
game = "uth"
seats = ["1"]
[wagers.ante]
[wagers.ultimate_pairs]
paytable = "F"
max = {max}
[spots]
"1A" = {{ seat = "1", bet = "ante" }}
"1U" = {{ seat = "1", bet = "ultimate_pairs" }}
"""


@given(st.integers(0, 10**6), st.integers(1, 10**3))
def test_max_stake_is_the_largest_stake_whose_win_stays_exact(pays: int, per: int) -> None:
    odds = Odds(pays, per)
    bound = max_stake([odds, None, Odds(1)])
    assert bound <= MAX_AMOUNT and winnings(bound, odds) <= MAX_AMOUNT
    if odds.ratio > 1:
        assert (bound + 1) * odds.ratio > MAX_AMOUNT


def test_the_largest_odds_are_those_of_the_paytable_in_force() -> None:
    game = get_game("uth")
    assert wager_odds("uth", game.rules(None, {"ultimate_pairs": "F"}))["ultimate_pairs"] == Fraction(1000)
    assert wager_odds("uth", game.rules(None, {"ultimate_pairs": "A"}))["ultimate_pairs"] == Fraction(30)


def test_config_refuses_a_max_whose_win_is_not_exact_naming_the_key() -> None:
    bound = MAX_AMOUNT // 1000  # paytable F pays 1000 to 1 for aces with dealer aces
    assert parse_config(CONFIG.format(max=bound)).wagers["ultimate_pairs"].max == bound
    with pytest.raises(ConfigError) as info:
        parse_config(CONFIG.format(max=bound + 1))
    text = str(info.value)
    assert text.startswith("wagers.ultimate_pairs.max: ") and "1000 to 1" in text and str(bound) in text
    assert "\n" not in text


def settle(stake: int, *, extra: int | None = None) -> dict[str, object]:
    wagers = [{"spot": "1", "bet": "perfect_pairs", "hand": "player", "stake": stake}]
    if extra is not None:
        wagers.append({"spot": "2", "bet": "perfect_pairs", "hand": "player", "stake": extra})
    return settle_document(json.dumps({"game": "baccarat", "decks": 8, "paytables": {"perfect_pairs": "A"},
                                       "wagers": wagers, "cards": ["3S", "9C", "3S", "KD"]}))


def test_settle_refuses_a_stake_whose_win_is_not_exact_naming_the_wager() -> None:
    """The issue's case: a Perfect Pairs 25 to 1 win on 2**53 - 1 published a net above 2**53 - 1."""
    bound = max_stake([Odds(25)])
    out = settle(bound)  # 3S 3S: a perfect pair, 25 to 1
    assert out["wagers"][0]["net"] == bound * 25 <= MAX_AMOUNT  # type: ignore[index]
    with pytest.raises(UsageError) as info:
        settle(MAX_AMOUNT)
    assert str(info.value).startswith("settle: wagers[0].stake: ") and str(bound) in str(info.value)


def test_settle_refuses_totals_beyond_the_bound() -> None:
    bound = max_stake([Odds(25)])
    with pytest.raises(UsageError, match=r"wagers: the total net"):
        settle(bound, extra=bound)
