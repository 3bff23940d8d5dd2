"""Commands bound to their round (the tester's findings, each kept fixed):

* ``void_round`` named no round: a command queued while the daemon's link was cut voided the round in
  play when it arrived (round 62) instead of the one meant (round 36). Now round-changing commands name
  ``shoe``/``round`` (``new_shoe`` its shoe) and are refused for any other, naming the current one;
* the same request replayed (same correlation data) voided two rounds: now a repeated ``command_id`` is
  answered with the first answer and applied once, also across a daemon restart (the machine rebuilds
  the answers from the journal);
* a retained command was accepted and delivered again at the next reconnect: now refused (journaled
  with the refusal) and cleared from the broker;
* ``{"operator":"a","operator":"b"}`` was journaled as ``b`` and NaN in args accepted as null: refused
  (tests/test_command_hardening.py ``REFUSED``, and here through a real broker);
* commands carry an expiry: ``issued_at`` older than ``[mqtt] command_max_age`` or more than 5 s ahead,
  or an MQTT v5 message expiry longer than that, are refused and journaled with the refusal.

Machine-level checks use :class:`machine_support.Driver`; daemon-level ones the App's own handler on a
temp journal; MQTT-level ones a real Mosquitto the test owns and the App as ``tablesense run`` runs it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from command_support import body, new_id, now_iso, request
from machine_support import Driver, baccarat_config
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from test_command_hardening import Feed, journaled_commands, live_round

from tablesense.daemon.app import App
from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.table.inputs import Command, TimedInput
from tablesense.drivers.events import Button

GUARD_S = 20.0
"""Hang guard for one exchange over the broker (never an assertion about speed)."""


def _cmd(d: Driver, name: str, command_id: str = "", **args: str) -> Any:
    d.feed(Command(name, args, "supervisor-7", command_id=command_id))
    return d.replies[-1]


def _round_in_play() -> Driver:
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C")
    return d


# ------------------------------------------------------------------------------------ the machine

def test_void_round_names_its_round_and_is_refused_for_any_other() -> None:
    d = _round_in_play()
    for args, why in (({"shoe": "1", "round": "2"}, "names round 1-2, but the current round is 1-1"),
                      ({"shoe": "2", "round": "1"}, "names round 2-1, but the current round is 1-1"),
                      ({"shoe": "1"}, "must name its round (args shoe and round); the current round is 1-1"),
                      ({"shoe": "1", "round": "x"}, "must name its round"),
                      ({"shoe": "1", "round": "0"}, "must name its round")):
        reply = _cmd(d, "void_round", new_id(), **args)
        assert not reply.ok and why in reply.reason, reply.reason
        assert d.state.phase == "dealing" and not d.state.void
    assert _cmd(d, "void_round", new_id(), shoe="1", round="1", reason="misdeal").ok
    assert d.state.void


def test_enter_card_and_new_shoe_name_their_round_and_shoe() -> None:
    d = _round_in_play()
    d.unreadable()
    reply = _cmd(d, "enter_card", new_id(), shoe="1", round="2", card="5D")
    assert not reply.ok and "the current round is 1-1" in reply.reason
    assert _cmd(d, "enter_card", new_id(), shoe="1", round="1", card="5D").ok
    d.cards("7S")  # the Banker natural 9: the round completes
    reply = _cmd(d, "new_shoe", new_id(), shoe="2")
    assert not reply.ok and "names shoe 2, but the current shoe is 1" in reply.reason
    reply = _cmd(d, "new_shoe", new_id())
    assert not reply.ok and "must name the shoe it ends" in reply.reason
    assert _cmd(d, "new_shoe", new_id(), shoe="1").ok
    assert d.state.shoe == 2


def test_a_repeated_command_id_gets_the_first_answer_and_changes_nothing() -> None:
    d = _round_in_play()
    first = _cmd(d, "void_round", "cmd-36", shoe="1", round="1")
    assert first.ok and d.state.void
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("9H 8C")  # round 2 in play
    emits_before = len(d.emits)
    assert _cmd(d, "void_round", "cmd-36", shoe="1", round="1") == first  # the very same request again
    assert _cmd(d, "void_round", "cmd-36", shoe="1", round="2") == first  # same id, other args: not applied
    assert d.state.round == 2 and not d.state.void and d.state.phase == "dealing"
    assert len(d.emits) == emits_before  # nothing published for a repeat
    refused = _cmd(d, "void_round", "cmd-37", shoe="1", round="1")
    assert not refused.ok and _cmd(d, "void_round", "cmd-37", shoe="1", round="2") == refused


def test_commands_journaled_without_an_id_replay_as_they_were_applied() -> None:
    """Journals written before command ids existed hold ``void_round`` with no round: they still rebuild
    the same machine (no binding without an id)."""
    d = _round_in_play()
    assert _cmd(d, "void_round").ok and d.state.void


# ------------------------------------------------------------------------------------ the daemon

@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    a = App(baccarat_config(extra=f'[journal]\ndirectory = "{tmp_path / "journal"}"\n'))
    a.open()
    yield a
    if a.journal is not None:
        a.journal.close()


async def _complete_and_open_round_2(feed: Feed) -> None:
    assert await feed.card("3D") and await feed.card("4S")  # natural 8 against 6: round 1 complete
    assert await feed.bet("1P", 500)
    assert await feed.no_more_bets()
    assert await feed.card("9H")


async def test_repeat_across_a_restart_is_answered_from_the_journal(app: App, tmp_path: Path) -> None:
    """The tester replayed one request (same correlation data) and voided two rounds. Now: the first
    applies, the repeat gets the first answer, also after a restart (the answers come back with the
    machine, rebuilt from the journal), and every receipt is journaled with the command id."""
    feed = await live_round(app)
    req = request("void_round", {"shoe": 1, "round": 1, "reason": "misdeal"}, command_id="floor-7:a1")
    ok, reason = await app._on_command(req)
    assert ok, reason
    await _complete_round_after_void(feed)
    assert app.machine is not None and app.machine.snapshot()["round"] == 2
    assert await app._on_command(req) == (True, "")
    assert app.machine.phase.value == "dealing"  # round 2 not voided
    assert app.journal is not None
    app.journal.close()

    again = App(app.config)
    again.open()
    try:
        assert again.machine is not None and again.machine.snapshot()["round"] == 2
        assert await again._on_command(req) == (True, "")
        assert await again._on_command(request("void_round", {"shoe": 1, "round": 2},
                                               command_id="floor-7:a1")) == (True, "")
        assert again.machine.phase.value == "dealing"
        commands = journaled_commands(again)
        assert [c.command_id for c in commands] == ["floor-7:a1"] * 4  # every receipt journaled
        assert [c.refusal for c in commands] == [""] * 4
    finally:
        assert again.journal is not None
        again.journal.close()


async def _complete_round_after_void(feed: Feed) -> None:
    assert await feed.bet("1P", 500)
    assert await feed.no_more_bets()
    assert await feed.card("9H") and await feed.card("8C")


async def test_a_late_command_for_an_earlier_round_is_refused(app: App) -> None:
    feed = await live_round(app)
    await _complete_and_open_round_2(feed)
    assert app.machine is not None and app.machine.snapshot()["round"] == 2
    ok, reason = await app._on_command(request("void_round", {"shoe": 1, "round": 1}))
    assert not ok and reason == "void_round names round 1-1, but the current round is 1-2: refused"
    assert app.machine.phase.value == "dealing"
    record = journaled_commands(app)[-1]
    assert record.args == {"shoe": "1", "round": "1", "reason": ""} and record.refusal == ""


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"issued_at": -45.0}, "expired: issued 45."),
    ({"issued_at": +12.0}, "in the future (more than 5 s)"),
    ({"issued_at": None, "message_expiry": 3600}, "message expiry 3600 s is longer than [mqtt] "
                                                  "command_max_age 30 s"),
    ({"retained": True}, "retained commands are refused"),
])
async def test_expired_future_and_retained_commands_are_refused_and_journaled(
        app: App, kwargs: dict[str, Any], why: str) -> None:
    await live_round(app)
    if isinstance(kwargs.get("issued_at"), float):  # seconds from now, taken when the test runs
        kwargs = {**kwargs, "issued_at": now_iso(kwargs["issued_at"])}
    req = request("void_round", {"shoe": 1, "round": 1}, **kwargs)
    ok, reason = await app._on_command(req)
    assert not ok and why in reason, reason
    assert app.machine is not None and app.machine.phase.value == "dealing"
    [cmd] = journaled_commands(app)
    assert cmd.command_id == req.command_id and why in cmd.refusal
    assert app.machine.snapshot() == app._rebuilt_machine().snapshot()
    # the record of the round keeps the refused command with its answer
    record = app.machine.snapshot()["record"]["commands"]
    assert record[-1]["command_id"] == req.command_id and not record[-1]["ok"] and why in record[-1]["reason"]


async def test_message_expiry_stands_in_for_issued_at(app: App) -> None:
    await live_round(app)
    ok, reason = await app._on_command(request("void_round", {"shoe": 1, "round": 1}, issued_at=None,
                                               message_expiry=20))
    assert ok, reason


async def test_the_maximum_age_is_configured_under_mqtt(tmp_path: Path) -> None:
    a = App(baccarat_config(extra=f'[journal]\ndirectory = "{tmp_path}"\n[mqtt]\ncommand_max_age = 60\n'))
    a.open()
    try:
        await live_round(a)
        ok, reason = await a._on_command(request("void_round", {"shoe": 1, "round": 1},
                                                 issued_at=now_iso(-45)))
        assert ok, reason
    finally:
        assert a.journal is not None
        a.journal.close()


# ------------------------------------------------------------------------------------ over MQTT

pytestmark_mqtt = pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    b = MosquittoBroker(tmp_path / "broker")
    b.start()
    yield b
    b.stop()


def _mqtt_config(broker: MosquittoBroker, journal: Path) -> Any:
    return baccarat_config(extra=f'[journal]\ndirectory = "{journal}"\n[mqtt]\nhost = "{broker.host}"\n'
                                 f'port = {broker.port}\ntopic_prefix = "tb"\n')


async def _run(app: App) -> asyncio.Task[int]:
    task = asyncio.create_task(app.run())
    async with asyncio.timeout(GUARD_S):
        while app.relay is None or not app.relay.connected:
            await asyncio.sleep(0.01)
    return task


async def _stop(app: App, task: asyncio.Task[int]) -> None:
    app.stop()
    await asyncio.wait_for(task, GUARD_S)


async def _replies(floor: aiomqtt.Client, n: int) -> dict[bytes, dict[str, Any]]:
    got: dict[bytes, dict[str, Any]] = {}
    async with asyncio.timeout(GUARD_S):
        async for m in floor.messages:
            if "/reply/" not in str(m.topic):
                continue
            assert m.properties is not None
            got[bytes(m.properties.CorrelationData)] = json.loads(m.payload)  # type: ignore[arg-type]
            if len(got) == n:
                return got
    raise AssertionError("no replies")


def _props(corr: bytes, expiry: int | None = None) -> Properties:
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    props.ResponseTopic = "tb/t1/reply/floor"
    props.CorrelationData = corr
    if expiry is not None:
        props.MessageExpiryInterval = expiry
    return props


@pytestmark_mqtt
@pytest.mark.timeout(120)
async def test_a_command_queued_while_the_daemon_was_away_cannot_void_a_later_round(
        broker: MosquittoBroker, tmp_path: Path) -> None:
    """The tester's repro: the floor sends ``void_round`` for the round it sees (round 1) while the
    daemon's link is down; the broker queues it in the daemon's persistent session; by the time it is
    delivered round 2 is in play. It is refused naming round 1-2, and round 2 is dealt to its end."""
    config = _mqtt_config(broker, tmp_path / "journal")
    app = App(config)
    app.open()
    task = await _run(app)
    await _stop(app, task)  # the persistent session (and its cmd/+ subscription) stays at the broker
    cmd = "tb/t1/cmd/void_round"
    async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5,
                              identifier="floor-1") as floor:
        await floor.subscribe("tb/t1/reply/#", qos=1)
        await floor.publish(cmd, body("pit-7", {"shoe": 1, "round": 1}), qos=1, properties=_props(b"late"))
        app = App(config)  # the daemon back, with round 1 dealt and round 2 in play meanwhile
        app.open()
        feed = await live_round(app)
        await _complete_and_open_round_2(feed)
        task = await _run(app)
        try:
            got = await _replies(floor, 1)
        finally:
            await _stop(app, task)
    assert got[b"late"] == {"ok": False, "command": "void_round",
                            "reason": "void_round names round 1-1, but the current round is 1-2: refused"}
    assert app.machine is not None and app.machine.phase.value == "dealing"


@pytestmark_mqtt
@pytest.mark.timeout(120)
async def test_retained_duplicate_key_and_nan_commands_over_mqtt(broker: MosquittoBroker,
                                                                 tmp_path: Path) -> None:
    """A retained ``void_round`` is refused on its first delivery (Retain As Published), journaled with
    the refusal and cleared from the broker, so the next reconnect does not deliver it again; a body
    with a duplicate key or NaN is refused and never journaled; a command with a v5 message expiry and
    no issued_at is applied."""
    config = _mqtt_config(broker, tmp_path / "journal")
    app = App(config)
    app.open()
    await live_round(app)
    task = await _run(app)
    cmd = "tb/t1/cmd/void_round"
    retained_id = new_id("retained")
    try:
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5,
                                  identifier="floor-1") as floor:
            await floor.subscribe("tb/t1/reply/#", qos=1)
            await floor.publish(cmd, body("pit-7", {"shoe": 1, "round": 1}, command_id=retained_id), qos=1,
                                retain=True, properties=_props(b"retained"))
            head = f'"command_id": "{new_id()}", "issued_at": "{now_iso()}"'
            await floor.publish(cmd, ('{"operator": "a", "operator": "b", ' + head +
                                      ', "args": {"shoe": 1, "round": 1}}').encode(), qos=1,
                                properties=_props(b"dup"))
            await floor.publish(cmd, ('{"operator": "a", ' + head + ', "args": {"shoe": NaN, "round": 1}}'
                                      ).encode(), qos=1, properties=_props(b"nan"))
            got = await _replies(floor, 3)
            assert app.machine is not None and app.machine.phase.value == "dealing"
            await floor.publish(cmd, body("pit-7", {"shoe": 1, "round": 1}, issued_at=None), qos=1,
                                properties=_props(b"expiry", expiry=20))
            got.update(await _replies(floor, 1))
        await _stop(app, task)
        # the daemon reconnects (a restart): the retained command is not delivered again; a sentinel
        # command sent after the subscription is answered, and by then a retained one would have come
        app = App(config)
        app.open()
        task = await _run(app)
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5,
                                  identifier="floor-1") as floor:
            await floor.subscribe("tb/t1/reply/#", qos=1)
            await floor.publish("tb/t1/cmd/ack_alarm", body("pit-7", {"alarm_id": "9.9"}), qos=1,
                                properties=_props(b"sentinel"))
            got.update(await _replies(floor, 1))
        commands = journaled_commands(app)
    finally:
        await _stop(app, task)
    assert not got[b"retained"]["ok"] and "retained commands are refused" in got[b"retained"]["reason"]
    assert "the key 'operator' twice" in got[b"dup"]["reason"] and not got[b"dup"]["ok"]
    assert "non-finite number NaN" in got[b"nan"]["reason"] and not got[b"nan"]["ok"]
    assert got[b"expiry"] == {"ok": True, "reason": "", "command": "void_round"}
    assert not got[b"sentinel"]["ok"] and "9.9" in got[b"sentinel"]["reason"]
    assert [(c.name, c.command_id == retained_id, bool(c.refusal)) for c in commands] == [
        ("void_round", True, True), ("void_round", False, False), ("ack_alarm", False, False)]
    async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as probe:
        await probe.subscribe("tb/t1/cmd/#", qos=1)
        await probe.publish("tb/t1/cmd/sentinel", b"", qos=1)
        async with asyncio.timeout(GUARD_S):
            async for m in probe.messages:
                assert str(m.topic).endswith("/sentinel"), f"still retained: {m.topic} {m.payload!r}"
                break


def test_journaled_command_rows_carry_id_issue_time_and_refusal() -> None:
    from tablesense.daemon.journal.codec import decode_event, encode_event
    c = Command("void_round", {"shoe": "3", "round": "17"}, "pit-7", "id-1", "2026-12-01T10:00:00.000Z",
                "expired: issued 45.0 s ago")
    assert decode_event(*encode_event(c)) == c
    assert isinstance(TimedInput("t", c).event, Command)
