"""The public table information signage shows: every wager's odds lines and limits (also when the config
leaves a paytable at its default), the commission rule in the info message and in every Banker
settlement's record, the reason of a void round in ``results``, the displays' default language."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import msgspec
import pytest
from machine_support import Driver, baccarat_config

from tablesense.daemon.cli import main
from tablesense.daemon.config import ConfigError, load_config, parse_config
from tablesense.daemon.messages import RoundResults, SettlementMessage, TableInfo
from tablesense.daemon.rules.money import CommissionRule, RoundingMode
from tablesense.daemon.signage.info import commission_info, percent_text, table_info, table_info_message
from tablesense.daemon.table import Channel
from tablesense.drivers.events import Button, ShoeStatusKind

ROOT = Path(__file__).resolve().parents[1]

SETTLED_BY_TABLESENSE = {"player", "banker", "tie", "perfect_pairs", "dragon_bonus", "house_money",
                         "dragon_7", "panda_8", "ultimate_pairs"}
"""Wagers tablesense settles, so it knows their odds (blackjack and Ante are settled by the dealer)."""


def lines(info: dict[str, object], bet: str) -> list[tuple[str, str]]:
    wagers = [*info["wagers"], *info["main_wagers"]]  # type: ignore[misc]
    (w,) = [w for w in wagers if w["bet"] == bet]
    return [(line["category"], line["odds"]) for line in w["paytable"]]


def test_every_offered_wager_of_every_example_lists_its_odds_lines_and_limits() -> None:
    for game in ("baccarat", "ez-baccarat", "blackjack", "uth"):
        cfg = load_config(ROOT / f"deploy/examples/{game}.toml")
        info = table_info(cfg)
        offered = {w["bet"]: w for w in [*info["wagers"], *info["main_wagers"]]}
        assert set(offered) == set(cfg.wagers), game
        for bet, w in offered.items():
            assert (w["min"], w["max"]) == (cfg.wagers[bet].min, cfg.wagers[bet].max)
            if bet in SETTLED_BY_TABLESENSE:
                assert w["paytable"], f"{game} {bet} lists no odds"
                assert all(" to " in line["odds"] or line["odds"] == "push" for line in w["paytable"]), w
            else:
                assert w["paytable"] == []
            assert all(line["label"] for line in w["paytable"])


def test_paytables_left_at_their_default_list_the_default_odds() -> None:
    """Tie, Dragon Bonus and House Money without a ``paytable`` key list the odds the rules core settles
    with (8 to 1; 58 Pa. Code § 631a.8(a)(4) standard table; 3 to 1 and 15 to 1), never a name."""
    info = msgspec.to_builtins(table_info_message(baccarat_config(extra="[wagers.dragon_bonus]\n"), ts=""))
    assert lines(info, "tie") == [("tie", "8 to 1")]
    assert lines(info, "house_money") == [("one_pair", "3 to 1"), ("both_pairs", "15 to 1")]
    assert lines(info, "dragon_bonus") == [
        ("natural_win", "1 to 1"), ("natural_tie", "push"), ("win_by_9", "30 to 1"), ("win_by_8", "10 to 1"),
        ("win_by_7", "6 to 1"), ("win_by_6", "4 to 1"), ("win_by_5", "2 to 1"), ("win_by_4", "1 to 1")]
    assert lines(info, "player") == [("player_win", "1 to 1")]
    assert lines(info, "banker") == [("banker_win", "1 to 1")]
    ez = table_info(load_config(ROOT / "deploy/examples/ez-baccarat.toml"))
    assert lines(ez, "dragon_7") == [("dragon_7", "40 to 1")]
    assert lines(ez, "panda_8") == [("panda_8", "25 to 1")]
    assert lines(ez, "banker") == [("banker_win", "1 to 1"), ("banker_dragon_7", "push")]
    assert ez["commission"] is None and ez["commission_rule"] is None
    # a named Dragon Bonus paytable gives its own lines, not its name
    named = table_info(load_config(ROOT / "deploy/examples/baccarat.toml"))
    assert ("win_by_9", "30 to 1") in lines(named, "dragon_bonus")
    named_lines = lines(named, "dragon_bonus") + lines(named, "house_money")
    assert not any(odds in ("standard", "3-15") for _, odds in named_lines)


@pytest.mark.parametrize(("rule", "currency", "text"), [
    (CommissionRule(), "EUR", "5% commission on Banker wins, rounded to the nearest €0.01"),
    (CommissionRule(Fraction(5, 100), 100, RoundingMode.UP), "USD",
     "5% commission on Banker wins, rounded up to $1"),
    (CommissionRule(Fraction(1, 40), 25, RoundingMode.DOWN), "USD",
     "2.5% commission on Banker wins, rounded down to $0.25"),
    (CommissionRule(Fraction(4, 100), 10, RoundingMode.HALF_EVEN), "HKD",
     "4% commission on Banker wins, rounded to the nearest HK$0.10, halves to even"),
])
def test_the_commission_rule_in_words(rule: CommissionRule, currency: str, text: str) -> None:
    info = commission_info(rule, currency, 2)
    assert info.text == text and info.rate == percent_text(rule.rate) and info.unit == rule.unit
    assert info.rounding == rule.mode.value


def test_the_info_message_carries_the_commission_rule_and_the_display_language() -> None:
    example = (ROOT / "deploy/examples/baccarat.toml").read_text()
    cfg = parse_config(example.replace("unit = 1 ", "unit = 100 ")
                       .replace('rounding = "half_up"', 'rounding = "up"')
                       + '\n[signage]\nlanguage = "zh-Hant"\n')
    info = table_info_message(cfg, ts="2026-11-29T12:00:00Z", shoe=3)
    assert isinstance(info, TableInfo) and info.language == "zh-Hant" and info.commission == "5%"
    assert info.commission_rule is not None
    assert (info.commission_rule.unit, info.commission_rule.rounding) == (100, "up")
    assert info.commission_rule.text == "5% commission on Banker wins, rounded up to €1"
    assert table_info(load_config(ROOT / "deploy/examples/baccarat.toml"))["language"] == "en"


def test_a_display_language_the_signage_cannot_show_is_one_line_naming_the_key(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = (ROOT / "deploy/examples/baccarat.toml").read_text() + '\n[signage]\nlanguage = "fr"\n'
    with pytest.raises(ConfigError, match=r"^signage\.language: 'fr' is not a display language \(choose en, "
                                          r"zh-Hans, zh-Hant\)( \(at line \d+\))?$"):
        parse_config(text)
    path = tmp_path / "t.toml"
    path.write_text(text)
    assert main(["check-config", str(path), "--template"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "signage.language" in err[0]


def test_every_banker_settlement_and_its_record_name_the_commission_rule() -> None:
    d = Driver(baccarat_config())
    d.bet("1B", 1000)
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("QH 4D 2S KC 2H 3C")  # Banker 7 beats Player 4: the Banker wins, less 5 % = 50
    d.bet("1B", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("9H 3D KS KC")  # Player natural 9: the Banker loses
    settled = d.settlements()
    banker = [s for s in settled if s.bet == "banker"]
    assert [s.outcome for s in banker] == ["win", "lose"] and banker[0].commission == 50
    for s in banker:
        assert s.commission_rule is not None
        rule = s.commission_rule
        assert (rule.rate, rule.unit, rule.rounding) == ("5%", 1, "half_up")
        assert s.commission_rule.text == "5% commission on Banker wins, rounded to the nearest €0.01"
    assert all(s.commission_rule is None for s in settled if s.bet != "banker")
    records = [r for f in d.floor() for r in f.settlements if r.bet == "banker"]
    assert len(records) == 2 and all(r.commission_rule == banker[0].commission_rule for r in records)
    raw = msgspec.json.decode(msgspec.json.encode(banker[0]))
    assert raw["commission_rule"]["rate"] == "5%"  # on the wire, and decodable by every subscriber
    assert msgspec.json.decode(msgspec.json.encode(banker[0]), type=SettlementMessage) == banker[0]
    ez = Driver(baccarat_config(game="ez-baccarat"))
    ez.bet("1B", 1000)
    ez.button(Button.NO_MORE_BETS)
    ez.cards("2C 7D 4S KH")
    assert ez.settlements()[-1].commission_rule is None  # EZ Baccarat takes no commission (§ 627a.1)


def _void_results(d: Driver) -> RoundResults:
    (res,) = [r for r in d.messages(Channel.RESULTS) if r.void]
    return res


@pytest.mark.parametrize(("how", "reason"), [
    ("button", "void button"), ("command with reason", "misdeal"), ("command", "voided by the floor"),
    ("new shoe", "new shoe mid-round")])
def test_a_void_round_publishes_its_reason_in_results_without_the_operator(how: str, reason: str) -> None:
    d = Driver(baccarat_config())
    d.bet("1B", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C")
    if how == "button":
        d.button(Button.VOID_ROUND)
    elif how == "new shoe":
        d.status(ShoeStatusKind.NEW_SHOE)
    else:
        args = {"reason": "misdeal"} if how == "command with reason" else {}
        assert d.command("void_round", operator="pit-boss-3", **args).ok
    res = _void_results(d)
    assert res.void_reason == reason
    assert "pit-boss-3" not in msgspec.json.encode(res).decode()
    # the next round's results carry none
    d.bet("1B", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("9H 3D KS KC")
    assert d.results()[-1].void is False and d.results()[-1].void_reason is None
