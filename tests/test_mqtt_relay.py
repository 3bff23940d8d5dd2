"""The outbox relay against a real Mosquitto (MQTT v5) the test owns: acks, rejections, restarts."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path

import aiomqtt
import pytest
from command_support import body
from e2e_support import Recorder
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.mqtt import (
    CommandRejected,
    CommandRequest,
    CredentialsError,
    MqttSettings,
    Relay,
    Topics,
    load_credentials,
    parse_command,
)

pytestmark = pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")


@dataclass(frozen=True)
class Row:
    row_id: int
    seq: int
    msg_id: str
    channel: str
    device: str | None
    payload: bytes
    retain: bool
    qos: int


class MemoryOutbox:
    """An outbox with the journal's relay-facing interface, kept in memory."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.delivered: set[int] = set()

    def add(self, channel: str, body: dict[str, object], retain: bool = False,
            device: str | None = None) -> Row:
        n = len(self.rows) + 1
        row = Row(n, n, f"m{n}", channel, device, json.dumps({"seq": n, "msg_id": f"m{n}", **body}).encode(),
                  retain, 1)
        self.rows.append(row)
        return row

    def pending(self, limit: int, after_row: int) -> list[Row]:
        return [r for r in self.rows if r.row_id > after_row and r.row_id not in self.delivered][:limit]

    def mark_delivered(self, row_id: int) -> None:
        self.delivered.add(row_id)

    def retained_latest(self) -> list[Row]:
        latest: dict[tuple[str, str | None], Row] = {}
        for r in self.rows:
            if r.retain:
                latest[(r.channel, r.device)] = r
        return list(latest.values())


def status(state: str) -> bytes:
    return json.dumps({"schema": "table_status", "state": state}).encode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> MosquittoBroker:
    d = tmp_path_factory.mktemp("mosq")
    acl = d / "acl"
    acl.write_text("topic readwrite #\npattern deny ts/+/forbidden/#\n"
                   "topic deny ts/T9/floor/rounds\n")
    b = MosquittoBroker(d / "b", acl_file=str(acl))
    b.start()
    yield b
    b.stop()


def settings(broker: MosquittoBroker, table: str, **kw: object) -> MqttSettings:
    return MqttSettings(host=broker.host, port=broker.port, table=table, client_id=f"tablesense-{table}",
                        prefix="ts", backoff_min=0.05, backoff_max=0.2, publish_timeout=2.0, **kw)  # type: ignore[arg-type]


class Subscriber(Recorder):
    """A persistent-session v5 subscriber (tests/e2e_support.Recorder) used as ``async with``; its
    messages unpack as ``topic, body, retain`` and ``wait_for`` predicates take the message list."""

    async def wait_for(self, pred, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def,override]
        await super().wait_for(lambda rec: pred(rec.messages), timeout)


async def run_relay(relay: Relay) -> asyncio.Task[None]:
    task = asyncio.create_task(relay.run())
    for _ in range(500):
        if relay.connected:
            break
        await asyncio.sleep(0.01)
    assert relay.connected
    return task


async def test_rows_published_in_order_and_marked_delivered(broker: MosquittoBroker) -> None:
    out = MemoryOutbox()
    for i in range(20):
        out.add("settlements", {"n": i})
    out.add("round", {"phase": "betting"}, retain=True)
    async with Subscriber(broker, "ts/T1/#", "sub-T1") as sub:
        relay = Relay(settings(broker, "T1"), out, status)
        task = await run_relay(relay)
        await sub.wait_for(lambda ms: sum(t == "ts/T1/settlements" for t, _, _ in ms) == 20)
        await relay.stop(task)
        # the broker's PUBACK to the relay does not wait for the subscriber: wait for it to arrive
        await sub.wait_for(lambda ms: any(t == "ts/T1/status" and b.get("state") == "offline"
                                          for t, b, _ in ms))
    settled = [b["n"] for t, b, _ in sub.messages if t == "ts/T1/settlements"]
    assert settled == list(range(20))
    assert out.delivered == {r.row_id for r in out.rows}
    states = [b["state"] for t, b, _ in sub.messages if t == "ts/T1/status"]
    assert states[-1] == "offline" and "online" in states


async def test_rejected_publish_is_not_marked_delivered(broker: MosquittoBroker) -> None:
    out = MemoryOutbox()
    ok1 = out.add("results", {"n": 1})
    denied = out.add("floor_rounds", {"n": 2})  # ACL: ts/T9/floor/rounds denied -> PUBACK 0x87
    ok2 = out.add("results", {"n": 3})
    async with Subscriber(broker, "ts/T9/results", "sub-T9") as sub:
        relay = Relay(settings(broker, "T9"), out, status, retry_rejected_after=0.2)
        task = await run_relay(relay)
        await sub.wait_for(lambda ms: len(ms) == 2)
        for _ in range(200):  # it keeps retrying the refused row, never marking it
            if relay.rejected >= 2:
                break
            await asyncio.sleep(0.02)
        await relay.stop(task)
    assert relay.rejected >= 2
    assert ok1.row_id in out.delivered and ok2.row_id in out.delivered
    assert denied.row_id not in out.delivered


async def test_broker_restart_resumes_with_same_msg_id_and_republishes_retained(
        broker: MosquittoBroker, tmp_path: Path) -> None:
    own = MosquittoBroker(tmp_path / "own")
    own.start()
    out = MemoryOutbox()
    out.add("round", {"phase": "dealing"}, retain=True)
    out.add("devices", {"state": "online"}, retain=True, device="shoe")
    for i in range(5):
        out.add("settlements", {"n": i})
    try:
        async with Subscriber(own, "ts/T2/settlements", "sub-T2") as sub:
            relay = Relay(settings(own, "T2"), out, status)
            task = await run_relay(relay)
            await sub.wait_for(lambda ms: len(ms) == 5)
            async with aiomqtt.Client(own.host, own.port) as c:  # make the broker forget retained state
                await c.publish("ts/T2/round", b"", qos=1, retain=True)
                await c.publish("ts/T2/devices/shoe", b"", qos=1, retain=True)
            own.stop()
            for i in range(5, 10):
                out.add("settlements", {"n": i})
            relay.notify()
            await asyncio.sleep(0.3)
            assert not relay.connected
            assert not any(out.rows[i].row_id in out.delivered for i in range(7, 12))
            own.start()
            await sub.wait_for(lambda ms: len({b["msg_id"] for _, b, _ in ms}) == 10)
            assert relay.connects >= 2
            # a fresh subscriber after the restart sees the retained state republished by the relay
            got: dict[str, dict[str, object]] = {}
            async with aiomqtt.Client(own.host, own.port) as c:
                await c.subscribe("ts/T2/+", qos=1)
                await c.subscribe("ts/T2/devices/+", qos=1)
                async with asyncio.timeout(5):
                    async for m in c.messages:
                        got[str(m.topic)] = json.loads(m.payload)
                        if len(got) == 3:
                            break
            await relay.stop(task)
    finally:
        own.stop()
    ids = [b["msg_id"] for _, b, _ in sub.messages]
    assert sorted(set(ids), key=lambda m: int(m[1:])) == [f"m{n}" for n in range(3, 13)]
    assert got["ts/T2/round"]["phase"] == "dealing"
    assert got["ts/T2/devices/shoe"]["state"] == "online"
    assert got["ts/T2/status"]["state"] == "online"
    assert out.delivered == {r.row_id for r in out.rows}


async def test_stop_during_backoff_is_prompt(tmp_path: Path) -> None:
    own = MosquittoBroker(tmp_path / "gone")  # never started: the relay keeps backing off
    out = MemoryOutbox()
    out.add("results", {"n": 1})
    s = MqttSettings(host=own.host, port=own.port, table="T3", client_id="tablesense-T3", prefix="ts",
                     backoff_min=5.0, backoff_max=30.0)
    relay = Relay(s, out, status)
    task = asyncio.create_task(relay.run())
    await asyncio.sleep(0.2)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await relay.stop(task)
    assert task.done()
    assert loop.time() - t0 < 5.0
    assert out.delivered == set()


async def test_command_answered_on_response_topic(broker: MosquittoBroker) -> None:
    seen: list[CommandRequest] = []

    async def handle(req: CommandRequest) -> tuple[bool, str]:
        seen.append(req)
        return (req.name == "void_round", "" if req.name == "void_round" else "no alarm 1.1")

    relay = Relay(settings(broker, "T4"), MemoryOutbox(), status, on_command=handle)
    task = await run_relay(relay)
    try:
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as c:
            await c.subscribe("ts/T4/reply/me", qos=1)
            for name, corr, args in (("void_round", b"c1", {"shoe": 1, "round": 2}),
                                     ("ack_alarm", b"c2", {"alarm_id": "1.1"}),
                                     ("fly", b"c3", {"r": 1})):
                props = Properties(PacketTypes.PUBLISH)
                props.ResponseTopic = "ts/T4/reply/me"
                props.CorrelationData = corr
                await c.publish(f"ts/T4/cmd/{name}", body("sup1", args, command_id=f"id-{name}"), qos=1,
                                properties=props)
            await c.publish("ts/T4/cmd/void_round", b"not json", qos=1, properties=props)
            replies = []
            async with asyncio.timeout(5):
                async for m in c.messages:
                    replies.append((m.properties.CorrelationData, json.loads(m.payload)))
                    if len(replies) == 4:
                        break
    finally:
        await relay.stop(task)
    by_corr = {c: b for c, b in replies[:3]}
    assert by_corr[b"c1"]["ok"] is True
    assert by_corr[b"c2"] == {"ok": False, "reason": "no alarm 1.1", "command": "ack_alarm"}
    assert by_corr[b"c3"]["ok"] is False and "unknown command 'fly'" in by_corr[b"c3"]["reason"]
    assert replies[3][1]["ok"] is False and "not JSON" in replies[3][1]["reason"]
    assert [(r.name, r.operator, r.args, r.command_id) for r in seen] == [
        ("void_round", "sup1", {"shoe": 1, "round": 2, "reason": ""}, "id-void_round"),
        ("ack_alarm", "sup1", {"alarm_id": "1.1"}, "id-ack_alarm")]  # the unknown command never got here


def test_parse_command_rejects_bad_requests() -> None:
    assert parse_command("new_shoe", body("pit1", {"shoe": 2})).args == {"shoe": 2}
    for payload, why in ((b"x" * 5000, "too large"), (b"[1]", "JSON object"), (b"{}", "operator"),
                         (body("a", None, command_id="c1")[:-1] + b', "args": 3}', "args"),
                         (b"\xff", "not UTF-8"), (body("a", {"shoe": 1, "round": 1}, command_id="a b"),
                                                   "command_id"),
                         (body("a", {"shoe": 1, "round": 1}, issued_at="yesterday"), "issued_at"),
                         (body("a", {"shoe": 1, "round": 1}, issued_at=None), "issued_at")):
        with pytest.raises(CommandRejected, match=why):
            parse_command("void_round", payload)
    with pytest.raises(CommandRejected, match="name"):
        parse_command("a+b", body("x"))


def test_credentials_file_must_not_be_world_readable(tmp_path: Path) -> None:
    f = tmp_path / "creds.toml"
    f.write_text('username = "table-T1"\npassword = "s3cret"\n')
    os.chmod(f, 0o644)
    with pytest.raises(CredentialsError, match=r"other users.*0644.*chmod"):
        load_credentials(f)
    os.chmod(f, 0o600)
    assert load_credentials(f) == ("table-T1", "s3cret")
    with pytest.raises(CredentialsError, match="No such file"):
        load_credentials(tmp_path / "missing.toml")


def test_topic_map() -> None:
    t = Topics("tablesense", "BAC-07")
    assert t.for_channel("DEVICE", "shoe") == "tablesense/BAC-07/devices/shoe"
    assert t.for_channel("floor_rounds") == "tablesense/BAC-07/floor/rounds"
    assert t.command_name("tablesense/BAC-07/cmd/void_round") == "void_round"
    assert t.command_name("tablesense/BAC-07/cmd/a/b") is None
    assert all("floor" not in f and "cmd" not in f for f in t.public_filters())


def test_credentials_plain_two_line_format(tmp_path: Path) -> None:
    f = tmp_path / "creds"
    f.write_text("table-T2\npa ss\n")
    os.chmod(f, 0o640)
    assert load_credentials(f) == ("table-T2", "pa ss")
    f.write_text("only-one-line\n")
    with pytest.raises(CredentialsError, match="username"):
        load_credentials(f)


async def test_v5_falls_back_to_311_against_amqtt() -> None:
    from tablesense.daemon.broker import AmqttBroker

    amq = AmqttBroker()
    await amq.start()
    try:
        out = MemoryOutbox()
        out.add("results", {"n": 1})
        s = MqttSettings(host=amq.host, port=amq.port, table="T5", client_id="tablesense-T5", prefix="ts",
                         backoff_min=0.05, backoff_max=0.2)
        relay = Relay(s, out, status)
        task = await run_relay(relay)
        for _ in range(300):
            if out.delivered:
                break
            await asyncio.sleep(0.01)
        await relay.stop(task)
    finally:
        await amq.stop()
    assert relay.protocol == "3.1.1"
    assert out.delivered == {1}


async def test_rejected_row_stays_pending_in_the_real_journal(broker: MosquittoBroker,
                                                              tmp_path: Path) -> None:
    from tablesense.daemon.journal import Journal
    from tablesense.daemon.messages import FloorRound, RoundResults
    from tablesense.daemon.table.inputs import Channel, Emit, TimedInput
    from tablesense.drivers.events import Heartbeat

    journal = Journal(tmp_path / "j", "T9")
    ts = "2026-11-29T12:00:00.000Z"
    rows = journal.append(TimedInput(ts, Heartbeat("shoe", 1)), [
        Emit(Channel.RESULTS, RoundResults(table="T9", ts=ts, shoe=1, round=1, game="baccarat")),
        Emit(Channel.FLOOR_ROUNDS, FloorRound(table="T9", ts=ts, shoe=1, round=1, game="baccarat")),
        Emit(Channel.RESULTS, RoundResults(table="T9", ts=ts, shoe=1, round=2, game="baccarat"))])
    async with Subscriber(broker, "ts/T9/#", "sub-T9-journal") as sub:
        relay = Relay(settings(broker, "T9"), journal, status)
        task = await run_relay(relay)
        await sub.wait_for(lambda ms: sum(t.endswith("/results") for t, _, _ in ms) == 2)
        for _ in range(200):
            if relay.rejected:
                break
            await asyncio.sleep(0.01)
        await relay.stop(task)
    pending = journal.pending(10, 0)
    journal.close()
    assert relay.rejected >= 1  # PUBACK 0x87 from the ACL: an error, not a success
    assert [r.row_id for r in pending] == [rows[1].row_id]
    got = [b["msg_id"] for t, b, _ in sub.messages if t.endswith("/results")]
    assert got == [rows[0].msg_id, rows[2].msg_id]


async def test_replies_go_only_under_the_tables_reply_prefix(broker: MosquittoBroker) -> None:
    """A v5 response topic (or a 3.1.1 payload "response_topic") on a signage topic of the table, a
    wildcard, or outside the table gets no reply (one log line); the relay keeps answering."""
    seen: list[str] = []

    async def handle(req: CommandRequest) -> tuple[bool, str]:
        seen.append(req.operator)
        return False, "no alarm"

    relay = Relay(settings(broker, "T7"), MemoryOutbox(), status, on_command=handle)
    task = await run_relay(relay)
    try:
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as c:
            await c.subscribe("ts/T7/#", qos=1)
            await c.subscribe("elsewhere/#", qos=1)
            bad = ("ts/T7/results", "ts/T7/reply/+", "ts/T7/reply/#", "ts/T7/reply/", "elsewhere/r",
                   "ts/T7/replyx")
            for i, topic in enumerate(bad):
                props = Properties(PacketTypes.PUBLISH)
                props.ResponseTopic = topic
                await c.publish("ts/T7/cmd/ack_alarm", body(f"v5-{i}", {"alarm_id": "1.1"}), qos=1,
                                properties=props)
            await c.publish("ts/T7/cmd/ack_alarm", body(  # the 3.1.1 way, in the payload
                "payload", {"alarm_id": "1.1"}, response_topic="ts/T7/results"), qos=1)
            props = Properties(PacketTypes.PUBLISH)
            props.ResponseTopic = "ts/T7/reply/floor"
            props.CorrelationData = b"last"
            await c.publish("ts/T7/cmd/ack_alarm", body("good", {"alarm_id": "1.1"}), qos=1, properties=props)
            got = []
            async with asyncio.timeout(5):
                async for m in c.messages:
                    if str(m.topic).startswith("ts/T7/cmd/") or str(m.topic) == "ts/T7/status":
                        continue
                    got.append((str(m.topic), m.payload))
                    if str(m.topic) == "ts/T7/reply/floor":
                        break
        assert not task.done()
    finally:
        await relay.stop(task)
    assert got == [("ts/T7/reply/floor", json.dumps({"ok": False, "reason": "no alarm",
                                                     "command": "ack_alarm"}).encode())]
    assert seen == [f"v5-{i}" for i in range(len(bad))] + ["payload", "good"]
