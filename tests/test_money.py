"""Money: exact odds, winnings in minor units, commission computed exactly then rounded."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tablesense.daemon.rules.money import (
    NO_COMMISSION,
    CommissionRule,
    Odds,
    RoundingMode,
    round_to_unit,
    winnings,
)


@pytest.mark.parametrize(("text", "odds"), [
    ("25 to 1", Odds(25)), ("25:1", Odds(25)), ("25-1", Odds(25)), ("25", Odds(25)),
    ("3 to 2", Odds(3, 2)), (" 8 TO 1 ".lower(), Odds(8)), ("9/1", Odds(9)),
])
def test_odds_parse(text: str, odds: Odds) -> None:
    assert Odds.parse(text) == odds


@pytest.mark.parametrize("text", ["", "to 1", "25 to", "x", "-1", "1.5 to 1"])
def test_odds_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not odds"):
        Odds.parse(text)


def test_odds_shape() -> None:
    assert str(Odds(25)) == "25 to 1"
    assert Odds(3, 2).ratio == Fraction(3, 2)
    with pytest.raises(ValueError):
        Odds(-1)
    with pytest.raises(ValueError):
        Odds(1, 0)


def test_winnings_are_integer_minor_units() -> None:
    assert winnings(2500, Odds(25)) == 62500
    assert winnings(700, Odds(1)) == 700
    assert winnings(5, Odds(3, 2)) == 7  # 7.5 cents: the house never pays a fraction of a cent
    assert winnings(1, Odds(1, 2)) == 0
    with pytest.raises(TypeError):
        winnings(7.0, Odds(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        winnings(True, Odds(1))
    with pytest.raises(ValueError):
        winnings(-1, Odds(1))


def test_default_commission_700_cent_banker_win_nets_665() -> None:
    rule = CommissionRule()
    assert rule.rate == Fraction(1, 20) and rule.unit == 1 and rule.mode is RoundingMode.HALF_UP
    assert 7.00 * 0.95 < 6.65  # the float artefact (6.6499999...) the rules core must never see
    assert rule.commission(700) == 35
    assert 700 - rule.commission(700) == 665


@pytest.mark.parametrize(("won", "mode", "unit", "commission"), [
    # 5 % of 10 cents is exactly half a cent
    (10, RoundingMode.HALF_UP, 1, 1),
    (10, RoundingMode.HALF_EVEN, 1, 0),
    (30, RoundingMode.HALF_EVEN, 1, 2),   # 1.5 -> 2 (even)
    (50, RoundingMode.HALF_EVEN, 1, 2),   # 2.5 -> 2 (even)
    (10, RoundingMode.DOWN, 1, 0),
    (10, RoundingMode.UP, 1, 1),
    (1, RoundingMode.UP, 1, 1),           # 0.05 cent
    (1, RoundingMode.HALF_UP, 1, 0),
    (1, RoundingMode.DOWN, 1, 0),
    (20, RoundingMode.HALF_UP, 1, 1),     # exact: no rounding at all
    (20, RoundingMode.UP, 1, 1),
    (20, RoundingMode.DOWN, 1, 1),
    (1234, RoundingMode.HALF_UP, 1, 62),  # 61.7
    (1234, RoundingMode.DOWN, 1, 61),
    # quarter (25-cent) units
    (700, RoundingMode.HALF_UP, 25, 25),  # 35 -> 25
    (700, RoundingMode.UP, 25, 50),
    (700, RoundingMode.DOWN, 25, 25),
    (750, RoundingMode.HALF_UP, 25, 50),  # 37.5 = 1.5 units -> 2 units
    (750, RoundingMode.HALF_EVEN, 25, 50),
    (250, RoundingMode.HALF_UP, 25, 25),  # 12.5 = 0.5 unit -> 1 unit
    (250, RoundingMode.HALF_EVEN, 25, 0),  # 0.5 unit -> 0 (even)
    (1000, RoundingMode.HALF_UP, 25, 50),
    (100, RoundingMode.HALF_UP, 25, 0),    # 5 cents -> 0
    (100, RoundingMode.UP, 25, 25),
])
def test_commission_rounding(won: int, mode: RoundingMode, unit: int, commission: int) -> None:
    got = CommissionRule(unit=unit, mode=mode).commission(won)
    assert got == commission
    assert type(got) is int


def test_four_percent_commission() -> None:
    rule = CommissionRule(rate=Fraction(4, 100))
    assert rule.commission(700) == 28
    assert rule.commission(1234) == 49  # 49.36


def test_no_commission() -> None:
    assert NO_COMMISSION.commission(123456) == 0


@pytest.mark.parametrize(("text", "rate"), [
    ("5%", Fraction(1, 20)), ("0.05", Fraction(1, 20)), ("1/20", Fraction(1, 20)), (5, Fraction(1, 20)),
    ("4 %", Fraction(1, 25)), ("2.5%", Fraction(1, 40)),
])
def test_parse_rate(text: str | int, rate: Fraction) -> None:
    assert CommissionRule.parse_rate(text) == rate


def test_commission_rule_rejects_bad_values() -> None:
    with pytest.raises(ValueError):
        CommissionRule(rate=Fraction(1))
    with pytest.raises(ValueError):
        CommissionRule(rate=Fraction(-1, 100))
    with pytest.raises(ValueError):
        CommissionRule(unit=0)
    with pytest.raises(ValueError):
        round_to_unit(Fraction(1), 0, RoundingMode.UP)
    with pytest.raises(TypeError):
        CommissionRule().commission(7.0)  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from([1, 5, 25, 100]),
       st.sampled_from(list(RoundingMode)), st.fractions(min_value=0, max_value=Fraction(99, 100)))
def test_commission_is_an_integer_multiple_of_the_unit_near_the_exact_amount(
        won: int, unit: int, mode: RoundingMode, rate: Fraction) -> None:
    got = CommissionRule(rate=rate, unit=unit, mode=mode).commission(won)
    exact = rate * won
    assert type(got) is int and 0 <= got <= won
    if got == won and won % unit:
        # capped: rounding would have taken more than the win itself
        assert won < round_to_unit(exact, unit, mode)
        return
    assert got % unit == 0
    assert abs(got - exact) < unit
    if mode is RoundingMode.UP:
        assert got >= exact
    elif mode is RoundingMode.DOWN:
        assert got <= exact
    else:
        assert abs(got - exact) <= Fraction(unit, 2)


def test_commission_never_exceeds_the_win() -> None:
    """A 1-cent Banker win with a 25-cent unit rounded up pays no more commission than it won."""
    rule = CommissionRule(unit=25, mode=RoundingMode.UP)
    assert rule.commission(1) == 1
    assert rule.commission(700) == 50
