"""Two live daemons for one table (a spare controller left running), on a real Mosquitto the test owns.

The tester saw them take the session from each other about 3 times a second for ever, both publishing
interleaved ``seq`` streams, with only "Disconnected during message iteration" in the log. Now:

* same client id (what the production broker enforces: the client id is the user name): the instance
  started last keeps the table; the other finds the newer instance's ``online`` in the retained status
  when it reconnects, publishes ``standby`` and stays disconnected (an error naming the client id);
  the one that keeps the table raises ``DUPLICATE_INSTANCE``; takeovers stop; only its messages are
  published from then on;
* different client ids (no broker binding): the older one receives the newer one's live ``online`` on
  its own status topic and steps back the same way;
* a session taken over with MQTT v5 reason 0x8E (sent by Mosquitto >= 2.0.15; Mosquitto 2.0.11 here
  only closes the connection, so a proxy in front of it delivers the DISCONNECT packet a newer broker
  sends) is logged as an error naming the client id, the reconnect backs off at least 1 s, and the
  returning session raises ``DUPLICATE_INSTANCE``.

How the second instance knows: each status carries the process's ``instance`` id and its journal
``epoch`` (docs/mqtt.md, "Duplicate instance").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from e2e_support import retained_body
from faults.harness import LinkProxy, Subscriber, wait_until
from test_command_hardening import live_round

from tablesense.daemon.app import App
from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.config import parse_config
from tablesense.daemon.mqtt import TAKEOVER_BACKOFF

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

BASE_TOML = """
table = "t1"
game = "baccarat"
decks = 8
seats = ["1"]
[commission]
rate = "5%"
[wagers.player]
[wagers.banker]
[wagers.perfect_pairs]
[spots]
"1P" = { seat = "1", bet = "player" }
"1B" = { seat = "1", bet = "banker" }
"1PP" = { seat = "1", bet = "perfect_pairs", hand = "player" }
[journal]
directory = "JOURNAL"
[mqtt]
host = "127.0.0.1"
port = PORT
topic_prefix = "tb"
keepalive = 5
"""


def config(broker: MosquittoBroker, journal: Path, client_id: str) -> Any:
    text = BASE_TOML.replace("JOURNAL", str(journal)).replace("PORT", str(broker.port))
    return parse_config(text + f'client_id = "{client_id}"\n')


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    b = MosquittoBroker(tmp_path / "broker")
    b.start()
    yield b
    b.stop()


@pytest.fixture
async def floor(broker: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Subscriber]:
    sub = Subscriber(broker.host, broker.port, "tb/t1/#", f"floor-{tmp_path.name}")
    await asyncio.to_thread(sub.start)
    yield sub
    sub.stop()


def takeovers(broker: MosquittoBroker) -> int:
    return broker.log.read_text(errors="replace").count("already connected, closing old connection")


def alarmed(sub: Subscriber) -> bool:
    return any(g.body.get("code") == "DUPLICATE_INSTANCE" for g in sub.snapshot())


def statuses(sub: Subscriber) -> list[dict[str, Any]]:
    return [g.body for g in sub.snapshot() if g.topic == "tb/t1/status"]


async def start(app: App) -> asyncio.Task[int]:
    app.open()
    task = asyncio.create_task(app.run())
    await wait_until(lambda: app.relay is not None and app.relay.connects >= 1, 20, "a first connection")
    return task


async def stop(app: App, task: asyncio.Task[int]) -> None:
    app.stop()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(task, 20)


async def retained_status(broker: MosquittoBroker) -> dict[str, Any]:
    return await retained_body(broker, "tb/t1/status", timeout=10)


@pytest.mark.parametrize("client_ids", [("table-t1", "table-t1"), ("tablesense-t1-a", "tablesense-t1-b")],
                         ids=["same client id", "different client ids"])
async def test_the_instance_started_last_keeps_the_table_the_other_steps_back(
        broker: MosquittoBroker, floor: Subscriber, tmp_path: Path, client_ids: tuple[str, str]) -> None:
    old = App(config(broker, tmp_path / "old", client_ids[0]))
    new = App(config(broker, tmp_path / "new", client_ids[1]))
    with structlog.testing.capture_logs() as logs:
        old_task = await start(old)
        old_feed = await live_round(old)  # the spare has dealt a little: messages of its own journal
        assert old.journal is not None and new.journal is None
        old_epoch = old.journal.epoch
        await wait_until(lambda: any(s.get("instance") == old.instance and s["state"] == "online"
                                     for s in statuses(floor)), 20, "the old instance online")
        new_started = time.monotonic()
        new_task = await start(new)
        try:
            assert new.journal is not None and new.relay is not None and old.relay is not None
            new_epoch = new.journal.epoch
            await wait_until(lambda: old.relay is not None and old.relay.standby is not None, 30,
                             "the older instance to step back")
            await wait_until(lambda: alarmed(floor), 30, "the DUPLICATE_INSTANCE alarm")
            await wait_until(lambda: new.relay is not None and new.relay.connected, 30, "the new one online")
            settled_takeovers = takeovers(broker)
            old_connects, new_connects = old.relay.connects, new.relay.connects
            result = {"client_ids": client_ids, "takeovers": settled_takeovers, "connects":
                      [old_connects, new_connects], "settled_s": round(time.monotonic() - new_started, 2)}
            print(f"\nDUPLICATE-RESULT {json.dumps(result)}")

            # Both keep dealing: only the instance that kept the table publishes.
            before = len(floor.snapshot())
            await live_round(new)
            assert await old_feed.card("3D") and await old_feed.card("4S")  # the spare's round completes
            new_ids = {m.msg_id for m in new.journal.messages_by_seq(1, new.journal.last_seq, 10_000)}
            await wait_until(lambda: new_ids <= floor.distinct_ids(), 30, "the new instance's messages")
            await asyncio.sleep(3.0)  # the scenario's duration (a flap would be several takeovers), no timing
            assert takeovers(broker) == settled_takeovers, "the two instances still take the session over"
            assert (old.relay.connects, new.relay.connects) == (old_connects, new_connects)
            assert not old.relay.connected and old.relay.standby is not None
            later = floor.snapshot()[before:]
            assert later and not [g for g in later if g.msg_id and f"-{old_epoch}-" in g.msg_id], \
                "the instance in standby published table messages"
            assert old.journal is not None and old.journal.pending_count() > 0  # kept, not published
            status = await retained_status(broker)
            assert (status["state"], status["instance"]) == ("online", new.instance)
            assert status["epoch"] == new_epoch
        finally:
            await stop(new, new_task)
            await stop(old, old_task)
    standby = [s for s in statuses(floor) if s["state"] == "standby"]
    assert standby and standby[-1]["instance"] == old.instance and new.instance in standby[-1]["detail"]
    errors = [e for e in logs if e.get("event") == "mqtt_duplicate_instance_standby"]
    assert errors and errors[0]["log_level"] == "error" and errors[0]["client_id"] == client_ids[0]
    [alarm] = [g.body for g in floor.first_of_each() if g.body.get("code") == "DUPLICATE_INSTANCE"]
    assert f"-{new_epoch}-" in alarm["msg_id"] and old.instance in alarm["text"]
    assert alarm["severity"] == "critical" and not alarm["held"]


async def test_a_session_taken_over_with_reason_0x8e_backs_off_and_raises_the_alarm(
        broker: MosquittoBroker, floor: Subscriber, tmp_path: Path) -> None:
    proxy = LinkProxy(broker.host, broker.port)
    await proxy.start()
    cfg = parse_config(BASE_TOML.replace("JOURNAL", str(tmp_path / "j")).replace("PORT", str(proxy.port))
                       + 'client_id = "table-t1"\n')
    app = App(cfg)
    try:
        with structlog.testing.capture_logs() as logs:
            task = await start(app)
            assert app.relay is not None
            await wait_until(lambda: any(s.get("instance") == app.instance for s in statuses(floor)), 20,
                             "online")
            [pair] = [p for p in proxy._pairs if not p.severed]
            taken_at = time.monotonic()
            pair.client.write(bytes([0xE0, 0x02, 0x8E, 0x00]))  # DISCONNECT, reason 0x8E, no properties
            await pair.client.drain()
            pair.client.close()
            await wait_until(lambda: app.relay is not None and app.relay.connects >= 2, 30, "the return")
            back_after = time.monotonic() - taken_at
            await wait_until(lambda: alarmed(floor), 20, "the DUPLICATE_INSTANCE alarm")
            await stop(app, task)
    finally:
        await proxy.close()
    assert app.relay.takeovers == 1
    assert back_after >= TAKEOVER_BACKOFF[0]  # backed off, not straight back into a fight
    [taken] = [e for e in logs if e.get("event") == "mqtt_session_taken_over"]
    assert taken["log_level"] == "error" and taken["client_id"] == "table-t1"
    assert "client id table-t1" in taken["message"]
    [alarm] = [g.body for g in floor.first_of_each() if g.body.get("code") == "DUPLICATE_INSTANCE"]
    assert "client id table-t1" in alarm["text"] and "0x8E" in alarm["text"]
