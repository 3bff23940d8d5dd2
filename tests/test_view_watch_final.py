"""``watch`` (demo / monitor live view): once ``until`` is met it still takes the messages the daemon
publishes right after, so the last frame shows the final round state (every card), not a stale one."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import pytest

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.messages import BaccaratOutcome, PublicCard, RoundResults, RoundState, encode_message
from tablesense.daemon.view import TableView, watch

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(mosquitto_binary() is None, reason="the mosquitto binary is not installed")]
TS = "2026-11-29T12:00:00Z"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    b = MosquittoBroker(tmp_path / "broker", persistence=False)
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _state(seq: int, phase: str, cards: tuple[str, ...]) -> RoundState:
    positions = ("player", "banker", "player", "banker")
    return RoundState(table="T1", ts=TS, seq=seq, msg_id=f"m{seq}", shoe=1, round=1, game="baccarat",
                      phase=phase, cards=tuple(PublicCard(index=i + 1, card=c, position=positions[i])
                                               for i, c in enumerate(cards)), cards_remaining=412)


async def test_last_frame_shows_the_round_state_published_after_the_results(broker: MosquittoBroker) -> None:
    prefix = "ts-watch-final"
    ready = asyncio.Event()
    views: dict[str, TableView] = {}

    def done(v: dict[str, TableView]) -> bool:
        return "T1" in v and v["T1"].rounds >= 1

    watcher = asyncio.create_task(watch(broker.host, broker.port, prefix=prefix, table="T1", ui=False,
                                        out=io.StringIO(), until=done, ready=ready,
                                        views=views))
    await asyncio.wait_for(ready.wait(), 15)
    out = BaccaratOutcome(player=("QH", "QS"), banker=("9D", "KC"), player_total=0, banker_total=9,
                          winner="banker", player_natural=False, banker_natural=True, player_pair=True,
                          banker_pair=False)
    async with aiomqtt.Client(broker.host, broker.port) as pub:
        base = f"{prefix}/T1"
        await pub.publish(f"{base}/round", encode_message(_state(1, "dealing", ("QH", "9D", "QS"))), qos=1)
        results = RoundResults(table="T1", ts=TS, seq=2, msg_id="m2", shoe=1, round=1, game="baccarat",
                               baccarat=out)
        await pub.publish(f"{base}/results", encode_message(results), qos=1)
        final = _state(3, "complete", ("QH", "9D", "QS", "KC"))
        await pub.publish(f"{base}/round", encode_message(final), qos=1)
    await asyncio.wait_for(watcher, 30)
    v = views["T1"]
    assert v.rounds == 1
    assert (v.phase, [c for _, c in v.cards]) == ("complete", ["QH", "9D", "QS", "KC"])
