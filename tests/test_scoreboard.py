"""The baccarat scoreboard roads (daemon/scoreboard.py) against rules.md §5.2, rule by rule."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablesense.daemon.scoreboard import (
    DERIVED_ROADS,
    GRID_ROWS,
    MarkColour,
    Roads,
    RoundOutcome,
    Scoreboard,
    ScoreboardMessage,
    Winner,
    derived_colour,
)

DATA = Path(__file__).resolve().parent / "data"
REAL_RESULTS = DATA / "real-results" / "evolution-table-265-shoes.txt"
W = {"B": Winner.BANKER, "P": Winner.PLAYER, "T": Winner.TIE}


def board_of(seq: str, shoe: int | None = 1) -> Scoreboard:
    """A board fed with a 'BPT' string, one round each, numbered from 1."""
    board = Scoreboard()
    for i, ch in enumerate(seq, start=1):
        board.add(RoundOutcome(winner=W[ch], shoe=shoe, round=i))
    return board


def cells(road: list[object]) -> list[tuple[int, int]]:
    return [(c.col, c.row) for c in road]  # type: ignore[attr-defined]


def colours(road: list[object]) -> str:
    return "".join("R" if c.colour is MarkColour.RED else "B" for c in road)  # type: ignore[attr-defined]


# --- bead plate -------------------------------------------------------------------------------------

def test_bead_plate_every_round_including_ties_six_rows_column_by_column() -> None:
    roads = board_of("BPTBBPTP").snapshot()
    assert [c.result.value[0].upper() for c in roads.bead_plate] == list("BPTBBPTP")
    assert cells(roads.bead_plate) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 0), (1, 1)]


def test_bead_plate_and_big_road_pair_and_natural_markers() -> None:
    board = Scoreboard()
    board.add(RoundOutcome(winner=Winner.BANKER, banker_pair=True, natural=True, banker_total=9,
                           player_total=3, round=1))
    board.add(RoundOutcome(winner=Winner.TIE, player_pair=True, banker_pair=True, player_total=6,
                           banker_total=6, round=2))
    board.add(RoundOutcome(winner=Winner.PLAYER, player_pair=True, player_total=7, banker_total=2, round=3))
    roads = board.snapshot()
    b0, t1, p2 = roads.bead_plate
    assert (b0.banker_pair, b0.player_pair, b0.natural, b0.total) == (True, False, True, 9)
    assert (t1.banker_pair, t1.player_pair, t1.natural, t1.total) == (True, True, False, 6)
    assert (p2.banker_pair, p2.player_pair, p2.natural, p2.total) == (False, True, False, 7)
    big0, big1 = roads.big_road
    assert (big0.banker_pair, big0.natural, big0.ties) == (True, True, 1)
    assert (big1.player_pair, big1.banker_pair) == (True, False)
    assert roads.stats == msgspec.structs.replace(roads.stats, rounds=3, banker=1, player=1, tie=1,
                                                  player_pair=2, banker_pair=2, naturals=1)


# --- big road ---------------------------------------------------------------------------------------

def test_big_road_same_winner_goes_down_change_starts_new_column() -> None:
    roads = board_of("BBPPPB").snapshot()
    assert cells(roads.big_road) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert [(c.streak, c.depth) for c in roads.big_road] == [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 1)]
    assert [c.winner for c in roads.big_road] == [Winner.BANKER] * 2 + [Winner.PLAYER] * 3 + [Winner.BANKER]


def test_ties_first_are_recorded_and_marked_on_the_first_cell() -> None:
    board = board_of("TT")
    assert board.snapshot().big_road == []
    assert board.snapshot().leading_ties == 2
    board.add(RoundOutcome(winner=Winner.PLAYER, shoe=1, round=3))
    board.add(RoundOutcome(winner=Winner.PLAYER, shoe=1, round=4))
    roads = board.snapshot()
    assert [c.ties for c in roads.big_road] == [2, 0]
    assert cells(roads.big_road) == [(0, 0), (0, 1)]
    assert len(roads.bead_plate) == 4 and roads.leading_ties == 2


def test_ties_between_results_take_no_cell_and_count_on_the_latest_cell() -> None:
    roads = board_of("BTTPTBB").snapshot()
    assert cells(roads.big_road) == [(0, 0), (1, 0), (2, 0), (2, 1)]
    assert [c.ties for c in roads.big_road] == [2, 1, 0, 0]
    # a tie between two Banker wins does not break the streak
    roads = board_of("BTB").snapshot()
    assert cells(roads.big_road) == [(0, 0), (0, 1)] and roads.big_road[0].ties == 1


def test_streak_of_seven_and_more_turns_right_along_the_bottom_row() -> None:
    roads = board_of("B" * 9 + "P").snapshot()
    assert cells(roads.big_road)[:9] == [(0, r) for r in range(6)] + [(1, 5), (2, 5), (3, 5)]
    assert [c.depth for c in roads.big_road[:9]] == list(range(1, 10))
    # the next streak starts in the column after the streak's first column (its top cell is free)
    assert cells(roads.big_road)[9] == (1, 0)


def test_dragon_tail_nests_under_an_earlier_tail_and_stays_on_its_row() -> None:
    # B x8: col 0 + tail (1,5),(2,5); P x6: col 1 rows 0-4, turns right at row 4 above the old tail;
    # B x5: col 2 rows 0-3, (2,4) taken -> right along row 3 (and it must not drop back down).
    roads = board_of("B" * 8 + "P" * 6 + "B" * 5).snapshot()
    got = cells(roads.big_road)
    assert got[8:14] == [(1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (2, 4)]
    assert got[14:] == [(2, 0), (2, 1), (2, 2), (2, 3), (3, 3)]
    assert len(set(got)) == len(got)


def test_void_rounds_never_appear_and_duplicates_are_ignored() -> None:
    board = board_of("BP")
    assert board.add(RoundOutcome(winner=Winner.BANKER, shoe=1, round=3, void=True)) is False
    assert board.add(RoundOutcome(winner=Winner.PLAYER, shoe=1, round=2)) is False  # replayed message
    roads = board.snapshot()
    assert len(roads.bead_plate) == 2 and len(roads.big_road) == 2 and roads.stats.rounds == 2


def test_new_shoe_resets_the_board_and_reset_clears_it() -> None:
    board = board_of("BBPT", shoe=1)
    board.add(RoundOutcome(winner=Winner.PLAYER, shoe=2, round=1, cards_remaining=410))
    roads = board.snapshot()
    assert roads.shoe == 2
    assert [c.result for c in roads.bead_plate] == [Winner.PLAYER]
    assert roads.stats.rounds == 1 and roads.stats.cards_remaining == 410
    board.reset(3)
    roads = board.snapshot()
    assert roads.shoe == 3 and roads.bead_plate == [] and roads.big_road == [] and roads.stats.rounds == 0


# --- derived roads ----------------------------------------------------------------------------------

def test_derived_roads_of_a_worked_sequence() -> None:
    # streaks B P B PPP B PPP BB: L = 1,1,1,3,1,3,2 (hand-computed per rules.md §5.2)
    roads = board_of("BPBPPPBPPPBB").snapshot()
    assert colours(roads.big_eye_boy) == "RRBRBBBRBR"
    assert cells(roads.big_eye_boy) == [(0, 0), (0, 1), (1, 0), (2, 0), (3, 0), (3, 1), (3, 2), (4, 0),
                                        (5, 0), (6, 0)]
    assert colours(roads.small_road) == "RBRBRRRRB"
    assert cells(roads.small_road) == [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (4, 1), (4, 2), (4, 3),
                                       (5, 0)]
    assert colours(roads.cockroach_pig) == "BRBRBRBR"
    assert cells(roads.cockroach_pig) == [(c, 0) for c in range(8)]
    assert (roads.big_eye_boy[0].big_road_streak, roads.big_eye_boy[0].big_road_depth) == (3, 1)
    assert (roads.small_road[0].big_road_streak, roads.small_road[0].big_road_depth) == (4, 1)
    assert (roads.cockroach_pig[0].big_road_streak, roads.cockroach_pig[0].big_road_depth) == (4, 2)


@pytest.mark.parametrize(("road", "seq", "first", "colour"), [
    # Big Eye Boy: B2 (column 2, row 2) else C1
    ("big_eye_boy", "BPP", (2, 2), "B"),
    ("big_eye_boy", "BBPP", (2, 2), "R"),
    ("big_eye_boy", "BPB", (3, 1), "R"),
    ("big_eye_boy", "BBPB", (3, 1), "B"),
    # Small Road: C2 else D1
    ("small_road", "BPBB", (3, 2), "B"),
    ("small_road", "BPBP", (4, 1), "R"),
    # Cockroach Pig: D2 else E1
    ("cockroach_pig", "BPBPP", (4, 2), "B"),
    ("cockroach_pig", "BPBPB", (5, 1), "R"),
    ("cockroach_pig", "BBPBPB", (5, 1), "B"),
])
def test_first_mark_of_each_derived_road_at_either_of_its_two_cells(
        road: str, seq: str, first: tuple[int, int], colour: str) -> None:
    prefix = board_of(seq[:-1]).snapshot()
    assert getattr(prefix, road) == [], "no mark before the start cell"
    roads = board_of(seq).snapshot()
    marks = getattr(roads, road)
    assert len(marks) == 1
    assert (marks[0].big_road_streak, marks[0].big_road_depth) == first
    assert colours(marks) == colour and cells(marks) == [(0, 0)]


def test_b2_and_c1_both_marked_when_b2_exists() -> None:
    roads = board_of("BPPB").snapshot()
    assert [(m.big_road_streak, m.big_road_depth) for m in roads.big_eye_boy] == [(2, 2), (3, 1)]
    assert colours(roads.big_eye_boy) == "BB"  # (2,2): L1 = 1 = r-1; (3,1): L2 = 2 != L1 = 1


def test_straight_drop_is_red() -> None:
    # column 2 grows to 4 beside a column of 1: row 2 blue (ended one above), rows 3 and 4 red (drop)
    roads = board_of("BPPPP").snapshot()
    assert colours(roads.big_eye_boy) == "BRR"
    assert [derived_colour([1, r], 2, r, 1) for r in (2, 3, 4)] == [MarkColour.BLUE, MarkColour.RED,
                                                                    MarkColour.RED]


def test_derived_roads_use_logical_streaks_not_the_drawn_grid() -> None:
    # B x8 (drawn as 6 + a tail of 2), then P x9: Big Eye Boy compares with L1 = 8, not the 6 drawn rows
    roads = board_of("B" * 8 + "P" * 9 + "B").snapshot()
    assert colours(roads.big_eye_boy) == "RRRRRRRBB"  # depths 2-8 red, depth 9 blue, then L2=9 != L1=8
    assert cells(roads.big_eye_boy) == [(0, r) for r in range(6)] + [(1, 5), (1, 0), (1, 1)]


def test_derived_colour_rejects_positions_before_the_start() -> None:
    assert derived_colour([2], 1, 2, 1) is None
    assert derived_colour([1, 1], 2, 1, 1) is None
    assert derived_colour([1, 1, 1], 3, 1, 2) is None


# --- properties -------------------------------------------------------------------------------------

def _start_index(big: list[object], k: int) -> int | None:
    for i, c in enumerate(big):
        if (c.streak, c.depth) in ((k + 1, 2), (k + 2, 1)):  # type: ignore[attr-defined]
            return i
    return None


def check_invariants(roads: Roads, seq: str) -> None:
    non_ties = [ch for ch in seq if ch != "T"]
    assert len(roads.bead_plate) == len(seq)
    assert len(roads.big_road) == len(non_ties)
    assert [c.winner for c in roads.big_road] == [W[ch] for ch in non_ties]
    ties_on_board = sum(c.ties for c in roads.big_road) if roads.big_road else roads.leading_ties
    assert ties_on_board == seq.count("T")
    for name, k in DERIVED_ROADS.items():
        marks = getattr(roads, name)
        start = _start_index(roads.big_road, k)
        expected = [] if start is None else roads.big_road[start:]
        assert [(m.big_road_streak, m.big_road_depth) for m in marks] == [
            (c.streak, c.depth) for c in expected], name
    for name in ("bead_plate", "big_road", *DERIVED_ROADS):
        road = getattr(roads, name)
        pos = cells(road)
        assert len(set(pos)) == len(pos), f"{name}: two cells drawn on one spot"
        assert all(0 <= r < GRID_ROWS and c >= 0 for c, r in pos), name
    # drawn adjacency: a streak's next cell is directly below or directly right of the previous one
    # and a new streak starts on the top row, right of every top-row cell drawn before it
    for i in range(1, len(roads.big_road)):
        a, b = roads.big_road[i - 1], roads.big_road[i]
        if b.streak == a.streak:
            assert (b.col, b.row) in ((a.col, a.row + 1), (a.col + 1, a.row))
        else:
            top = max(c.col for c in roads.big_road[:i] if c.row == 0)
            assert (b.col, b.row) == (top + 1, 0)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="BPT", max_size=90))
def test_property_every_derived_road_has_one_mark_per_big_road_cell_from_its_start(seq: str) -> None:
    check_invariants(board_of(seq).snapshot(), seq)


def test_property_holds_on_265_real_shoes() -> None:
    shoes = [line.split("|")[0].strip() for line in REAL_RESULTS.read_text().splitlines() if line.strip()]
    assert len(shoes) == 265
    board = Scoreboard()
    for n, seq in enumerate(shoes):
        for i, ch in enumerate(seq, start=1):
            board.add(RoundOutcome(winner=W[ch], shoe=n + 1, round=i))
        roads = board.snapshot()
        check_invariants(roads, seq)
        assert roads.stats.rounds == len(seq) and roads.stats.tie == seq.count("T")


# --- serialisation ----------------------------------------------------------------------------------

def test_to_dict_and_message_are_json_round_trippable() -> None:
    board = board_of("TBPPBT")
    d = board.to_dict()
    assert set(d) >= {"bead_plate", "big_road", "big_eye_boy", "small_road", "cockroach_pig", "stats"}
    assert d["big_road"][0] == {"col": 0, "row": 0, "winner": "banker", "streak": 1, "depth": 1, "ties": 1,
                                "player_pair": False, "banker_pair": False, "natural": False, "round": 2}
    msg = board.message("T7", seq=12, msg_id="m-12", ts="2026-11-29T12:00:00Z")
    raw = msgspec.json.encode(msg)
    back = msgspec.json.decode(raw, type=ScoreboardMessage)
    assert back == msg
    assert msgspec.json.decode(raw)["schema"] == "tablesense.scoreboard"
    assert back.round == 6 and back.roads.stats.tie == 2


def test_add_results_from_the_daemon_message_with_24_real_rounds() -> None:
    """Feed real recorded Ezugi rounds as tablesense.results messages; the stats equal the recorded flags."""
    from tablesense.daemon.messages import BaccaratOutcome, RoundResults

    path = DATA / "real-shoes" / "ezugi_queenco_32100_2022-11-28.jsonl"
    rows = [msgspec.json.decode(line) for line in path.read_text().splitlines() if line.strip()]
    board = Scoreboard()
    for r in rows:
        rec = r["recorded_result"]
        msg = RoundResults(table="T1", ts="2022-11-28T09:21:26Z", shoe=7, round=r["round"], game="baccarat",
                           baccarat=BaccaratOutcome(
                               player=tuple(r["player"]), banker=tuple(r["banker"]),
                               player_total=rec["player_score"], banker_total=rec["banker_score"],
                               winner=rec["winner"].lower(), player_natural=rec["natural"],
                               banker_natural=False, player_pair=rec["player_pair"],
                               banker_pair=rec["banker_pair"]))
        assert board.add_results(msg) is True
        assert board.add_results(msg) is False  # the same results message again (redelivery)
    board.add_results(RoundResults(table="T1", ts="x", shoe=7, round=99, game="baccarat", void=True))
    board.add_results(RoundResults(table="T1", ts="x", shoe=7, round=100, game="blackjack"))
    stats = board.stats()
    assert stats.rounds == len(rows) == 24
    for key, winner in (("banker", "Banker"), ("player", "Player"), ("tie", "Tie")):
        assert getattr(stats, key) == sum(r["recorded_result"]["winner"] == winner for r in rows)
    assert stats.player_pair == sum(r["recorded_result"]["player_pair"] for r in rows)
    assert stats.banker_pair == sum(r["recorded_result"]["banker_pair"] for r in rows)
    assert stats.naturals == sum(r["recorded_result"]["natural"] for r in rows)
    seq = "".join(r["recorded_result"]["winner"][0] for r in rows)
    check_invariants(board.snapshot(), seq)
