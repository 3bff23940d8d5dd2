"""The live view (``tablesense demo``, ``tablesense monitor``) is readable in an 80x24 terminal: the whole
panel shows (both borders, nothing cropped by the terminal), no wager name is cut, and the end-of-session
summary lines fit 80 columns so no number wraps. It used to be about 40 lines tall with a 9-column table
whose names and headers were cut to fit, and summary lines of ~100 columns wrapped mid-number.

Checked for the busiest table of every game (every wager, large amounts, held, alarms, pair hits) rendered
as the live view renders it, and through the real :func:`daemon.view.watch` in a demo-sized run.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from rich.live import Live

from tablesense.daemon.messages import (
    AlarmMessage,
    BaccaratOutcome,
    BoxResult,
    DeviceStatus,
    PublicCard,
    RoundResults,
    RoundState,
    SettlementMessage,
    TableStatus,
)
from tablesense.daemon.view import TableView, _Screen, render, summary_lines

TS = "2026-11-29T12:00:00Z"
WAGERS = {
    "baccarat": ["player", "banker", "tie", "perfect_pairs", "dragon_bonus", "house_money"],
    "ez-baccarat": ["player", "banker", "tie", "dragon_7", "panda_8", "perfect_pairs", "dragon_bonus"],
    "blackjack": ["perfect_pairs"],
    "uth": ["ultimate_pairs"],
}


def busy_view(game: str, table: str = "bac-01") -> TableView:
    """A table after a long session: every wager of the game with 7-digit amounts, pair hits,
    settlements, a held round with two alarms, both devices, the last result."""
    v = TableView(table)
    seq = 0

    def nxt() -> int:
        nonlocal seq
        seq += 1
        return seq

    v.apply(TableStatus(table=table, ts=TS, seq=0, msg_id="", state="online"))
    for name in ("shoe", "pads"):
        v.apply(DeviceStatus(table=table, ts=TS, seq=nxt(), msg_id=f"d{seq}", name=name, state="online"))
    positions = ["player", "banker"] if "baccarat" in game else ["1", "2", "3", "4", "5", "6", "7", "dealer"]
    cards = tuple(PublicCard(index=i + 1, card=c, position=positions[i % len(positions)])
                  for i, c in enumerate(["QH", "10S", "3D", "KC", "9H", "2S", "AH", "7D", "8C"]))
    v.apply(RoundState(table=table, ts=TS, seq=nxt(), msg_id=f"r{seq}", shoe=3, round=187, game=game,
                       phase="dealing", cards=cards, cards_remaining=198, held=True,
                       hold_codes=("PAST_POSTING", "SEQUENCE_GAP")))
    if "baccarat" in game:
        res = RoundResults(table=table, ts=TS, seq=nxt(), msg_id=f"x{seq}", shoe=3, round=186, game=game,
                           baccarat=BaccaratOutcome(player=("QH", "QS", "10D"), banker=("9D", "KC", "8S"),
                                                    player_total=0, banker_total=7, winner="banker",
                                                    player_natural=False, banker_natural=False,
                                                    player_pair=True, banker_pair=False, dragon_7=True))
    else:
        boxes = tuple(BoxResult(position=str(i), cards=("QH", "QS" if i % 2 else "9D"),
                                pair="mixed_pair" if i % 2 else "no_pair") for i in range(1, 8))
        res = RoundResults(table=table, ts=TS, seq=nxt(), msg_id=f"x{seq}", shoe=3, round=186, game=game,
                           boxes=boxes, dealer=("KD",), board=("2C", "3C", "4C", "5C", "6C") if game == "uth"
                           else ())
    for _ in range(185):
        v.apply(res.__class__(**{**{f: getattr(res, f) for f in res.__struct_fields__}, "seq": nxt(),
                                 "msg_id": f"x{seq}"}))
    hand_bets = ("perfect_pairs", "dragon_bonus") if "baccarat" in game else ()
    for i in range(400):
        bet = WAGERS[game][i % len(WAGERS[game])]
        win = i % 3 == 0
        v.apply(SettlementMessage(
            table=table, ts=TS, seq=nxt(), msg_id=f"s{seq}", shoe=3, round=100 + i // 4,
            spot=f"{i % 7 + 1}PP",
            seat=str(i % 7 + 1), bet=bet, hand="player" if bet in hand_bets else None, stake=2_500_000,
            outcome="win" if win else "lose", category="mixed_pair" if win else "lose",
            odds="25 to 1" if win else None, net=62_500_000 if win else -2_500_000,
            commission=125 if bet == "banker" else 0))
    text = "spot 3PP stake changed after the lock from 2500.00 to 5000.00 while the round was dealt"
    for code in ("PAST_POSTING", "SEQUENCE_GAP"):
        v.apply(AlarmMessage(table=table, ts=TS, seq=nxt(), msg_id=f"a{seq}", alarm_id=f"3.{seq}", code=code,
                             severity="critical", text=text, held=True))
    return v


def _screen_text(v: TableView, width: int = 80, height: int = 24) -> list[str]:
    """What the live view shows in a terminal of ``width`` x ``height`` (as Live renders it)."""
    console = Console(width=width, height=height, file=io.StringIO(), color_system=None, record=True,
                      force_terminal=False, legacy_windows=False)
    with Live(_Screen({v.table: v}), console=console, auto_refresh=False, vertical_overflow="crop") as live:
        live.refresh()
    shown = console.export_text().splitlines()
    return shown[-height:] if len(shown) > height else shown


@pytest.mark.parametrize("game", list(WAGERS))
def test_live_view_fits_80x24_whole(game: str) -> None:
    v = busy_view(game)
    lines = _screen_text(v)
    text = "\n".join(lines)
    assert len(lines) <= 24, text
    assert all(len(line) <= 80 for line in lines), text
    assert lines[0].startswith("╭") and lines[-1].startswith("╰"), text  # both borders: nothing cropped
    for bet in WAGERS[game]:  # every wager's name whole, on its own row of the table
        assert re.search(rf"^│ {re.escape(bet)} +\d", text, re.M), (bet, text)
    assert "…" not in "\n".join(ln for ln in lines if not ln.startswith(("│   #", "│   r"))), text
    assert "HELD PAST_POSTING,SEQUENCE_GAP" in text and "bac-01" in text
    # amounts whole: the 'all' row ends with the full net figure
    total = sum(t.net for t in v.tallies.values())
    whole, cents = divmod(abs(total), 100)
    assert f"{'+' if total > 0 else '-'}{whole}.{cents:02d}" in text, text


def test_render_without_limits_shows_everything_at_80_columns() -> None:
    v = busy_view("baccarat")
    console = Console(width=80, file=io.StringIO(), color_system=None, record=True)
    console.print(render(v))
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text.count("SEQUENCE_GAP (critical") == 1 and "pair hits:" in text and "settlements:" in text


def test_a_tiny_terminal_still_shows_the_whole_border() -> None:
    lines = _screen_text(busy_view("blackjack"), width=80, height=12)
    assert len(lines) <= 12 and lines[0].startswith("╭") and lines[-1].startswith("╰"), "\n".join(lines)


@pytest.mark.parametrize("game", list(WAGERS))
def test_summary_lines_fit_80_columns(game: str) -> None:
    lines = summary_lines(busy_view(game, table="demo-ez-baccarat"))
    assert all(len(line) <= 80 for line in lines), "\n".join(f"{len(x):3} {x}" for x in lines)
    for bet in WAGERS[game]:
        assert any(line.startswith(f"  {bet} ") for line in lines), bet
