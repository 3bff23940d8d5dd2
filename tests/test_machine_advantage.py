"""The advantage-play watch in the round state machine: ADVANTAGE_PLAY after a completed round when a
pair wager's exact expected return for the next round is above ``[integrity] advantage_threshold``."""

from __future__ import annotations

import pytest
from machine_support import Driver, baccarat_config

from tablesense.daemon.config import ConfigError
from tablesense.daemon.rules.advantage import advantage_report, favourable, offered_pair_wagers
from tablesense.daemon.rules.cards import ALL_CARDS, Card, Rank, ShoeComposition
from tablesense.daemon.table import Channel
from tablesense.drivers.events import ShoeStatusKind

RICH = (Rank.SEVEN, Rank.EIGHT)
"""Kept in the shoe: 4 sevens and 4 eights of one deck make every pair wager favourable at the end."""


def deal_until_rich(d: Driver) -> list[tuple[int, list[str]]]:
    """Deal every other card of a 1-deck shoe; after each completed round, check the ADVANTAGE_PLAY
    alarms raised with it against the exact figures for the cards out so far; return the codes."""
    shoe = ShoeComposition(1)
    wagers = offered_pair_wagers(d.machine._rules, d.config.wagers)
    seen: list[tuple[int, list[str]]] = []
    up: set[tuple[str, str | None]] = set()
    ever: set[tuple[str, str | None]] = set()
    for card in (c for c in ALL_CARDS if c.rank not in RICH):
        out = d.card(str(card))
        shoe.take(card)
        if not d.messages(Channel.RESULTS, out):
            continue
        hot = {f.key: f for f in favourable(advantage_report(shoe, wagers))}
        raised = [a.text for a in d.alarms(out) if a.code == "ADVANTAGE_PLAY" and a.state == "raised"]
        cleared = [a for a in d.alarms(out) if a.code == "ADVANTAGE_PLAY" and a.state == "cleared"]
        # raised once when a wager goes above the threshold, with the exact figure; cleared when it falls
        assert sorted(raised) == sorted(f.describe() for k, f in hot.items() if k not in up)
        assert len(cleared) == len(up - set(hot))
        up = set(hot)
        ever |= up
        seen.append((shoe.remaining, d.codes(out)))
    assert len(ever) == 3 and up == ever  # Perfect Pairs on Player and Banker, House Money
    return seen


def test_advantage_play_is_raised_once_when_pair_wagers_turn_favourable() -> None:
    d = Driver(baccarat_config(decks=1))
    seen = deal_until_rich(d)
    raised = [a for a in d.alarms() if a.code == "ADVANTAGE_PLAY" and a.state == "raised"]
    assert len(raised) == 3  # Perfect Pairs on Player and Banker, House Money
    assert all(not a.held and a.severity == "warning" for a in raised)
    assert not d.state.held
    assert any("ADVANTAGE_PLAY" in codes for _, codes in seen)
    # a new shoe clears them
    d.status(ShoeStatusKind.NEW_SHOE)
    cleared = [a for a in d.alarms() if a.code == "ADVANTAGE_PLAY" and a.state == "cleared"]
    assert sorted(a.alarm_id for a in cleared) == sorted(a.alarm_id for a in raised)


def test_threshold_above_every_figure_raises_nothing() -> None:
    d = Driver(baccarat_config(decks=1, extra='[integrity]\nadvantage_threshold = "1000%"\n'))
    for card in (c for c in ALL_CARDS if c.rank not in RICH):
        d.card(str(card))
    assert "ADVANTAGE_PLAY" not in d.codes()
    assert d.results()


def test_full_shoe_rounds_raise_nothing() -> None:
    d = Driver(baccarat_config(decks=8))
    d.cards("AS 2H 3D 4C 5S 6H 9D KC 10S QH")
    assert d.results() and "ADVANTAGE_PLAY" not in d.codes()


@pytest.mark.parametrize("bad", ["abc", "0.1.2", "2000%", ""])
def test_bad_threshold_is_a_one_line_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"integrity\.advantage_threshold") as exc:
        baccarat_config(extra=f'[integrity]\nadvantage_threshold = "{bad}"\n')
    assert "\n" not in str(exc.value)


def test_alarm_text_names_no_card() -> None:
    d = Driver(baccarat_config(decks=1))
    deal_until_rich(d)
    for a in d.alarms():
        if a.code == "ADVANTAGE_PLAY":
            for c in ALL_CARDS:
                assert f" {c} " not in f" {a.text} "
    assert Card.parse("7S")
