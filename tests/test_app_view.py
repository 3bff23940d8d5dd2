"""The live view's pure part: folding public messages into display state, plain lines, the summary."""

from __future__ import annotations

from rich.console import Console

from tablesense.daemon.messages import (
    AlarmMessage,
    BaccaratOutcome,
    DeviceStatus,
    PublicCard,
    RoundResults,
    RoundState,
    SettlementMessage,
    TableStatus,
)
from tablesense.daemon.view import TableView, plain_line, public_filters, render, summary_lines

TS = "2026-11-29T12:00:00Z"


def settle(seq: int, bet: str, outcome: str, net: int, odds: str | None = None, stake: int = 1000,
           commission: int = 0) -> SettlementMessage:
    return SettlementMessage(table="T1", ts=TS, seq=seq, msg_id=f"T1-x-{seq}", shoe=1, round=3,
                             spot=f"s{seq}", seat="2", bet=bet, hand=None, stake=stake, outcome=outcome,
                             category="c", odds=odds, net=net, commission=commission)


def test_running_totals_per_wager_and_duplicates_dropped() -> None:
    v = TableView("T1")
    msgs = [settle(1, "player_pair", "win", 11000, "11 to 1"), settle(2, "banker", "win", 950, "1 to 1",
                                                                       commission=50),
            settle(3, "player_pair", "lose", -1000), settle(4, "tie", "push", 0)]
    for m in msgs:
        assert v.apply(m)
    assert not v.apply(msgs[0])  # a republished duplicate (same msg_id) changes nothing
    assert v.duplicates == 1
    pp = v.tallies["player_pair"]
    assert (pp.wagers, pp.wins, pp.losses, pp.net, pp.staked) == (2, 1, 1, 10000, 2000)
    assert v.tallies["banker"].commission == 50
    assert v.tallies["tie"].pushes == 1
    assert len(v.pair_hits) == 1 and "11 to 1" in v.pair_hits[0]
    lines = summary_lines(v)
    assert any("player_pair" in ln and "+100.00" in ln for ln in lines)
    assert lines[-1].startswith("  players' net over all wagers: +109.50")


def test_round_state_results_status_alarm_and_device() -> None:
    v = TableView("T1")
    v.apply(TableStatus(table="T1", ts=TS, seq=0, msg_id="", state="online"))
    v.apply(RoundState(table="T1", ts=TS, seq=5, msg_id="a5", shoe=1, round=2, game="baccarat",
                       phase="dealing", cards=(PublicCard(index=1, card="QH", position="player"),),
                       cards_remaining=411))
    out = BaccaratOutcome(player=("QH", "QS"), banker=("9D", "KC"), player_total=0, banker_total=9,
                          winner="banker", player_natural=False, banker_natural=True, player_pair=True,
                          banker_pair=False)
    res = RoundResults(table="T1", ts=TS, seq=6, msg_id="a6", shoe=1, round=2, game="baccarat", baccarat=out)
    v.apply(res)
    v.apply(AlarmMessage(table="T1", ts=TS, seq=7, msg_id="a7", alarm_id="1.1", code="SEQUENCE_GAP",
                         severity="critical", text="cards missed", held=True))
    v.apply(DeviceStatus(table="T1", ts=TS, seq=8, msg_id="a8", name="shoe", state="online"))
    assert (v.status, v.phase, v.round, v.cards, v.cards_remaining) == ("online", "dealing", 2,
                                                                         [("player", "QH")], 411)
    assert v.rounds == 1 and v.winners == {"banker": 1}
    assert v.devices == {"shoe": "online"} and "SEQUENCE_GAP" in v.alarms[0]
    line = plain_line(res)
    assert line == "[T1] round 1/2 P QH QS =0 B 9D KC =9 -> banker player-pair"
    console = Console(record=True, width=140)
    console.print(render(v))
    text = console.export_text()
    assert "BANKER wins" in text and "Player pair" in text and "SEQUENCE_GAP" in text


def test_public_filters_never_include_floor_or_commands() -> None:
    fs = public_filters("tablesense", None)
    assert "tablesense/+/settlements" in fs
    assert not any("floor" in f or "cmd" in f or "#" in f for f in fs)


def test_settlement_lines_print_the_category_only_when_it_differs_from_the_outcome() -> None:
    import msgspec

    lose = msgspec.structs.replace(settle(1, "player", "lose", -5000, stake=5000), category="lose")
    win = msgspec.structs.replace(settle(2, "player_pair", "win", 11000, "11 to 1"), category="player_pair")
    v = TableView("T1")
    assert v.apply(lose) and v.apply(win)
    assert v.recent[0].endswith("-> lose net -50.00") and "lose lose" not in v.recent[0]
    assert "-> win player_pair at 11 to 1 net +110.00" in v.recent[1]
    assert plain_line(lose, 2).endswith("stake 50.00 lose net -50.00")
    assert " win player_pair at 11 to 1 net" in plain_line(win, 2)
