"""Defects a hostile tester found on the operator-command path (docs/security.md), each kept fixed:

* a lone surrogate (or a control character in the operator) in a command made the journal encoding fail
  AFTER the machine applied the command: ``parse_command`` refuses such text and bounds the sizes, and
  the daemon never lets its machine run ahead of the journal (any failing journal step rebuilds it);
* ``enter_card`` put a card into a live round when nothing was waiting for one;
* replies could be sent to any topic (signage topics, wildcards): see tests/test_mqtt_relay.py;
* no limit on the command rate: a flood was journaled and delayed settlements;
* ``ack_alarm`` named its argument ``alarm`` while alarms call it ``alarm_id``; unknown args were
  accepted silently.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from command_support import body, now_iso, request
from e2e_support import Daemon, start_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machine_support import PADS, SHOE, Driver, baccarat_config
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from test_app_lifecycle import partial_round
from test_e2e_games import check_settlements

from tablesense.daemon.app import App, CommandRateLimit
from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.config import ConfigError
from tablesense.daemon.mqtt import CommandRejected, CommandRequest, parse_command
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table.inputs import Command
from tablesense.drivers.events import Button, CardDrawn, DealerButton, SpotChanged, SpotState

# ------------------------------------------------------------------------------------ parse_command

def _cmd(rest: str, args: str = '{"shoe": 1, "round": 1}') -> str:
    """A void_round body whose command id and issue time are valid, with ``rest`` spliced in."""
    return ('{"command_id": "h-1", "issued_at": "2026-12-01T10:00:00.000Z", "args": ' + args + ", "
            + rest + "}")


REFUSED = [
    (_cmd('"operator": "\\ud800"'), "operator is not valid text (lone surrogate U+D800)"),
    (_cmd('"operator": "pit \\udfff boss"'), "lone surrogate"),
    (_cmd('"operator": "op"', '{"shoe": 1, "round": 1, "reason": "\\ud83d"}'),
     "args.reason is not valid text (lone surrogate U+D83D)"),
    (_cmd('"operator": "op"', '{"\\ud800": "x"}'), "args has a key that is not valid text"),
    (_cmd('"operator": "op"', '{"card": ["5D", {"k": "\\udc00"}]}'), "args.card[1].k is not valid text"),
    (_cmd('"operator": "op"', '{"card": {"\\udc00": 1}}'), "args.card has a key that is not valid text"),
    (_cmd('"operator": "pit\\nboss"'), "operator is not valid text (control character U+000A)"),
    (_cmd('"operator": "pit\\u0000boss"'), "control character U+0000"),
    (_cmd('"operator": "pit\\u009bboss"'), "control character U+009B"),
    (_cmd('"operator": "' + "o" * 129 + '"'), "operator: Expected `str` of length <= 128"),
    (_cmd('"operator": "op"', "{" + ", ".join(f'"a{i}": 1' for i in range(9)) + "}"), "unknown field `a0`"),
    (_cmd('"operator": "op"', '{"shoe": 1, "round": 1, "' + "k" * 257 + '": 1}'), "unknown field"),
    (_cmd('"operator": "op"', '{"shoe": 1, "round": 1, "reason": "' + "r" * 257 + '"}'),
     "reason: Expected `str` of length <= 256"),
    (_cmd('"operator": "op"', '{"shoe": 1, "round": 1, "reason": [' + ", ".join(["1234"] * 60) + "]}"),
     "reason: Expected `str`, got `array`"),
    (_cmd('"operator": "op", "response_topic": "ts/t1/reply/\\ud800"'), "response_topic is not valid text"),
    (_cmd('"operator": "op", "correlation_data": "\\ud800"'), "correlation_data is not valid text"),
    # the tester's findings of this batch: a duplicate key was read as the last one, NaN as null
    ('{"operator": "a", "operator": "b", "command_id": "h-1", "issued_at": "2026-12-01T10:00:00Z", '
     '"args": {"shoe": 1, "round": 1}}', "the key 'operator' twice"),
    (_cmd('"operator": "op"', '{"shoe": 1, "shoe": 2, "round": 1}'), "the key 'shoe' twice"),
    (_cmd('"operator": "op"', '{"shoe": NaN, "round": 1}'), "non-finite number NaN"),
    (_cmd('"operator": "op"', '{"shoe": 1, "round": Infinity}'), "non-finite number Infinity"),
    (_cmd('"operator": "op"', '{"shoe": -Infinity, "round": 1}'), "non-finite number -Infinity"),
    (_cmd('"operator": "op"', '{"shoe": 1e999, "round": 1}'), "non-finite number 1e999"),
    (_cmd('"operator": "op"', '{"shoe": 1, "round": 1, "reason": [[[[[[[[[1]]]]]]]]]}'), "nests deeper"),
]


@pytest.mark.parametrize(("payload", "why"), REFUSED, ids=[w for _, w in REFUSED])
def test_parse_command_refuses_text_that_cannot_be_journaled_or_is_unbounded(payload: str, why: str) -> None:
    with pytest.raises(CommandRejected) as info:
        parse_command("void_round", payload.encode())
    reason = str(info.value)
    assert why in reason
    assert "\n" not in reason and len(reason) <= 400
    reason.encode("utf-8")  # the reason itself can be published


def test_parse_command_keeps_bounded_valid_text() -> None:
    req = parse_command("ack_alarm", body(" Zoë Ünal 🂡 ", {"alarm_id": "1.3"}))
    assert req.operator == "Zoë Ünal 🂡" and req.args == {"alarm_id": "1.3"}
    req = parse_command("void_round", body("o" * 128, {"shoe": 2, "round": 9, "reason": "r" * 256}))
    assert req.operator == "o" * 128 and req.args == {"shoe": 2, "round": 9, "reason": "r" * 256}


# ------------------------------------------------------------------------------------ the daemon

@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    """A daemon opened on a temp journal (no broker, no device I/O: ``App.open`` only builds them)."""
    a = App(baccarat_config(extra=f'[journal]\ndirectory = "{tmp_path / "journal"}"\n'))
    a.open()
    yield a
    assert a.journal is not None
    a.journal.close()


class Feed:
    """Device events into the daemon's own input path (``App._process_device``)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.seq: dict[str, int] = {}

    def _next(self, device: str) -> int:
        self.seq[device] = self.seq.get(device, 0) + 1
        return self.seq[device]

    async def bet(self, spot: str, amount: int) -> bool:
        return await self.app._process_device(SpotChanged(PADS, self._next(PADS), spot, SpotState.PLACED,
                                                          amount))

    async def no_more_bets(self) -> bool:
        return await self.app._process_device(DealerButton(PADS, self._next(PADS), Button.NO_MORE_BETS))

    async def card(self, text: str) -> bool:
        return await self.app._process_device(CardDrawn(SHOE, self._next(SHOE), Card.parse(text)))


def journaled(app: App) -> list[Any]:
    assert app.journal is not None
    return [inp.event for inp in app.journal.replay_inputs()]


def journaled_commands(app: App) -> list[Command]:
    return [e for e in journaled(app) if isinstance(e, Command)]


async def live_round(app: App) -> Feed:
    feed = Feed(app)
    assert await feed.bet("1P", 1000) and await feed.bet("1B", 2000)
    assert await feed.no_more_bets()
    assert await feed.card("5H") and await feed.card("2C")
    assert app.machine is not None and app.machine.phase.value == "dealing"
    return feed


async def test_a_surrogate_operator_is_refused_and_never_reaches_the_machine(app: App) -> None:
    """The tester's CRITICAL repro: the round was voided in memory, nothing journaled or published."""
    await live_round(app)
    assert app.machine is not None
    before = app.machine.snapshot()
    # built by hand, past the parser (which refuses such text): the daemon's own check must hold too
    ok, reason = await app._on_command(CommandRequest("void_round", {"shoe": 1, "round": 1}, "\ud800",
                                                      command_id="s-1", issued_at=datetime.now(UTC)))
    assert not ok and "cannot be journaled" in reason
    assert app.machine.snapshot() == before  # not voided in memory
    assert app.machine.phase.value == "dealing"
    assert journaled_commands(app) == []
    ok, reason = await app._on_command(CommandRequest(
        "void_round", {"shoe": 1, "round": 1, "reason": "x\udfff"}, "pit boss", command_id="s-2",
        issued_at=datetime.now(UTC)))
    assert not ok and app.machine.snapshot() == before
    ok, reason = await app._on_command(request("void_round", {"shoe": 1, "round": 1}))
    assert ok, reason
    assert app.machine.phase.value == "complete"
    assert [c.operator for c in journaled_commands(app)] == ["pit boss 4"]


async def test_any_failing_journal_step_leaves_the_machine_equal_to_a_replay_of_the_journal(
        app: App) -> None:
    """Not only JournalUnwritable: whatever the journaling step raises (here the UnicodeEncodeError the
    tester saw, raised from inside the journal's append), the input is not applied, a critical alarm and
    status say so, and the machine equals a replay of what is durable."""
    assert app.journal is not None
    feed = await live_round(app)
    real_append = app.journal.append
    failures = 0

    def failing_append(inp: Any, emits: Any) -> Any:
        nonlocal failures
        failures += 1
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    assert app.machine is not None
    before = app.machine.snapshot()
    app.journal.append = failing_append  # type: ignore[method-assign]
    try:
        ok, reason = await app._on_command(request("void_round", {"shoe": 1, "round": 1}))
        assert not ok and "journal failure" in reason
        assert app.machine.snapshot() == before
        assert not await feed.card("3D")  # a device input too: not applied, not acknowledged
        assert app.machine.snapshot() == before
    finally:
        app.journal.append = real_append  # type: ignore[method-assign]
    assert failures == 2 and app.journal_failures == 2
    assert "journal failure" in json.loads(app._status_payload("online"))["detail"]
    assert app.machine.snapshot() == app._rebuilt_machine().snapshot()
    feed.seq[SHOE] -= 1  # the device resends the frame nobody acknowledged (protocol §3)
    assert await feed.card("3D")  # it is taken again, goes through and clears the status
    assert json.loads(app._status_payload("online"))["detail"] == ""
    ok, reason = await app._on_command(request("void_round", {"shoe": 1, "round": 1}))
    assert ok, reason
    assert app.machine.snapshot() == app._rebuilt_machine().snapshot()
    assert len(journaled_commands(app)) == 1


async def test_over_the_rate_limit_commands_are_answered_and_not_journaled_and_cards_go_first(
        app: App) -> None:
    """A flood of bogus ack_alarm commands (the tester sent 5000): only the burst is journaled, the rest
    are answered "rate limited"; a card arriving during the flood is journaled before the flood's tail."""
    feed = await live_round(app)
    app.command_limit = CommandRateLimit(rate=20, burst=10, clock=lambda: 0.0)  # no refill in the test
    flood = 300
    tasks = [asyncio.create_task(app._on_command(request("ack_alarm", {"alarm_id": f"9.{i}"}, "bot")))
             for i in range(flood)]
    await asyncio.sleep(0)
    card = asyncio.create_task(feed.card("3D"))
    answers = await asyncio.gather(*tasks)
    assert await card
    limited = [r for ok, r in answers if r.startswith("rate limited")]
    assert len(limited) == flood - 10
    assert all(not ok for ok, _ in answers)
    events = journaled(app)
    commands = [i for i, e in enumerate(events) if isinstance(e, Command)]
    assert len(commands) == 10  # over-limit commands are not journaled
    card_at = next(i for i, e in enumerate(events) if isinstance(e, CardDrawn) and str(e.card) == "3D")
    assert card_at < commands[-1]
    assert app.command_limit.refused == flood - 10


def test_the_rate_limit_refills_at_its_rate() -> None:
    now = [0.0]
    limit = CommandRateLimit(rate=20, burst=3, clock=lambda: now[0])
    assert [limit.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.05  # one token
    assert [limit.take(), limit.take()] == [True, False]
    now[0] += 10.0  # never more than the burst
    assert [limit.take() for _ in range(4)] == [True, True, True, False]
    with pytest.raises(ValueError):
        CommandRateLimit(rate=0)


# ------------------------------------------------------------------------------------ the machine

def _dealing() -> Driver:
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C")
    return d


def test_enter_card_is_refused_when_no_card_is_waiting() -> None:
    d = _dealing()
    remaining = d.state.cards_remaining
    reply = d.command("enter_card", card="5D")
    assert not reply.ok and reply.reason == "no unreadable card or gap waiting for a card"
    assert d.public_cards() == ["5H", "2C"] and d.state.cards_remaining == remaining
    d.unreadable()  # now a card is waiting
    assert d.command("enter_card", card="5D").ok
    assert d.public_cards() == ["5H", "2C", "5D"]


def test_unknown_command_arguments_are_refused_naming_the_argument() -> None:
    d = _dealing()
    for name, args in (("enter_card", {"card": "5D", "crad": "5D"}), ("new_shoe", {"force": "1"}),
                       ("void_round", {"why": "x"}), ("ack_alarm", {"id": "1.1"})):
        reply = d.command(name, **args)
        assert not reply.ok
        bad = next(k for k in args if k not in ("card",))
        assert f"unknown argument {bad!r} for {name}" in reply.reason, reply.reason
    assert d.state.phase == "dealing"


def test_ack_alarm_takes_alarm_id_and_still_alarm() -> None:
    d = _dealing()
    (a,) = d.alarms(d.card("5D", skip=2))
    assert a.code == "SEQUENCE_GAP" and d.state.held
    assert d.command("ack_alarm", alarm_id=a.alarm_id).ok
    assert not d.state.held
    (b,) = d.alarms(d.card("6D", skip=2))
    assert d.command("ack_alarm", alarm=b.alarm_id).ok  # the old name stays an alias


# ------------------------------------------------------------------------------------ end to end

@pytest.mark.timeout(120)
@pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")
async def test_the_testers_surrogate_repro_over_mqtt_leaves_the_round_to_settle(tmp_path: Path) -> None:
    """`tablesense run` (a subprocess) on a real Mosquitto with simulated devices: mid-round, commands
    whose JSON text holds ``\\ud800`` (operator, arg value) are refused on the reply topic; the round then
    completes and settles as dealt, and after a restart nothing is re-published differently."""
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=9)
    bets = {"1P": 1000, "2B": 2000, "1PP": 500}
    base = f"tablesense/{config.table}"
    try:
        await sim.play_round(bets)
        rnd = await partial_round(sim, bets, ["player", "banker", "player"])
        await rec.wait_for(lambda r: len(r.on("results")) == 1)
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as floor:
            await floor.subscribe(f"{base}/reply/floor", qos=1)
            head = f'"command_id": "e2e-1", "issued_at": "{now_iso()}"'.encode()
            bodies = (b'{"operator": "\\ud800", ' + head + b', "args": {"shoe": 1, "round": 2}}',
                      b'{"operator": "pit boss", ' + head + b', "args": {"shoe": 1, "round": 2, '
                      b'"reason": "\\udfff"}}',
                      b'{"operator": "pit boss", ' + head + b', "args": {"\\ud800": "x"}}')
            for i, body in enumerate(bodies):
                props = Properties(PacketTypes.PUBLISH)
                props.ResponseTopic = f"{base}/reply/floor"
                props.CorrelationData = bytes([i])
                await floor.publish(f"{base}/cmd/void_round", body, qos=1, properties=props)
            replies: dict[bytes, dict[str, Any]] = {}
            async with asyncio.timeout(10):
                async for m in floor.messages:
                    assert m.properties is not None
                    replies[bytes(m.properties.CorrelationData)] = json.loads(m.payload)  # type: ignore[arg-type]
                    if len(replies) == len(bodies):
                        break
        assert all(not r["ok"] and "not valid text (lone surrogate" in r["reason"] for r in replies.values())
        while (hand := next_card_hand([c for _, c in rnd.cards])) is not None:
            await sim._card(rnd, hand.value)
        await sim.pads_frames(sim.pads.clear())
        sim.rounds.append(rnd)
        await rec.wait_for(lambda r: len(r.on("results")) == 2)
        assert await daemon.terminate() == 0
        daemon = Daemon(daemon.config, tmp_path / "daemon2.log")
        daemon.start()
        async with asyncio.timeout(30):  # hang guard: both devices opened again before dealing on
            while daemon.log.read_text().count('"link.online"') < 2:
                await asyncio.sleep(0.02)
        await sim.play_round(bets)
        await rec.wait_for(lambda r: len(r.on("results")) == 3)
        assert await daemon.terminate() == 0
    finally:
        daemon.kill()
        await rec.stop()
        await sim.close()
        broker.stop()
    assert check_settlements(config, sim, rec) == 3 * len(bets)  # the round settled as dealt, not void
    assert not any(r.body.get("void") for r in rec.on("results"))
    seqs = [m.body["seq"] for m in rec.on("settlements") + rec.on("results") + rec.on("round")]
    assert len(seqs) == len(set(seqs))  # the restart re-published nothing under a new msg_id


any_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=20)  # surrogates included


def _texts_for(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """The command's own arguments with any text where it takes text (rounds 1-2 of shoe 1), sometimes
    with one more argument of any text."""
    own: dict[str, st.SearchStrategy[Any]] = {
        "void_round": st.fixed_dictionaries({"shoe": st.just(1), "round": st.integers(1, 2),
                                             "reason": any_text}),
        "enter_card": st.fixed_dictionaries({"shoe": st.just(1), "round": st.integers(1, 2),
                                             "card": any_text}),
        "new_shoe": st.fixed_dictionaries({"shoe": st.integers(1, 2)}),
        "ack_alarm": st.fixed_dictionaries({"alarm_id": any_text}),
    }
    extra = st.dictionaries(any_text, any_text | st.lists(any_text, max_size=2), max_size=1)
    return st.builds(lambda a, b: {**a, **b}, own[name], st.just({}) | extra)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), name=st.sampled_from(["void_round", "enter_card", "new_shoe", "ack_alarm"]),
       operator=any_text)
def test_any_text_either_is_refused_or_leaves_the_machine_equal_to_its_journal(
        tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, name: str, operator: str) -> None:
    """Whatever text a command carries (lone surrogates included, as JSON escapes): parse_command
    refuses it, or the daemon answers it and its machine equals a replay of its journal."""
    args = data.draw(_texts_for(name))
    payload = body(operator, args)  # json.dumps: \\udXXX escapes for surrogates
    try:
        req = parse_command(name, payload)
    except CommandRejected as exc:
        str(exc).encode("utf-8")
        return
    for text in (req.operator, *req.args, *(json.dumps(v, ensure_ascii=False) for v in req.args.values())):
        text.encode("utf-8")  # no accepted string is one the journal cannot store
    tmp = tmp_path_factory.mktemp("j")
    a = App(baccarat_config(extra=f'[journal]\ndirectory = "{tmp}"\n'))
    a.open()
    try:
        async def go() -> tuple[bool, str]:
            await live_round(a)
            return await a._on_command(req)
        ok, reason = asyncio.run(go())
        assert isinstance(ok, bool) and "\n" not in reason
        reason.encode("utf-8")
        assert a.machine is not None
        assert a.machine.snapshot() == a._rebuilt_machine().snapshot()
    finally:
        assert a.journal is not None
        a.journal.close()


def test_the_command_rate_is_configured_under_mqtt(tmp_path: Path) -> None:
    a = App(baccarat_config(extra=f'[journal]\ndirectory = "{tmp_path}"\n[mqtt]\ncommand_rate = 3\n'
                                  'command_burst = 2\n'))
    assert (a.command_limit.rate, a.command_limit.burst) == (3.0, 2)
    assert [a.command_limit.take() for _ in range(3)] == [True, True, False]
    default = App(baccarat_config())
    assert (default.command_limit.rate, default.command_limit.burst) == (20.0, 50)
    for line, why in (("command_rate = 0", "mqtt.command_rate"), ("command_burst = 0", "mqtt.command_burst"),
                      ("command_rate = 1001", "1 to 1000")):
        with pytest.raises(ConfigError, match=why):
            baccarat_config(extra=f"[mqtt]\n{line}\n")
