"""The scoreboard and the table info through the pure state machine.

The machine keeps the shoe's :class:`daemon.scoreboard.Scoreboard` and emits its message retained after
every baccarat round's results, and the table info retained at :class:`TableStart` and every new shoe,
so both go through the journal like every other message and replay to the same bytes.
"""

from __future__ import annotations

import msgspec
from machine_support import Driver, baccarat_config, blackjack_config, encode_all

from tablesense.daemon.messages import ScoreboardMessage, TableInfo
from tablesense.daemon.table import Channel, TableMachine, replay
from tablesense.daemon.table.inputs import PUBLIC_CHANNELS, TableStart
from tablesense.drivers.events import Button, ShoeStatus, ShoeStatusKind, SpotChanged

ROUNDS = ["9H 3D KS KC",  # Player 9 natural beats Banker 3
          "2H 8D 3S KC",  # Banker 8 natural beats Player 5
          "KH KD 9S 9C",  # tie 9-9
          "4H 2D 4S 5C"]  # Player pair (4H 4S), natural 8 beats 7


def _boards(d: Driver, emits: list | None = None) -> list[ScoreboardMessage]:
    return d.messages(Channel.SCOREBOARD, emits)


def test_a_scoreboard_follows_every_round_retained_after_its_results() -> None:
    d = Driver(baccarat_config())
    for i, cards in enumerate(ROUNDS, start=1):
        out = d.cards(cards)
        channels = [e.channel for e in out]
        assert channels.count(Channel.SCOREBOARD) == 1 and channels.count(Channel.RESULTS) == 1
        assert channels.index(Channel.RESULTS) < channels.index(Channel.SCOREBOARD)
        emit = next(e for e in out if e.channel is Channel.SCOREBOARD)
        assert emit.retain is True and emit.qos == 1 and emit.channel in PUBLIC_CHANNELS
        board = emit.message
        assert (board.table, board.shoe, board.round) == ("t1", 1, i)
        assert len(board.roads.bead_plate) == i
        assert board.roads.stats.cards_remaining == d.state.cards_remaining == 416 - 4 * i
    board = _boards(d)[-1].roads
    assert [c.result for c in board.bead_plate] == ["player", "banker", "tie", "player"]
    # Big Road: P, then B in a new column carrying the tie, then P in a third column
    assert [(c.winner, c.col, c.row, c.ties) for c in board.big_road] == [
        ("player", 0, 0, 0), ("banker", 1, 0, 1), ("player", 2, 0, 0)]
    s = board.stats
    counts = (s.rounds, s.player, s.banker, s.tie, s.player_pair, s.banker_pair, s.naturals)
    assert counts == (4, 2, 1, 1, 1, 0, 4)
    assert board.bead_plate[3].player_pair and not board.bead_plate[3].banker_pair
    # the payload is the published JSON schema's shape and decodes back to the same model
    raw = msgspec.json.encode(_boards(d)[-1])
    assert msgspec.json.decode(raw, type=ScoreboardMessage) == _boards(d)[-1]
    assert msgspec.json.decode(raw)["schema"] == "tablesense.scoreboard"


def test_a_void_round_never_appears_on_the_board() -> None:
    d = Driver(baccarat_config())
    d.cards(ROUNDS[0])
    before = _boards(d)[-1].roads
    d.cards("5H 6D")  # round 2 under way
    assert d.command("void_round", reason="misdeal").ok
    (res,) = [r for r in d.results() if r.round == 2]
    assert res.void
    after = _boards(d)[-1]
    assert after.round == 2
    assert after.roads.bead_plate == before.bead_plate and after.roads.big_road == before.big_road
    assert after.roads.stats.rounds == 1
    assert after.roads.stats.cards_remaining == 416 - 6  # the voided round's cards are out of the shoe
    d.cards(ROUNDS[1])  # round 3 goes on the board as its second bead
    last = _boards(d)[-1].roads
    assert [c.round for c in last.bead_plate] == [1, 3] and last.stats.rounds == 2


def test_a_new_shoe_publishes_an_empty_board_and_the_table_info_and_starts_over() -> None:
    d = Driver(baccarat_config())
    for cards in ROUNDS[:3]:
        d.cards(cards)
    out = d.status(ShoeStatusKind.NEW_SHOE)
    (board,) = _boards(d, out)
    (info,) = d.messages(Channel.INFO, out)
    assert board.shoe == 2 and board.round is None
    assert board.roads.bead_plate == [] and board.roads.big_road == [] and board.roads.stats.rounds == 0
    assert board.roads.stats.cards_remaining == 416
    assert isinstance(info, TableInfo) and info.shoe == 2
    assert all(e.retain for e in out if e.channel in (Channel.INFO, Channel.SCOREBOARD))
    d.cards(ROUNDS[3])
    last = _boards(d)[-1]
    assert last.shoe == 2 and [c.round for c in last.roads.bead_plate] == [1]
    assert last.roads.stats.player_pair == 1 and last.roads.stats.banker == 0


def test_table_start_publishes_the_public_table_info_retained() -> None:
    d = Driver(baccarat_config())
    out = d.feed(TableStart())
    infos = [e for e in out if e.channel is Channel.INFO]
    assert len(infos) == 1 and infos[0].retain and infos[0].qos == 1 and Channel.INFO in PUBLIC_CHANNELS
    info = infos[0].message
    head = (info.table, info.game, info.decks, info.currency, info.minor_unit)
    assert head == ("t1", "baccarat", 8, "EUR", 2)
    assert info.commission == "5%" and info.seats == ("1", "2") and info.shoe == 1
    side = {w.bet: w for w in info.wagers}
    assert set(side) == {"tie", "perfect_pairs", "house_money"}
    pp = side["perfect_pairs"]
    assert (pp.paytable_name, pp.min, pp.max) == ("A", 100, 5000)
    assert [(ln.category, ln.odds) for ln in pp.paytable] == [
        ("perfect_pair", "25 to 1"), ("colored_pair", "12 to 1"), ("mixed_pair", "6 to 1")]
    main = [(w.bet, w.min, w.max) for w in info.main_wagers]
    assert main == [("player", 100, 100000), ("banker", 100, 100000)]
    assert {(s.spot, s.seat, s.bet, s.hand) for s in info.spots} >= {("1PP", "1", "perfect_pairs", "player"),
                                                                    ("2P", "2", "player", None)}
    raw = msgspec.json.decode(msgspec.json.encode(info))
    assert raw["schema"] == "tablesense.table_info"
    assert not {"devices", "mqtt", "journal", "burn", "credentials_file"} & set(raw)  # public data only
    # a start input changes no round state: no alarm, no record, nothing but info and the first round state
    assert {e.channel for e in out} <= {Channel.INFO, Channel.ROUND}
    assert d.machine.phase.value == "betting"


def test_games_without_roads_publish_info_but_no_scoreboard() -> None:
    d = Driver(blackjack_config())
    out = d.feed(TableStart()) + d.status(ShoeStatusKind.NEW_SHOE)
    assert [m.game for m in d.messages(Channel.INFO, out)] == ["blackjack", "blackjack"]
    assert _boards(d) == [] and d.machine.snapshot()["scoreboard"] is None
    ez = Driver(baccarat_config(game="ez-baccarat"))
    ez.feed(TableStart())
    ez.cards(ROUNDS[0])
    assert len(_boards(ez)) == 1 and ez.messages(Channel.INFO)[0].commission is None


def _session(d: Driver) -> None:
    """Rounds dealt with a bet left on the layout (a push): the dealer opens each coup with round-end."""
    d.feed(TableStart())
    d.bet("1P", 1000)
    d.cards(ROUNDS[0])
    d.button(Button.ROUND_END)
    d.cards("5H 6D")
    d.command("void_round", reason="misdeal")
    d.button(Button.ROUND_END)
    d.cards(ROUNDS[1])
    d.status(ShoeStatusKind.NEW_SHOE)
    d.bet("1B", 1000)
    for cards in ROUNDS:
        d.cards(cards)
        d.button(Button.ROUND_END)


def test_replay_gives_the_same_scoreboard_and_info_bytes() -> None:
    cfg = baccarat_config()
    d = Driver(cfg)
    _session(d)
    assert len(_boards(d)) == 3 + 1 + 4 and len(d.messages(Channel.INFO)) == 2
    machine, emits = replay(cfg, d.inputs)
    assert encode_all(emits) == encode_all(d.emits)
    assert machine.snapshot()["scoreboard"] == d.machine.snapshot()["scoreboard"]


def test_recovery_from_the_shoe_start_rebuilds_the_same_board() -> None:
    cfg = baccarat_config()
    d = Driver(cfg)
    _session(d)
    start = max(i for i, inp in enumerate(d.inputs)
                if isinstance(inp.event, ShoeStatus) and inp.event.kind is ShoeStatusKind.NEW_SHOE)
    machine = TableMachine(cfg, shoe=d.machine.snapshot()["shoe"])
    machine.seed_pads([i.event for i in d.inputs[:start] if isinstance(i.event, SpotChanged)])
    emits = [e for inp in d.inputs[start:] for e in machine.handle(inp)]
    assert machine.snapshot()["scoreboard"] == d.machine.snapshot()["scoreboard"]
    original = TableMachine(cfg)
    after = [e for i, inp in enumerate(d.inputs) for e in original.handle(inp) if i >= start]
    keep = (Channel.SCOREBOARD, Channel.INFO)
    mine = encode_all(e for e in emits if e.channel in keep)
    assert mine and mine == encode_all(e for e in after if e.channel in keep)


def test_the_journal_keeps_the_latest_scoreboard_and_info_for_republishing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tablesense.daemon.journal import Journal

    cfg = baccarat_config()
    d = Driver(cfg)
    _session(d)
    with Journal(tmp_path / "j", "t1") as journal:
        replayed = TableMachine(cfg)
        for inp in d.inputs:
            for row in journal.append(inp, replayed.handle(inp)):
                journal.mark_delivered(row.row_id)
        latest = {row.channel: msgspec.json.decode(row.payload) for row in journal.retained_latest()}
    assert {"scoreboard", "info", "round"} <= set(latest)
    board, info = latest["scoreboard"], latest["info"]
    assert board["schema"] == "tablesense.scoreboard" and (board["shoe"], board["round"]) == (2, 4)
    assert board["roads"] == msgspec.to_builtins(_boards(d)[-1].roads)
    assert info["schema"] == "tablesense.table_info" and info["shoe"] == 2 and board["seq"] > info["seq"] > 0
