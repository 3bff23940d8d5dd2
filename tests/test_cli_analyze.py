"""``tablesense analyze``: the published figures through the command's JSON, text tables, bad arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tablesense.daemon.cli import main

TABLESENSE = Path(sys.executable).parent / "tablesense"


def analyze_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[tuple[str, str | None], Any]:
    """Run ``tablesense analyze ... --json`` in-process; entries keyed by (bet, hand)."""
    assert main(["analyze", *args, "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    keyed = {(e["bet"], e["hand"]): e for e in entries}
    assert len(keyed) == len(entries)
    return keyed


def outcome(entry: dict[str, Any], category: str) -> dict[str, Any]:
    (found,) = [o for o in entry["outcomes"] if o["category"] == category]
    return found


def pct(entry: dict[str, Any], places: int) -> float:
    return round(float(Fraction(entry["house_edge_exact"])) * 100, places)


# --- baccarat, 8 decks (rules.md §4.1-§4.4) ---------------------------------------------


def test_baccarat_8_decks_main_wagers(capsys: pytest.CaptureFixture[str]) -> None:
    result = analyze_json(capsys, "--game", "baccarat", "--decks", "8")
    total = 4_998_398_275_503_360
    banker, player, tie = result[("banker", None)], result[("player", None)], result[("tie", None)]
    for entry, category, count, prob in (
        (banker, "banker_win", 2_292_252_566_437_888, 0.458597),
        (player, "player_win", 2_230_518_282_592_256, 0.446247),
        (tie, "tie", 475_627_426_473_216, 0.095156),
    ):
        o = outcome(entry, category)
        assert Fraction(o["fraction"]) == Fraction(count, total)
        assert round(o["probability"], 6) == prob
    assert (pct(banker, 4), pct(player, 4), pct(tie, 4)) == (1.0579, 1.2351, 14.3596)
    assert banker["house_edge"] == 0.010579 and player["expected_return"] == -0.012351
    assert (pct(result[("dragon_bonus", "player")], 2), pct(result[("dragon_bonus", "banker")], 2)) == (
        2.65,
        9.37,
    )
    assert (
        pct(result[("perfect_pairs", "player")], 4) == pct(result[("perfect_pairs", "banker")], 4) == 4.0964
    )
    assert ("dragon_7", None) not in result and ("panda_8", None) not in result


@pytest.mark.parametrize(
    ("paytable", "edge"), [("A", 4.0964), ("B", 3.3735), ("C", 2.1687), ("25-12-5", 7.9518)]
)
def test_baccarat_perfect_pairs_paytables(
    capsys: pytest.CaptureFixture[str], paytable: str, edge: float
) -> None:
    result = analyze_json(
        capsys, "--game", "baccarat", "--decks", "8", "--paytable", f"perfect_pairs={paytable}"
    )
    assert pct(result[("perfect_pairs", "player")], 4) == edge


def test_baccarat_tie_9_to_1_and_4_percent_commission(capsys: pytest.CaptureFixture[str]) -> None:
    result = analyze_json(
        capsys, "--game", "baccarat", "--decks", "8", "--paytable", "tie=9-1", "--commission", "4%"
    )
    assert pct(result[("tie", None)], 4) == 4.8440
    assert pct(result[("banker", None)], 4) == 0.5993


def test_ez_baccarat_dragon_7_and_panda_8(capsys: pytest.CaptureFixture[str]) -> None:
    result = analyze_json(capsys, "--game", "ez-baccarat", "--decks", "8")
    dragon, panda = result[("dragon_7", None)], result[("panda_8", None)]
    assert round(outcome(dragon, "dragon_7")["probability"], 6) == 0.022534
    assert round(outcome(panda, "panda_8")["probability"], 6) == 0.034543
    assert (dragon["expected_return"], panda["expected_return"]) == (-0.076113, -0.101876)
    assert (pct(dragon, 2), pct(panda, 2)) == (7.61, 10.19)


# --- blackjack (rules.md §4.6) and UTH -----------------------------------------------------------

BLACKJACK_GRID = {
    1: {"25-12-6": 47.0588, "30-10-5": 54.9020, "25-12-5": 50.9804, "25-15-5": 45.0980},
    2: {"25-12-6": 22.3301, "30-10-5": 25.2427, "25-12-5": 26.2136, "25-15-5": 20.3883},
    4: {"25-12-6": 10.1449, "30-10-5": 10.6280, "25-12-5": 14.0097, "25-15-5": 8.2126},
    5: {"25-12-6": 7.7220, "30-10-5": 7.7220, "25-12-5": 11.5830, "25-15-5": 5.7915},
    6: {"25-12-6": 6.1093, "30-10-5": 5.7878, "25-12-5": 9.9678, "25-15-5": 4.1801},
    8: {"25-12-6": 4.0964, "30-10-5": 3.3735, "25-12-5": 7.9518, "25-15-5": 2.1687},
}


@pytest.mark.parametrize("decks", sorted(BLACKJACK_GRID))
def test_blackjack_grid(capsys: pytest.CaptureFixture[str], decks: int) -> None:
    for schedule, edge in BLACKJACK_GRID[decks].items():
        result = analyze_json(
            capsys, "--game", "blackjack", "--decks", str(decks), "--paytable", f"perfect_pairs={schedule}"
        )
        assert list(result) == [("perfect_pairs", None)]
        entry = result[("perfect_pairs", None)]
        assert entry["paytable"] == schedule and pct(entry, 4) == edge
        assert sum(Fraction(o["fraction"]) for o in entry["outcomes"]) == 1


def test_blackjack_default_schedule_issue_figures(capsys: pytest.CaptureFixture[str]) -> None:
    for decks, edge in ((1, 47.06), (2, 22.33), (4, 10.14), (6, 6.11), (8, 4.10)):
        entry = analyze_json(capsys, "--game", "blackjack", "--decks", str(decks))[("perfect_pairs", None)]
        assert entry["paytable"] == "25-12-6" and pct(entry, 2) == edge


def test_uth_every_paytable(capsys: pytest.CaptureFixture[str]) -> None:
    edges = {}
    for paytable in "ABCDEF":
        entry = analyze_json(capsys, "--game", "uth", "--paytable", f"ultimate_pairs={paytable}")[
            ("ultimate_pairs", None)
        ]
        assert entry["paytable"] == paytable
        edges[paytable] = pct(entry, 4)
    assert edges == {"A": 8.8989, "B": 4.5249, "C": 4.6757, "D": 4.9020, "E": 6.7873, "F": 8.5406}
    entry = analyze_json(capsys, "--game", "uth", "--decks", "1")[("ultimate_pairs", None)]
    assert entry["paytable"] == "A" and outcome(entry, "aces")["fraction"] == "1/221"


def test_text_output_is_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--game", "blackjack", "--decks", "8"]) == 0
    out = capsys.readouterr().out
    assert "blackjack, 8 decks" in out and "perfect_pairs — paytable 25-12-6" in out
    assert "house edge 4.0964 %" in out and "25 to 1" in out and "0.016867470" in out
    assert main(["analyze", "--game", "uth", "--paytable", "ultimate_pairs=F"]) == 0
    out = capsys.readouterr().out
    assert "uth, 1 deck" in out and "1000 to 1" in out and "house edge 8.5406 %" in out


# --- bad arguments: one line, exit 2 (the real console script) -----------------------------------

BAD_ARGS = [
    (["--decks", "6"], "--game is required"),
    (["--game", "poker", "--decks", "6"], "unknown game 'poker'"),
    (["--game", "blackjack"], "number of decks is required"),
    (["--game", "blackjack", "--decks", "9"], "decks must be an integer from 1 to 8"),
    (["--game", "blackjack", "--decks", "six"], "--decks must be a whole number"),
    (["--game", "uth", "--decks", "6"], "decks must be 1"),
    (["--game", "blackjack", "--decks", "6", "--paytable", "perfect_pairs"], "expected BET=NAME"),
    (["--game", "blackjack", "--decks", "6", "--paytable", "perfect_pairs=A"], "unknown paytable 'A'"),
    (["--game", "baccarat", "--decks", "6", "--paytable", "perfect_pairs=25-12-5"], "8 decks only, not 6"),
    (["--game", "uth", "--paytable", "perfect_pairs=A"], "no paytable for 'perfect_pairs'"),
    (["--game", "blackjack", "--decks", "6", "--commission", "5%"], "blackjack takes no commission"),
    (["--game", "baccarat", "--decks", "8", "--commission", "lots"], "not a rate: 'lots'"),
]


def _check_one_line(code: int, out: str, err: str, phrase: str) -> None:
    assert code == 2, err
    assert out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("tablesense: analyze: ")
    assert phrase in err


@pytest.mark.parametrize(("args", "phrase"), BAD_ARGS, ids=[phrase for _, phrase in BAD_ARGS])
def test_bad_arguments(args: list[str], phrase: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["analyze", *args, "--json"])
    captured = capsys.readouterr()
    _check_one_line(code, captured.out, captured.err, phrase)


def test_bad_arguments_through_the_console_script() -> None:
    """A few of the above in a separate process: the real console script, exit status and stderr."""
    chosen = [BAD_ARGS[i] for i in (0, 1, 3, 4, 8)]
    for args, phrase in chosen:
        proc = subprocess.run(
            [str(TABLESENSE), "analyze", *args, "--json"], capture_output=True, text=True, timeout=120
        )
        _check_one_line(proc.returncode, proc.stdout, proc.stderr, phrase)


def test_console_script_prints_json() -> None:
    proc = subprocess.run(
        [str(TABLESENSE), "analyze", "--game", "blackjack", "--decks", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(proc.stdout)
    assert entry["expected_return"] == -0.223301  # WoO 2-deck table A


def test_a_reader_that_goes_away_ends_analyze_quietly_with_141() -> None:
    """``tablesense analyze ... | head -1``: the rich tables meet a closed pipe; the command ends as a shell
    tool does (status 141, nothing on stderr), not with rich's own exit status 1 (daemon.terminal)."""
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).with_name("tablesense")
    proc = subprocess.Popen([str(exe), "analyze", "--game", "baccarat", "--decks", "8"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away after one line, as head -1 does
    err = proc.stderr.read()
    assert proc.wait(30) == 141, err
    assert err == b""
