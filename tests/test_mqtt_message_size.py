"""A journaled message larger than the broker takes is never published (breaker report item 7, the relay
part; docs/mqtt.md "Message size"), against a real Mosquitto 2.0.11 the test owns.

Mosquitto drops the connection of an MQTT v5 client that publishes past its ``message_size_limit`` (and
past ``max_packet_size``, which it announces in the CONNACK as Maximum Packet Size). The relay used to
publish such a row anyway: disconnected, it reconnected and started again from that row, for ever, and
nothing after it reached the floor. Now the row is logged (``mqtt_row_too_large``), counted
(``Relay.too_large``, ``tablesense_publish_too_large_total``), marked so that it is not tried again, and
skipped; ``replay`` skips it too. The relay keeps its one connection and later messages arrive.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import structlog
from test_mqtt_relay import MemoryOutbox, Subscriber, run_relay, settings, status

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.mqtt import MAX_MESSAGE_BYTES, Relay

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

LIMIT = 4096


def outbox() -> tuple[MemoryOutbox, int]:
    """Two small settlements, a floor record past LIMIT, then three more settlements; the big row's id."""
    out = MemoryOutbox()
    out.add("settlements", {"n": 0})
    out.add("settlements", {"n": 1})
    big = out.add("floor_rounds", {"cards": "x" * (LIMIT + 500)})
    for n in (2, 3, 4):
        out.add("settlements", {"n": n})
    return out, big.row_id


async def run_case(broker: MosquittoBroker, table: str, **kw: object) -> None:
    out, big = outbox()
    with structlog.testing.capture_logs() as logs:
        async with Subscriber(broker, f"ts/{table}/#", f"sub-{table}") as sub:
            relay = Relay(settings(broker, table, **kw), out, status)
            task = await run_relay(relay)
            try:
                await sub.wait_for(lambda ms: sum(t == f"ts/{table}/settlements" for t, _, _ in ms) == 5)
                await asyncio.sleep(1.0)  # a reconnect loop would show as more connections meanwhile
                assert relay.connects == 1, "the relay reconnected: the broker dropped it"
                assert relay.too_large == 1 and relay.delivered == 5
                assert out.delivered == {r.row_id for r in out.rows}  # the big one is not tried again
                # replay skips it too, and replays the rest
                assert relay.replay([r for r in out.rows if r.row_id in (big, big + 1)])
                await sub.wait_for(lambda ms: any(t == f"ts/{table}/replay/settlements" for t, _, _ in ms))
                await asyncio.sleep(0.3)
                assert relay.too_large == 2 and relay.replayed == 1 and relay.connects == 1
            finally:
                await relay.stop(task)
    settled = [b["n"] for t, b, _ in sub.messages if t == f"ts/{table}/settlements"]
    assert settled == [0, 1, 2, 3, 4]
    assert not [t for t, _, _ in sub.messages if t.endswith("floor/rounds")]
    lines = [e for e in logs if e.get("event") == "mqtt_row_too_large"]
    assert [e["action"] for e in lines] == ["publish", "replay"]
    assert all(e["log_level"] == "error" and e["msg_id"] == f"m{big}" for e in lines)


async def test_a_row_over_the_configured_limit_is_skipped_and_the_relay_keeps_going(tmp_path: Path) -> None:
    """The broker's ``message_size_limit`` (not announced to clients) given as ``max_message_bytes``."""
    broker = MosquittoBroker(tmp_path / "b", extra=f"message_size_limit {LIMIT}")
    broker.start()
    try:
        await run_case(broker, "S1", max_message_bytes=LIMIT)
    finally:
        broker.stop()


async def test_a_row_over_the_brokers_announced_maximum_packet_size_is_skipped(tmp_path: Path) -> None:
    """``max_packet_size`` announced in the v5 CONNACK: caught with the default ``max_message_bytes``."""
    broker = MosquittoBroker(tmp_path / "b", extra=f"max_packet_size {LIMIT}")
    broker.start()
    try:
        await run_case(broker, "S2")
    finally:
        broker.stop()


async def test_a_burst_whose_later_rows_are_all_skipped_leaves_no_writer_behind(tmp_path: Path) -> None:
    """A burst of one small row and one too large for the broker: the relay writes the first at once
    (``write_now``) and skips the second, so nothing follows the first publish. With aiomqtt's deferred
    ``add_writer`` the writer was registered after paho had written and unregistered: the loop found the
    socket writable at every turn and called paho's ``loop_write`` for nothing (tens of thousands of
    times a second) until the next publish. Counted, not timed: the calls of ``loop_write`` while the
    relay has nothing to send."""
    broker = MosquittoBroker(tmp_path / "b", extra=f"message_size_limit {LIMIT}")
    broker.start()
    try:
        out = MemoryOutbox()
        async with Subscriber(broker, "ts/S3/#", "sub-S3") as sub:
            relay = Relay(settings(broker, "S3", max_message_bytes=LIMIT), out, status)
            task = await run_relay(relay)
            try:
                await asyncio.sleep(0.3)  # the session's own start-up publishes are done
                client = relay._client
                assert client is not None
                paho = client._client
                calls = 0
                write = paho.loop_write

                def counted(*args: object, **kwargs: object) -> object:
                    nonlocal calls
                    calls += 1
                    return write(*args, **kwargs)

                paho.loop_write = counted  # type: ignore[method-assign]
                out.add("settlements", {"n": 0})
                out.add("floor_rounds", {"cards": "x" * (LIMIT + 500)})
                relay.notify()
                await sub.wait_for(lambda ms: any(t == "ts/S3/settlements" for t, _, _ in ms))
                for _ in range(50):
                    if relay.too_large == 1 and len(out.delivered) == 2:
                        break
                    await asyncio.sleep(0.02)
                assert relay.too_large == 1 and len(out.delivered) == 2
                calls = 0
                for _ in range(20):  # 20 turns of the loop and more, nothing to send
                    await asyncio.sleep(0.01)
                assert calls < 5, f"paho's loop_write called {calls} times with nothing to write"
            finally:
                await relay.stop(task)
    finally:
        broker.stop()


def test_the_default_limit_is_the_shipped_brokers() -> None:
    deploy = Path(__file__).resolve().parent.parent / "deploy" / "mosquitto"
    conf = (deploy / "tablesense-tls.conf").read_text()
    assert f"\nmessage_size_limit {MAX_MESSAGE_BYTES}\n" in conf


async def test_a_replay_answer_names_the_rows_too_large_for_the_broker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``replay`` says which seqs it will not republish because the broker would not take them."""
    from machine_support import baccarat_config

    from tablesense.daemon.app import App

    toml = f'[mqtt]\nmax_message_bytes = 1024\n[journal]\ndirectory = "{tmp_path}"\n'
    app = App(baccarat_config(extra=toml))
    app.open()
    assert app.journal is not None and app.relay is not None
    try:
        await app._announce()  # the table info: larger than 1 KiB
        rows = app.journal.messages_by_seq(1, app.journal.last_seq, 100)
        big = [r.seq for r in rows if len(r.payload) > 1024]
        assert big and len(big) < len(rows)
        queued: list[object] = []
        monkeypatch.setattr(app.relay, "replay", lambda rs: queued.extend(rs) or True)
        ok, reason = await app._queue_replay(1, app.journal.last_seq)
        assert ok
        named = ", ".join(f"{s}..{s}" for s in big)
        assert f"seq {named} larger than the broker takes: not replayed" in reason, reason
    finally:
        app.journal.close()


@pytest.mark.parametrize("value", [0, 1023, 268_435_456])
def test_a_max_message_bytes_out_of_range_is_refused_in_one_line(value: int) -> None:
    from machine_support import baccarat_config

    from tablesense.daemon.config import ConfigError

    with pytest.raises(ConfigError) as info:
        baccarat_config(extra=f"[mqtt]\nmax_message_bytes = {value}\n")
    assert "mqtt.max_message_bytes" in str(info.value) and "\n" not in str(info.value)
    assert baccarat_config(extra="[mqtt]\nmax_message_bytes = 1024\n").mqtt.max_message_bytes == 1024
