"""``tablesense settle``: good rounds in-process, every kind of bad input through the real console script."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tablesense.daemon.cli import UsageError, main
from tablesense.daemon.commands.settle import settle_document

TABLESENSE = Path(sys.executable).parent / "tablesense"


def settle(doc: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Run ``tablesense settle FILE`` in-process and decode its JSON output."""
    path = tmp_path / "round.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["settle", str(path)]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def brief(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (w["spot"], w["bet"], w["hand"], w["outcome"], w["category"], w["odds"], w["net"])
        for w in result["wagers"]
    ]


BLACKJACK = {
    "game": "blackjack",
    "decks": 6,
    "paytables": {"perfect_pairs": "30-10-5"},
    "wagers": [
        {"spot": "3", "bet": "perfect_pairs", "hand": None, "stake": 2500},
        {"spot": "1", "bet": "perfect_pairs", "stake": 100},
        {"spot": "5", "bet": "perfect_pairs", "stake": 1000},
    ],
    "hands": {"3": ["QH", "QD"], "1": ["AS", "KS"], "5": ["7♣", "7c"], "dealer": ["9S", "7C"]},
}

UTH = {
    "game": "uth",
    "paytables": {"ultimate_pairs": "F"},
    "wagers": [
        {"spot": "1", "bet": "ultimate_pairs", "stake": 500},
        {"spot": "2", "bet": "ultimate_pairs", "stake": 500},
    ],
    "hands": {"1": ["AS", "AC"], "2": ["KD", "QD"], "dealer": ["AD", "AH"]},
}

BACCARAT = {
    "game": "baccarat",
    "decks": 8,
    "wagers": [
        {"spot": "1", "bet": "banker", "stake": 700},
        {"spot": "2", "bet": "perfect_pairs", "hand": "player", "stake": 100},
        {"spot": "2", "bet": "player", "stake": 1000},
    ],
    "cards": ["QH", "4D", "QS", "3C", "5H"],
}


# --- good rounds (in-process) ----------------------------------------------------------------------


def test_blackjack_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = copy.deepcopy(BLACKJACK)
    doc["hands"]["1"] = ["AS", "KS"]
    doc["hands"]["5"] = ["7C", "7S"]
    result = settle(doc, tmp_path, capsys)
    assert brief(result) == [
        ("3", "perfect_pairs", None, "win", "colored_pair", "10 to 1", 25_000),
        ("1", "perfect_pairs", None, "lose", "no_pair", None, -100),
        ("5", "perfect_pairs", None, "win", "colored_pair", "10 to 1", 10_000),
    ]
    assert result["game"] == "blackjack" and result["decks"] == 6
    assert result["paytables"] == {"perfect_pairs": "30-10-5"}
    assert result["round"] == {
        "hands": {"3": ["QH", "QD"], "1": ["AS", "KS"], "5": ["7C", "7S"], "dealer": ["9S", "7C"]}
    }
    assert result["totals"] == {"stake": 3600, "net": 34_900, "commission": 0}


def test_blackjack_symbols_and_default_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = copy.deepcopy(BLACKJACK)
    del doc["paytables"]
    result = settle(doc, tmp_path, capsys)  # 7♣ 7c: a perfect pair, 25 to 1 by default
    assert brief(result)[2] == ("5", "perfect_pairs", None, "win", "perfect_pair", "25 to 1", 25_000)
    assert result["round"]["hands"]["5"] == ["7C", "7C"]


def test_blackjack_eligibility(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = copy.deepcopy(BLACKJACK)
    doc["wagers"].append({"spot": "3", "bet": "blackjack", "stake": 5000})
    result = settle(doc, tmp_path, capsys)
    assert [(w["spot"], w["outcome"], w["category"], w["net"]) for w in result["wagers"]] == [
        ("3", "win", "colored_pair", 25_000),
        ("1", "push", "ineligible_no_blackjack_wager", 0),
        ("5", "push", "ineligible_no_blackjack_wager", 0),
    ]
    assert result["totals"]["net"] == 25_000


def test_uth_paytable_f(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = copy.deepcopy(UTH)
    result = settle(doc, tmp_path, capsys)
    assert brief(result) == [
        ("1", "ultimate_pairs", None, "win", "aces_with_dealer_aces", "1000 to 1", 500_000),
        ("2", "ultimate_pairs", None, "lose", "lose", None, -500),
    ]
    assert result["decks"] == 1 and result["paytables"] == {"ultimate_pairs": "F"}


def test_uth_default_paytable_and_ante(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {
        "game": "uth",
        "decks": 1,
        "wagers": [
            {"spot": "4", "bet": "ante", "stake": 1000},
            {"spot": "4", "bet": "ultimate_pairs", "stake": 200},
            {"spot": "6", "bet": "ultimate_pairs", "stake": 200},
        ],
        "hands": {"4": ["AH", "KH"], "6": ["2C", "2D"]},
    }
    result = settle(doc, tmp_path, capsys)
    assert brief(result) == [
        ("4", "ultimate_pairs", None, "win", "ace_king_suited", "25 to 1", 5000),
        ("6", "ultimate_pairs", None, "push", "ineligible_no_ante_wager", None, 0),
    ]
    assert result["paytables"] == {"ultimate_pairs": "A"}


def test_baccarat_round_commission_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 7.00 Banker win pays 6.65 (5 % commission), the coup is reported, totals add up."""
    result = settle(copy.deepcopy(BACCARAT), tmp_path, capsys)
    assert brief(result) == [
        ("1", "banker", None, "win", "banker_win", "1 to 1", 665),
        ("2", "perfect_pairs", "player", "win", "mixed_pair", "6 to 1", 600),
        ("2", "player", None, "lose", "banker_win", None, -1000),
    ]
    assert result["wagers"][0]["commission"] == 35
    assert result["round"]["player"] == ["QH", "QS", "5H"] and result["round"]["banker"] == ["4D", "3C"]
    assert result["round"]["winner"] == "banker"
    assert result["commission"] == {"rate": "5%", "unit": 1, "rounding": "half_up"}
    assert result["totals"] == {"stake": 1800, "net": 265, "commission": 35}


@pytest.mark.parametrize(
    ("commission", "net", "shown"),
    [
        ("5%", 665, "5%"),
        ({"rate": "5%", "unit": 25, "rounding": "up"}, 650, "5%"),
        ({"rate": "5%", "unit": 25, "rounding": "down"}, 675, "5%"),
        ({"rate": "0.04"}, 672, "4%"),
        ({"rate": "2.5%", "rounding": "half_even"}, 682, "2.5%"),
    ],
)
def test_baccarat_commission_forms(
    commission: Any, net: int, shown: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = copy.deepcopy(BACCARAT)
    doc["commission"] = commission
    result = settle(doc, tmp_path, capsys)
    assert result["wagers"][0]["net"] == net
    assert result["wagers"][0]["net"] + result["wagers"][0]["commission"] == 700
    assert result["commission"]["rate"] == shown


def test_ez_baccarat_dragon_7(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {
        "game": "ez-baccarat",
        "decks": 8,
        "wagers": [
            {"spot": "1", "bet": "dragon_7", "stake": 100},
            {"spot": "1", "bet": "banker", "stake": 100},
        ],
        "cards": ["4S", "2H", "2D", "2C", "3D"],
    }  # Player 6 stands, Banker 4 draws 3: three-card 7
    result = settle(doc, tmp_path, capsys)
    assert [(w["bet"], w["outcome"], w["net"]) for w in result["wagers"]] == [
        ("dragon_7", "win", 4000),
        ("banker", "push", 0),
    ]
    assert "commission" not in result and result["paytables"]["dragon_7"] == "40-1"


def test_stdin_dash(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(UTH | {"paytables": {"ultimate_pairs": "A"}})))
    assert main(["settle", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["net"] == 500 * 30 - 500


def test_real_console_script_reads_stdin() -> None:
    doc = copy.deepcopy(BLACKJACK)
    doc["hands"]["5"] = ["7C", "7S"]
    proc = subprocess.run(
        [str(TABLESENSE), "settle"], input=json.dumps(doc), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["totals"]["net"] == 25_000 - 100 + 10_000


# --- bad input: one line on stderr, exit 2, never a traceback (the real console script) ------------


def changed(base: dict[str, Any], **updates: Any) -> dict[str, Any]:
    doc = copy.deepcopy(base)
    for key, value in updates.items():
        if value is KeyError:
            doc.pop(key)
        else:
            doc[key] = value
    return doc


def wagers_with(base: dict[str, Any], **fields: Any) -> list[dict[str, Any]]:
    first = dict(base["wagers"][0])
    for key, value in fields.items():
        if value is KeyError:
            first.pop(key)
        else:
            first[key] = value
    return [first]


BAD_INPUTS: dict[str, tuple[str, str]] = {
    # kind: (stdin text, a phrase the one-line message must contain)
    "unknown card": (
        json.dumps(changed(BLACKJACK, hands={"3": ["QH", "1X"]})),
        "hands.3[1]: not a card: '1X'",
    ),
    "unknown card in baccarat": (json.dumps(changed(BACCARAT, cards=["QH", "4D", "QS", "ZZ"])), "cards[3]"),
    "card the shoe cannot hold": (
        json.dumps(changed(BLACKJACK, decks=1, hands={"3": ["QH", "QH"]})),
        "QH cannot come out of a 1-deck shoe",
    ),
    "card twice in one uth deck": (
        json.dumps(changed(UTH, hands={"1": ["AS", "KS"], "2": ["KH", "AH"], "dealer": ["AD", "AH"]})),
        "AH is already out",
    ),
    "ninth copy in 8-deck baccarat": (json.dumps(changed(BACCARAT, cards=["QH"] * 9)), "QH"),
    "too few baccarat cards": (json.dumps(changed(BACCARAT, cards=["QH", "4D", "QS"])), "settle: "),
    "too few cards for a box": (json.dumps(changed(BLACKJACK, hands={"3": ["QH"]})), "box 3"),
    "too many cards for a box": (
        json.dumps(changed(BLACKJACK, hands={"3": ["QH", "QD", "2C"]})),
        "position 3 has 3 cards",
    ),
    "paytable F without dealer": (
        json.dumps(changed(UTH, hands={"1": ["AS", "AC"], "2": ["KD", "QD"]})),
        "needs the dealer's two cards",
    ),
    "paytable not allowed for the deck count": (
        json.dumps(changed(BACCARAT, decks=6, paytables={"perfect_pairs": "25-12-5"})),
        "allowed with 8 decks only, not 6",
    ),
    "unknown paytable": (json.dumps(changed(UTH, paytables={"ultimate_pairs": "Z"})), "unknown paytable 'Z'"),
    "paytable for a bet the game lacks": (json.dumps(changed(BLACKJACK, paytables={"tie": "9-1"})), "tie"),
    "wager not offered (baccarat)": (
        json.dumps(changed(BACCARAT, wagers=[{"spot": "1", "bet": "dragon_7", "stake": 100}])),
        "dragon_7",
    ),
    "wager not offered (blackjack)": (
        json.dumps(changed(BLACKJACK, wagers=[{"spot": "3", "bet": "tie", "stake": 100}])),
        "blackjack does not offer the 'tie' wager",
    ),
    "unknown bet": (
        json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, bet="insurance"))),
        "wagers[0].bet: unknown bet 'insurance'",
    ),
    "unknown game": (json.dumps(changed(BLACKJACK, game="poker")), "unknown game 'poker'"),
    "malformed JSON": ('{"game": "blackjack", "decks": 6,', "input is not valid JSON"),
    "empty input": ("", "input is not valid JSON"),
    "not an object": ("[1, 2]", "input: expected a JSON object, got a list"),
    "deeply nested JSON": ("[" * 100_000 + "]" * 100_000, "input is not valid JSON"),
    "duplicate key": ('{"game": "uth", "game": "blackjack"}', "key 'game' appears twice"),
    "missing game": (json.dumps(changed(BLACKJACK, game=KeyError)), "missing key 'game'"),
    "missing decks": (json.dumps(changed(BLACKJACK, decks=KeyError)), "missing key 'decks'"),
    "missing wagers": (json.dumps(changed(BLACKJACK, wagers=KeyError)), "missing key 'wagers'"),
    "missing hands": (json.dumps(changed(BLACKJACK, hands=KeyError)), "missing key 'hands'"),
    "missing cards": (json.dumps(changed(BACCARAT, cards=KeyError)), "missing key 'cards'"),
    "hands for baccarat": (json.dumps(changed(BACCARAT, hands={"1": ["QH", "QD"]})), "not 'hands'"),
    "missing stake": (
        json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, stake=KeyError))),
        "wagers[0]: missing key 'stake'",
    ),
    "unknown key": (
        json.dumps(changed(BLACKJACK, paytable={"perfect_pairs": "A"})),
        "unknown key 'paytable'",
    ),
    "unknown wager key": (
        json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, amount=5))),
        "unknown key 'amount'",
    ),
    "decks as a string": (json.dumps(changed(BLACKJACK, decks="6")), "decks: expected an integer"),
    "decks out of range": (json.dumps(changed(BLACKJACK, decks=9)), "decks must be an integer from 1 to 8"),
    "decks true": (json.dumps(changed(BLACKJACK, decks=True)), "decks: expected an integer"),
    "uth with six decks": (json.dumps(changed(UTH, decks=6)), "decks must be 1"),
    "paytables not an object": (
        json.dumps(changed(BLACKJACK, paytables=[])),
        "paytables: expected an object",
    ),
    "wagers not a list": (json.dumps(changed(BLACKJACK, wagers={"spot": "3"})), "wagers: expected a list"),
    "hands not an object": (
        json.dumps(changed(BLACKJACK, hands=[["QH", "QD"]])),
        "hands: expected an object",
    ),
    "card not a string": (
        json.dumps(changed(BLACKJACK, hands={"3": [12, "QD"]})),
        "hands.3[0]: expected a card",
    ),
    "spot as a number": (
        json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, spot=3))),
        "wagers[0].spot: expected a string",
    ),
    "spot that is no box": (
        json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, spot="9"))),
        "box 1 to 7",
    ),
    "float stake": (
        json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, stake=25.5))),
        "wagers[0].stake: must be an integer number of minor units (cents), got 25.5",
    ),
    "whole float stake": (
        json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, stake=2500.0))),
        "got 2500.0",
    ),
    "string stake": (
        json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, stake="2500"))),
        "wagers[0].stake: expected an integer",
    ),
    "zero stake": (json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, stake=0))), "positive"),
    "NaN stake": (json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, stake=float("nan")))), "stake"),
    "baccarat hand on blackjack": (
        json.dumps(changed(BLACKJACK, wagers=wagers_with(BLACKJACK, hand="player"))),
        "blackjack wagers name no hand",
    ),
    "unknown hand": (
        json.dumps(changed(BACCARAT, wagers=wagers_with(BACCARAT, hand="dealer"))),
        "unknown hand 'dealer'",
    ),
    "commission on blackjack": (
        json.dumps(changed(BLACKJACK, commission="5%")),
        "blackjack takes no commission",
    ),
    "commission not a rate": (json.dumps(changed(BACCARAT, commission="five")), "not a rate: 'five'"),
    "commission rate too high": (json.dumps(changed(BACCARAT, commission="150%")), "commission rate"),
    "commission bad rounding": (
        json.dumps(changed(BACCARAT, commission={"rate": "5%", "rounding": "nearest"})),
        "unknown mode 'nearest'",
    ),
    "commission bad unit": (json.dumps(changed(BACCARAT, commission={"rate": "5%", "unit": 0})), "unit"),
    "commission float unit": (
        json.dumps(changed(BACCARAT, commission={"rate": "5%", "unit": 2.5})),
        "commission.unit: expected an integer",
    ),
}


# One of each kind also goes through the real console script (a separate process);
# the process start-up dominates, so the other variants run in-process through the same main().
THROUGH_CONSOLE_SCRIPT = [
    "unknown card",
    "card the shoe cannot hold",
    "too few baccarat cards",
    "too few cards for a box",
    "paytable not allowed for the deck count",
    "wager not offered (baccarat)",
    "malformed JSON",
    "missing wagers",
    "decks as a string",
    "float stake",
]


def _check_one_line(code: int, out: str, err: str, phrase: str) -> None:
    assert code == 2, (out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tablesense: settle: ")
    assert phrase in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("kind", list(BAD_INPUTS))
def test_bad_input_one_line_exit_2(
    kind: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text, phrase = BAD_INPUTS[kind]
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    code = main(["settle", "-"])
    captured = capsys.readouterr()
    _check_one_line(code, captured.out, captured.err, phrase)


def _run_settle(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TABLESENSE), "settle", "-"], input=text, capture_output=True, text=True, timeout=120
    )


def test_bad_input_through_the_console_script() -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(_run_settle, [BAD_INPUTS[k][0] for k in THROUGH_CONSOLE_SCRIPT]))
    for kind, proc in zip(THROUGH_CONSOLE_SCRIPT, runs, strict=True):
        _check_one_line(proc.returncode, proc.stdout, proc.stderr, BAD_INPUTS[kind][1])


def test_missing_file_and_bad_bytes(tmp_path: Path) -> None:
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{\x00")
    for path, phrase in ((tmp_path / "nope.json", "cannot read"), (binary, "cannot read")):
        proc = subprocess.run(
            [str(TABLESENSE), "settle", str(path)], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and phrase in proc.stderr
        assert "Traceback" not in proc.stderr


# --- fuzz: whatever the document, a result or one UsageError -------------------------------------

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 10**6),
    st.floats(allow_nan=False),
    st.sampled_from(
        [
            "QH",
            "QD",
            "AS",
            "10C",
            "x",
            "",
            "A",
            "perfect_pairs",
            "player",
            "3",
            "dealer",
            "5%",
            "F",
            "25-12-5",
        ]
    ),
)
json_key = st.sampled_from(["spot", "bet", "hand", "stake", "3", "dealer", "rate", "unit", "perfect_pairs"])
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_key, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.sampled_from([BLACKJACK, UTH, BACCARAT]),
    st.sampled_from(["game", "decks", "paytables", "commission", "wagers", "cards", "hands", "stake"]),
    json_value,
)
def test_any_mutated_request_settles_or_is_one_usage_error(
    base: dict[str, Any], key: str, value: Any
) -> None:
    doc = copy.deepcopy(base)
    if key == "stake":
        doc["wagers"][0]["stake"] = value
    else:
        doc[key] = value
    try:
        result = settle_document(json.dumps(doc))
    except UsageError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("settle: ")
    else:
        assert all(type(w["net"]) is int for w in result["wagers"])
        assert result["totals"]["net"] == sum(w["net"] for w in result["wagers"])


# --- the game dispatcher the command uses ---------------------------------------------------------


def test_dispatcher_games_and_shapes() -> None:
    from tablesense.daemon.rules.cards import Card
    from tablesense.daemon.rules.errors import RulesError
    from tablesense.daemon.rules.games import GAMES, UnknownGame, get_game

    assert list(GAMES) == ["baccarat", "ez-baccarat", "blackjack", "uth"]
    with pytest.raises(UnknownGame, match="choose one of baccarat, ez-baccarat, blackjack, uth"):
        get_game("Blackjack")
    blackjack = get_game("blackjack")
    with pytest.raises(RulesError, match="number of decks is required"):
        blackjack.rules(None)
    rules = blackjack.rules(2, {"perfect_pairs": "25-15-5"})
    with pytest.raises(RulesError, match="given as hands"):
        blackjack.settle([Card.parse("QH")], [], rules)
    baccarat = get_game("baccarat")
    with pytest.raises(RulesError, match="cards in draw order"):
        baccarat.settle({"1": [Card.parse("QH")]}, [], baccarat.rules(8))
    assert get_game("uth").rules(None).paytables == {"ultimate_pairs": "A"}
    (analysis,) = blackjack.analyze(rules)
    assert analysis.paytable == "25-15-5" and round(float(analysis.house_edge) * 100, 4) == 20.3883
