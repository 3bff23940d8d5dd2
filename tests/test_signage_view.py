"""The signage display model, table info, topics and the command line (no browser)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from tablesense.daemon.cli import main
from tablesense.daemon.config import load_config
from tablesense.daemon.messages import (
    BaccaratOutcome,
    BoxResult,
    PublicCard,
    RoundResults,
    RoundState,
    SettlementMessage,
)
from tablesense.daemon.netaddr import parse_hostport
from tablesense.daemon.signage.info import table_info
from tablesense.daemon.signage.server import public_topics
from tablesense.daemon.signage.view import SignageView, category_label, format_money

ROOT = Path(__file__).resolve().parents[1]
TS = "2026-11-29T12:00:00Z"


def b(msg: msgspec.Struct) -> object:
    """A message as the display receives it: the daemon's JSON, decoded to builtins."""
    return msgspec.json.decode(msgspec.json.encode(msg))


def coup(winner: str, player: tuple[str, ...], banker: tuple[str, ...], pt: int, bt: int,
         pp: bool = False, bp: bool = False) -> BaccaratOutcome:
    return BaccaratOutcome(player=player, banker=banker, player_total=pt, banker_total=bt, winner=winner,
                           player_natural=pt >= 8 and len(player) == 2,
                           banker_natural=bt >= 8 and len(banker) == 2, player_pair=pp, banker_pair=bp)


def settlement(rnd: int, bet: str, hand: str | None, seat: str, outcome: str, category: str,
               odds: str | None) -> SettlementMessage:
    return SettlementMessage(table="T1", ts=TS, shoe=1, round=rnd, spot=f"{seat}{bet}", seat=seat, bet=bet,
                             hand=hand, stake=1000, outcome=outcome, category=category, odds=odds,
                             net=0)


def test_public_topics_never_include_floor_alarms_commands_or_wildcards() -> None:
    topics = public_topics("casino/tablesense", "T1")
    assert all(t.startswith("casino/tablesense/T1/") for t in topics)
    assert not any("floor" in t or "alarms" in t or "/cmd" in t or "#" in t for t in topics)
    assert {t.rsplit("/T1/", 1)[1] for t in topics} == {
        "status", "round", "results", "settlements", "scoreboard", "info", "devices/+"}


def test_parse_hostport() -> None:
    assert parse_hostport("10.0.0.5:1884", 1883) == ("10.0.0.5", 1884)
    assert parse_hostport("broker", 1883) == ("broker", 1883)
    assert parse_hostport("[::1]:8080", 80) == ("::1", 8080)
    assert parse_hostport(":0", 80) == ("127.0.0.1", 0)
    with pytest.raises(ValueError, match="port"):
        parse_hostport("h:99999", 1)


def test_money_and_labels_without_floats() -> None:
    assert format_money(2500, "USD") == "$25"
    assert format_money(2550, "EUR") == "€25.50"
    assert format_money(123456789, "USD") == "$1,234,567.89"
    assert format_money(500, "XYZ", 0) == "500 XYZ"
    assert category_label("ace_queen_or_jack_suited") == "A-Q or A-J suited"
    assert category_label("perfect_pair") == "Perfect Pair"
    assert category_label("some_new_line") == "Some New Line"


def rs(table: str, game: str, shoe: int, rnd: int, phase: str, cards: tuple[PublicCard, ...] = (),
       **kw: object) -> object:
    return b(RoundState(table=table, ts=TS, shoe=shoe, round=rnd, game=game, phase=phase, cards=cards, **kw))


def test_baccarat_pair_banner_from_settlement_with_its_odds() -> None:
    v = SignageView("T1")
    v.handle("round", rs("T1", "baccarat", 1, 4, "dealing"))
    for seat in ("3", "5"):
        v.handle("settlements", b(settlement(4, "perfect_pairs", "player", seat, "win", "perfect_pair",
                                             "25 to 1")))
    v.handle("settlements", b(settlement(4, "perfect_pairs", "banker", "5", "lose", "no_pair", None)))
    assert [x["text"] for x in v.banners()] == ["Player Perfect Pair — 25 to 1"]  # two winners, one banner
    assert v.banners()[0]["position"] == "player"
    # the results add nothing new for the Player; a Banker pair nobody bet on gets a banner from info odds
    v.handle("info", table_info(load_config(ROOT / "deploy/examples/baccarat.toml")))
    v.handle("results", b(RoundResults(table="T1", ts=TS, shoe=1, round=4, game="baccarat", baccarat=coup(
        "banker", ("QH", "QH"), ("5D", "5S", "KC"), 0, 0 + 5 + 5 - 10, pp=True, bp=True))))
    texts = [x["text"] for x in v.banners()]
    assert texts == ["Player Perfect Pair — 25 to 1", "Banker Mixed Pair — 6 to 1"]
    assert v.to_dict()["outcome"]["text"] == "Banker wins 0 – 0" and v.to_dict()["outcome"]["current"]
    # while the next round is open for betting, players still read the last result and its banners
    v.handle("round", rs("T1", "baccarat", 1, 5, "betting"))
    d = v.to_dict()
    assert len(v.banners()) == 2 and d["last_round"] == 4 and d["round"] == 5
    assert d["outcome"]["round"] == 4 and not d["outcome"]["current"]
    assert [h["cards"] for h in d["hands"]] == [["QH", "QH"], ["5D", "5S", "KC"]]
    assert [h["won"] for h in d["hands"]] == [False, True]
    # no-more-bets by button (round.start = "button"): a baccarat display keeps them until the first card
    v.handle("round", rs("T1", "baccarat", 1, 5, "dealing"))
    assert len(v.banners()) == 2 and v.to_dict()["outcome"]["round"] == 4
    # the next round's first card clears them
    first = (PublicCard(index=1, card="2C", position="player"),)
    v.handle("round", rs("T1", "baccarat", 1, 5, "dealing", first))
    d = v.to_dict()
    assert v.banners() == [] and d["results"] is None and d["last_round"] is None and d["outcome"] is None
    assert d["hands"] == [{"position": "player", "cards": ["2C"], "total": 2, "won": False},
                          {"position": "banker", "cards": [], "total": None, "won": False}]


def test_blackjack_pair_results_show_as_each_box_settles_and_stay_until_betting_closes() -> None:
    """Perfect Pairs settles once the box's two cards are out (Perfect Pairs rule sheet rule 8): its result
    is on the display from then on (not only after the round), and stays until the next round's
    no-more-bets."""
    v = SignageView("BJ")
    v.handle("info", table_info(load_config(ROOT / "deploy/examples/blackjack.toml")))
    cards = (PublicCard(index=1, card="8H", position="1"), PublicCard(index=2, card="9C", position="3"),
             PublicCard(index=3, card="KS", position="dealer"), PublicCard(index=4, card="8D", position="1"))
    v.handle("round", rs("BJ", "blackjack", 1, 2, "dealing", cards))
    v.handle("settlements", b(settlement(2, "perfect_pairs", None, "1", "win", "colored_pair", "12 to 1")))
    boxes = v.to_dict()["boxes"]
    assert [(x["position"], x["cards"], x["pair"], x["hit"], x["odds"]) for x in boxes] == [
        ("1", ["8H", "8D"], "colored_pair", True, "12 to 1"), ("3", ["9C"], None, False, None)]
    assert boxes[0]["label"] == "Colored Pair — 12 to 1"
    assert v.to_dict()["seats"] == ["1", "2", "3", "4", "5"]
    assert v.to_dict()["hands"] == [{"position": "dealer", "cards": ["KS"], "total": None, "won": False}]
    cards = (*cards, PublicCard(index=5, card="2D", position="3"))
    v.handle("round", rs("BJ", "blackjack", 1, 2, "playing", cards))
    v.handle("settlements", b(settlement(2, "perfect_pairs", None, "3", "lose", "no_pair", None)))
    boxes_out = (BoxResult(position="1", cards=("8H", "8D"), pair="colored_pair"),
                 BoxResult(position="3", cards=("9C", "2D"), pair="no_pair"))
    v.handle("results", b(RoundResults(table="BJ", ts=TS, shoe=1, round=2, game="blackjack", dealer=("KS",),
                                       boxes=boxes_out)))
    v.handle("round", rs("BJ", "blackjack", 1, 2, "complete", cards))
    v.handle("round", rs("BJ", "blackjack", 1, 3, "betting"))  # round.start = "button": betting is a phase
    boxes = v.to_dict()["boxes"]
    assert [(x["position"], x["cards"], x["label"]) for x in boxes] == [
        ("1", ["8H", "8D"], "Colored Pair — 12 to 1"), ("3", ["9C", "2D"], "No pair")]
    v.handle("round", rs("BJ", "blackjack", 1, 3, "dealing"))  # no more bets
    assert v.to_dict()["boxes"] == [] and v.to_dict()["outcome"] is None


def test_uth_hands_are_numbered_by_their_deck_and_shown_until_the_next_hand_closes_betting() -> None:
    """UTH deals every hand from a freshly shuffled deck, so the daemon starts a new shoe per hand and
    every hand is round 1 of its shoe: the display numbers hands by the shoe ("Hand 7")."""
    u = SignageView("U")
    u.handle("info", table_info(load_config(ROOT / "deploy/examples/uth.toml")))
    u.handle("round", rs("U", "uth", 7, 1, "reveal"))
    assert u.to_dict()["numbering"] == "hand" and u.to_dict()["hands"] == [
        {"position": "dealer", "cards": [], "total": None, "won": False},
        {"position": "board", "cards": [], "total": None, "won": False}]
    assert u.to_dict()["boxes"] == []  # nothing public before the reveal
    u.handle("settlements", b(SettlementMessage(
        table="U", ts=TS, shoe=7, round=1, spot="U2", seat="2", bet="ultimate_pairs", hand=None, stake=500,
        outcome="win", category="ace_king_suited", odds="25 to 1", net=12500)))
    u.handle("results", b(RoundResults(table="U", ts=TS, shoe=7, round=1, game="uth", dealer=("AD", "9C"),
                                       board=("3D", "JC", "QH", "4S", "8D"), boxes=(
        BoxResult(position="2", cards=("AS", "KS"), pair="ace_king_suited"),
        BoxResult(position="5", cards=("7H", "2C"), pair=None)))))
    u.handle("round", rs("U", "uth", 8, 1, "betting"))  # the next hand: a new deck, open for betting
    d = u.to_dict()
    assert (d["shoe"], d["round"], d["numbering"]) == (8, 1, "hand")
    assert [(h["position"], h["cards"]) for h in d["hands"]] == [("dealer", ["AD", "9C"]),
                                                                 ("board", ["3D", "JC", "QH", "4S", "8D"])]
    assert [(x["position"], x["cards"], x["label"]) for x in d["boxes"]] == [
        ("2", ["AS", "KS"], "A-K suited — 25 to 1"), ("5", ["7H", "2C"], "")]
    assert d["outcome"]["shoe"] == 7 and not d["outcome"]["current"]
    assert [x["text"] for x in u.banners()] == ["Seat 2 A-K suited — 25 to 1"]
    u.handle("round", rs("U", "uth", 8, 1, "dealing"))  # no more bets: the cards go face down
    d = u.to_dict()
    assert d["boxes"] == [] and d["outcome"] is None and all(not h["cards"] for h in d["hands"])


def test_a_void_round_shows_its_reason() -> None:
    v = SignageView("T1")
    first = (PublicCard(index=1, card="2C", position="player"),)
    v.handle("round", rs("T1", "baccarat", 1, 3, "dealing", first))
    v.handle("results", b(RoundResults(table="T1", ts=TS, shoe=1, round=3, game="baccarat", void=True,
                                       void_reason="misdeal")))
    o = v.to_dict()["outcome"]
    assert (o["void"], o["void_reason"], o["text"]) == (True, "misdeal", "Round void: misdeal")


def test_blackjack_and_uth_banners_name_the_box_or_seat() -> None:
    v = SignageView("BJ")
    v.handle("results", b(RoundResults(table="BJ", ts=TS, shoe=1, round=2, game="blackjack", boxes=(
        BoxResult(position="1", cards=("8H", "8D"), pair="colored_pair"),
        BoxResult(position="3", cards=("9C", "2D"), pair="no_pair"),
        BoxResult(position="4", cards=("5C", "5D"), pair="ineligible_no_blackjack_wager")), dealer=("KS",))))
    v.handle("settlements", b(settlement(2, "perfect_pairs", None, "1", "win", "colored_pair", "12 to 1")))
    assert [x["text"] for x in v.banners()] == ["Box 1 Colored Pair — 12 to 1"]
    u = SignageView("U")
    u.handle("results", b(RoundResults(table="U", ts=TS, shoe=1, round=9, game="uth", boxes=(
        BoxResult(position="2", cards=("AS", "KS"), pair="ace_king_suited"),))))
    u.handle("info", table_info(load_config(ROOT / "deploy/examples/uth.toml")))
    assert [x["text"] for x in u.banners()] == ["Seat 2 A-K suited — 25 to 1"]


def test_wagers_from_table_info_with_limits_else_from_settlements() -> None:
    v = SignageView("T1")
    assert v.wagers() == ("none", [])
    v.handle("settlements", b(settlement(1, "perfect_pairs", "player", "1", "win", "colored_pair",
                                         "12 to 1")))
    v.handle("settlements", b(settlement(1, "banker", None, "1", "win", "banker_win", "1 to 1")))
    source, wagers = v.wagers()
    assert source == "settlements"
    assert wagers == [{"bet": "perfect_pairs", "label": "Perfect Pairs", "limits": None, "min": None,
                       "max": None, "paytable": [{"category": "colored_pair", "label": "Colored Pair",
                                                  "odds": "12 to 1"}]}]
    v.handle("info", table_info(load_config(ROOT / "deploy/examples/baccarat.toml")))
    source, wagers = v.wagers()
    assert source == "info"
    pp = next(w for w in wagers if w["bet"] == "perfect_pairs")
    assert pp["limits"] == "€5 – €200" and (pp["min"], pp["max"]) == (500, 20000)
    assert [(x["label"], x["odds"]) for x in pp["paytable"]] == [
        ("Perfect Pair", "25 to 1"), ("Colored Pair", "12 to 1"), ("Mixed Pair", "6 to 1")]
    assert all(w["bet"] not in ("player", "banker") for w in wagers)
    main = {w["bet"]: w for w in v.main_wagers()}
    assert main["player"]["limits"] == main["banker"]["limits"] == "€10 – €5,000"
    assert main["banker"]["paytable"] == [{"category": "banker_win", "label": "Banker wins",
                                           "odds": "1 to 1"}]
    assert v.commission() == {"rate": "5%", "unit": 1, "rounding": "half_up", "unit_text": "€0.01",
                              "text": "5% commission on Banker wins, rounded to the nearest €0.01"}
    assert v.to_dict()["language"] == "en"


def test_table_info_for_every_example_config() -> None:
    for game in ("baccarat", "ez-baccarat", "blackjack", "uth"):
        cfg = load_config(ROOT / f"deploy/examples/{game}.toml")
        info = table_info(cfg)
        assert info["schema"] == "tablesense.table_info" and info["game"] == cfg.game
        main_wagers = {"player", "banker", "blackjack", "ante"}
        assert {w["bet"] for w in info["wagers"]} == set(cfg.wagers) - main_wagers
        for w in info["wagers"]:
            assert isinstance(w["min"], int) and isinstance(w["max"], int)


def test_local_roads_from_results_until_the_daemon_publishes_a_scoreboard() -> None:
    v = SignageView("T1")
    script = [("banker", 2, 7), ("banker", 1, 9), ("tie", 6, 6), ("player", 8, 3)]
    for rnd, (w, p, bk) in enumerate(script, 1):
        v.handle("results", b(RoundResults(table="T1", ts=TS, shoe=1, round=rnd, game="baccarat",
                                           baccarat=coup(w, ("2C", "KD"), ("7D", "KS"), p, bk))))
    v.handle("results", b(RoundResults(table="T1", ts=TS, shoe=1, round=5, game="baccarat", void=True)))
    d = v.to_dict()
    assert d["scoreboard_source"] == "display"
    assert [c["result"] for c in d["scoreboard"]["bead_plate"]] == ["banker", "banker", "tie", "player"]
    assert [c["ties"] for c in d["scoreboard"]["big_road"]] == [0, 1, 0]
    v.handle("round", b(RoundState(table="T1", ts=TS, shoe=1, round=6, game="baccarat", phase="betting",
                                   cards_remaining=380)))
    assert len(v.to_dict()["scoreboard"]["bead_plate"]) == 4
    assert v.to_dict()["scoreboard"]["stats"]["cards_remaining"] == 380
    v.handle("round", b(RoundState(table="T1", ts=TS, shoe=2, round=1, game="baccarat", phase="betting")))
    assert v.to_dict()["scoreboard"]["bead_plate"] == [] and v.to_dict()["scoreboard"]["shoe"] == 2
    v.handle("scoreboard", {"schema": "tablesense.scoreboard", "table": "T1", "roads": {"bead_plate": []}})
    assert v.to_dict()["scoreboard_source"] == "daemon" and v.to_dict()["scoreboard"] == {"bead_plate": []}


def test_malformed_messages_are_counted_and_skipped() -> None:
    v = SignageView("T1")
    before = v.to_dict()
    for suffix, payload in (("status", {"nostate": 1}), ("round", [1, 2]), ("scoreboard", {"roads": 3}),
                            ("results", {"game": "baccarat", "baccarat": {"winner": "dragon"}}),
                            ("settlements", "x")):
        assert v.handle(suffix, payload) is False
    assert v.rejected == 5
    after = v.to_dict()
    del after["rejected"], before["rejected"]
    assert after == before


def test_round_state_cards_and_status() -> None:
    v = SignageView("T1")
    v.handle("status", {"schema": "tablesense.status", "table": "T1", "ts": TS, "state": "offline"})
    v.handle("devices/shoe", {"schema": "tablesense.device", "table": "T1", "ts": TS, "name": "shoe",
                              "state": "online"})
    v.handle("round", b(RoundState(table="T1", ts=TS, shoe=2, round=7, game="baccarat", phase="dealing",
                                   cards=(PublicCard(index=1, card="QH", position="player"),),
                                   cards_remaining=400)))
    d = v.to_dict()
    assert (d["table_status"], d["phase"], d["round"], d["shoe"]) == ("offline", "dealing", 7, 2)
    assert list(d["cards"]) == [{"index": 1, "card": "QH", "position": "player"}]
    assert d["devices"] == {"shoe": "online"} and d["game_label"] == "Baccarat"


def test_cli_rejects_bad_arguments_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["signage", "--broker", "h:notaport", "--table", "T1"]) == 2
    assert main(["signage", "--broker", "h:1883", "--table", "T/1"]) == 2
    assert main(["signage", "--broker", "h:1883", "--table", "T1", "--config", "/nonexistent.toml"]) == 2
    assert main(["signage", "--broker", "h:1883", "--table", "T1",
                 "--config", str(ROOT / "deploy/examples/baccarat.toml")]) == 2  # config is for bac-01
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("tablesense: signage: ") for line in err)
    assert "bac-01" in err[3]
