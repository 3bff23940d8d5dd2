"""End to end on the real path, for every game: simulated shoe and pads on pseudo-terminals ->
`tablesense run` (subprocess, pyserial) -> a Mosquitto this module owns -> a subscriber.

Each test checks that every settlement the daemon published equals what `tablesense settle` gives for the
same cards and wagers (as the dealer dealt them), that results match the cards, and that no face-down
card appears on a public topic before its reveal (the information barrier).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from e2e_support import Daemon, Received, Recorder, public, start_table

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.commands.settle import settle_document
from tablesense.daemon.config import TableConfig
from tablesense.simulators.dealer import DealtRound, SimTable

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(300)]

_FIELDS = ("stake", "outcome", "category", "odds", "net", "commission")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> MosquittoBroker:
    b = MosquittoBroker(tmp_path_factory.mktemp("e2e-broker"))
    b.start()
    yield b
    b.stop()


async def finish(sim: SimTable, daemon: Daemon, rec: Recorder, rounds: int) -> None:
    """Wait for every round's results and floor record, SIGTERM the daemon, check it said offline."""
    try:
        await rec.wait_for(lambda r: len(r.on("results")) >= rounds and len(r.on("floor/rounds")) >= rounds
                           and len(r.on("settlements")) >= 0, timeout=120)
        code = await daemon.terminate()
        assert code == 0, daemon.log.read_text()[-3000:]
        await rec.wait_for(lambda r: r.on("status")[-1].body["state"] == "offline", timeout=10)
    finally:
        daemon.kill()
        await rec.stop()
        await sim.close()


def round_key(body: dict[str, Any]) -> tuple[int, int]:
    return (body["shoe"], body["round"])


def check_settlements(config: TableConfig, sim: SimTable, rec: Recorder) -> int:
    """Every published settlement equals `tablesense settle` for the dealt cards and wagers; returns the
    number of settlements checked."""
    results = rec.on("results")
    assert len(results) == len(sim.rounds)
    published: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for s in rec.on("settlements"):
        published[round_key(s.body)].append(s.body)
    baccarat = config.game in ("baccarat", "ez-baccarat")
    checked = 0
    for res, rnd in zip(results, sim.rounds, strict=True):
        expected = settle_document(json.dumps(sim.settle_request(rnd)))["wagers"]
        exp = sorted((w["spot"], w["bet"], w["hand"], *(w[f] for f in _FIELDS)) for w in expected)
        got = sorted(((b["spot"] if baccarat else b["seat"]), b["bet"], b["hand"], *(b[f] for f in _FIELDS))
                     for b in published.pop(round_key(res.body), []))
        assert got == exp, f"round {round_key(res.body)} wagers {rnd.wagers} cards {rnd.cards}"
        checked += len(exp)
    assert not published, f"settlements for rounds without results: {list(published)}"
    return checked


def hidden_indices(config: TableConfig, rnd: DealtRound) -> set[int]:
    """1-based draw indices of the round's face-down cards (blackjack hole card and play cards)."""
    if config.game != "blackjack":
        return set()
    out: set[int] = set()
    dealer_seen = 0
    for i, (pos, _card) in enumerate(rnd.cards, start=1):
        if pos == "dealer":
            dealer_seen += 1
            if dealer_seen == 2:
                out.add(i)
        elif pos == "play":
            out.add(i)
    return out


def check_barrier(config: TableConfig, sim: SimTable, rec: Recorder) -> int:
    """No face-down card on a public topic before its reveal (and blackjack's never); returns how many
    public card appearances were checked."""
    seen = 0
    results = rec.on("results")
    pub = public(rec.messages)
    by_round: dict[tuple[int, int], list[Received]] = defaultdict(list)
    for r in pub:
        if r.body.get("round") is not None and r.body.get("shoe") is not None:
            by_round[round_key(r.body)].append(r)
    for res, rnd in zip(results, sim.rounds, strict=True):
        key = round_key(res.body)
        hidden = hidden_indices(config, rnd)
        reveal_ts = res.body["ts"]
        for r in by_round[key]:
            for pc in r.body.get("cards", []) if r.body.get("schema") == "tablesense.round" else []:
                seen += 1
                assert pc["index"] not in hidden, f"face-down card {pc} public in {r.topic}"
                assert pc["card"] == str(rnd.cards[pc["index"] - 1][1])
                if config.game == "uth":
                    assert r.body["ts"] >= reveal_ts, f"UTH card {pc} public before the reveal"
        if config.game == "blackjack":
            up = [c for p, c in rnd.cards if p == "dealer"][:1]
            assert res.body["dealer"] == [str(c) for c in up]
        text = json.dumps([r.body for r in by_round[key]])
        for i in hidden:
            card = str(rnd.cards[i - 1][1])
            others = [str(c) for j, (_, c) in enumerate(rnd.cards, start=1) if j not in hidden]
            if card not in others:  # the same card value may be public elsewhere in a multi-deck round
                assert f'"{card}"' not in text, f"face-down {card} appears on a public topic"
    floor = rec.on("floor/rounds")
    assert len(floor) == len(sim.rounds)
    for fr, rnd in zip(floor, sim.rounds, strict=True):
        assert [c["card"] for c in fr.body["cards"]] == [str(c) for _, c in rnd.cards]
    return seen


async def test_full_8_deck_baccarat_shoe(broker: MosquittoBroker, tmp_path: Path) -> None:
    config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=8)
    try:
        await sim.play_shoe()
    finally:
        await finish(sim, daemon, rec, len(sim.rounds))
    assert sim.shoe.cut_card_out and len(sim.rounds) >= 60  # a whole shoe, to the cut card and one more
    for res, rnd in zip(rec.on("results"), sim.rounds, strict=True):
        b = res.body["baccarat"]
        assert b["player"] == [str(c) for p, c in rnd.cards if p == "player"]
        assert b["banker"] == [str(c) for p, c in rnd.cards if p == "banker"]
    assert check_settlements(config, sim, rec) > 100
    assert check_barrier(config, sim, rec) > len(sim.rounds)
    alarms = [a.body["code"] for a in rec.on("alarms")]
    assert set(alarms) <= {"CUT_CARD", "ADVANTAGE_PLAY"}, alarms


async def test_pipelined_devices_at_pace_0_settle_every_round_as_dealt(broker: MosquittoBroker,
                                                                       tmp_path: Path) -> None:
    """The devices keep up to 64 unacknowledged frames (protocol §3) and the dealer waits only where the
    two links' order matters: the daemon takes whole bursts in one group commit, and every round still
    settles exactly as dealt, each frame journaled once."""
    config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=21)
    sim.pipeline = True
    try:
        for _ in range(30):
            await sim.play_round()
        await sim.flush()
    finally:
        await finish(sim, daemon, rec, len(sim.rounds))
    assert sim.shoe_runner.unacked == 0 and sim.pads_runner.unacked == 0
    assert check_settlements(config, sim, rec) > 30
    assert check_barrier(config, sim, rec) > len(sim.rounds)
    alarms = [a.body["code"] for a in rec.on("alarms")]
    assert set(alarms) <= {"CUT_CARD", "ADVANTAGE_PLAY"}, alarms


async def test_blackjack_shoe_with_5_boxes(broker: MosquittoBroker, tmp_path: Path) -> None:
    config, sim, daemon, rec = await start_table(broker, tmp_path, "blackjack", seed=5)
    boxes = [s for s, sc in config.spots.items() if sc.bet == "blackjack"]
    assert len(boxes) == 5
    try:
        await sim.start_shoe()
        while not sim.shoe_over and sim.shoe.remaining > 30:
            bets = {b: config.wagers["blackjack"].min for b in boxes}
            for spot, sc in config.spots.items():
                if sc.bet == "perfect_pairs" and sim.rng.random() < 0.7:
                    bets[spot] = sc.nominal_stake or config.wagers["perfect_pairs"].min
            await sim.play_round(bets)
    finally:
        await finish(sim, daemon, rec, len(sim.rounds))
    assert len(sim.rounds) >= 15 and all(len(r.hands()) == 6 for r in sim.rounds)  # 5 boxes + dealer
    assert check_settlements(config, sim, rec) > 40
    assert check_barrier(config, sim, rec) > len(sim.rounds)


async def test_50_uth_rounds(broker: MosquittoBroker, tmp_path: Path) -> None:
    config, sim, daemon, rec = await start_table(broker, tmp_path, "uth", seed=50)
    try:
        for _ in range(50):
            await sim.play_round()
    finally:
        await finish(sim, daemon, rec, 50)
    assert check_settlements(config, sim, rec) >= 50
    assert check_barrier(config, sim, rec) > len(sim.rounds)
