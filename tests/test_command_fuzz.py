"""Fuzzing the command path (the command parser is fuzzed): whatever arrives on
``{prefix}/{table}/cmd/{name}`` is parsed by :func:`daemon.mqtt.parse_command` and applied by the daemon's
command handler (``App._on_command``: journal + round state machine). Properties:

* ``parse_command`` either returns a well-formed :class:`CommandRequest` or raises
  :class:`CommandRejected` with a one-line reason; nothing else escapes, for any name and any payload;
* the daemon's handler answers every parsed request with ``(ok, one-line reason)``, journals it, never
  raises, and the machine keeps working (a valid command still applies afterwards).

The device codec's properties live in tests/test_protocol_properties.py; size bounds in
tests/test_input_bounds.py.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from command_support import body, now_iso, request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machine_support import baccarat_config

from tablesense.daemon.app import App
from tablesense.daemon.mqtt import MAX_COMMAND_BYTES, CommandRejected, CommandRequest, parse_command
from tablesense.daemon.mqtt_commands import ARGS
from tablesense.daemon.table.inputs import COMMAND_NAMES

json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=40)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
names = st.sampled_from(sorted(ARGS)) | st.text(max_size=80)


def one_line(reason: str) -> None:
    assert isinstance(reason, str)
    assert "\n" not in reason and "\r" not in reason, reason
    assert len(reason) <= 400, len(reason)


def parse(name: str, payload: bytes) -> CommandRequest | None:
    """parse_command's contract: a CommandRequest, or CommandRejected with a one-line reason."""
    try:
        req = parse_command(name, payload)
    except CommandRejected as exc:
        one_line(str(exc))
        return None
    assert req.name == name and name in ARGS
    assert isinstance(req.operator, str) and req.operator.strip() and len(req.operator) <= 128
    assert isinstance(req.command_id, str) and 1 <= len(req.command_id) <= 64
    assert isinstance(req.args, dict)
    assert req.issued_at is None or req.issued_at.tzinfo is not None
    assert req.response_topic is None or (isinstance(req.response_topic, str) and req.response_topic)
    assert req.correlation_data is None or isinstance(req.correlation_data, bytes)
    return req


@settings(max_examples=300, deadline=None)
@given(names, st.binary(max_size=MAX_COMMAND_BYTES + 64))
def test_any_bytes_are_parsed_or_refused_in_one_line(name: str, payload: bytes) -> None:
    req = parse(name, payload)
    if len(payload) > MAX_COMMAND_BYTES:
        assert req is None


@settings(max_examples=300, deadline=None)
@given(names, st.dictionaries(st.sampled_from(["operator", "command_id", "issued_at", "args",
                                               "response_topic", "correlation_data", "extra"]),
                              json_values, max_size=7),
       st.booleans())
def test_any_json_body_is_parsed_or_refused_in_one_line(name: str, doc: dict[str, Any],
                                                         valid_head: bool) -> None:
    if valid_head:
        doc.update(operator="pit boss 4", command_id="f-1", issued_at=now_iso())
    payload = json.dumps(doc).encode()
    req = parse(name, payload)
    if req is not None:
        assert req.operator == str(doc["operator"]).strip()[:128]
        assert req.command_id == doc["command_id"]
        sent = doc.get("args", {})
        assert all(req.args[k] == v for k, v in sent.items() if v is not None)
        assert set(req.args) <= set(ARGS[name].__struct_fields__)


def test_every_machine_command_and_replay_have_their_arguments() -> None:
    assert set(COMMAND_NAMES) | {"replay"} <= set(ARGS)


def test_deeply_nested_json_is_refused_not_raised() -> None:
    depth = MAX_COMMAND_BYTES // 2
    assert parse("void_round", b"[" * depth + b"]" * depth) is None


# ------------------------------------------------------------------------------------ through the daemon

@pytest.fixture
def app(tmp_path: Path) -> Any:
    """A daemon opened on a temp journal (no broker, no device I/O: ``App.open`` only builds them)."""
    config = baccarat_config(extra=f'[journal]\ndirectory = "{tmp_path / "journal"}"\n')
    a = App(config)
    a.open()
    yield a
    assert a.journal is not None
    a.journal.close()


def answer(app: App, req: CommandRequest) -> tuple[bool, str]:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(app._on_command(req))
    finally:
        loop.close()


def _args_for(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments shaped for ``name`` with any values where it takes text, or any JSON object."""
    shaped: dict[str, st.SearchStrategy[dict[str, Any]]] = {
        "void_round": st.fixed_dictionaries({"shoe": st.integers(0, 3), "round": st.integers(0, 3)},
                                            optional={"reason": st.text(max_size=300)}),
        "enter_card": st.fixed_dictionaries({"shoe": st.integers(0, 3), "round": st.integers(0, 3),
                                             "card": st.text(max_size=10)}),
        "new_shoe": st.fixed_dictionaries({"shoe": st.integers(0, 3)}),
        "ack_alarm": st.fixed_dictionaries({}, optional={"alarm_id": st.text(max_size=70),
                                                         "alarm": st.text(max_size=70)}),
        "replay": st.fixed_dictionaries({"from_seq": st.integers(-1, 20_000),
                                         "to_seq": st.integers(-1, 20_000)}),
    }
    arbitrary = st.dictionaries(st.text(max_size=300), json_values | st.text(max_size=300), max_size=10)
    return shaped.get(name, arbitrary) | arbitrary


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data(), st.sampled_from(sorted(ARGS)) | st.text(min_size=1, max_size=20),
       st.text(min_size=1, max_size=200), st.sampled_from([0.0, -120.0, 60.0, None]))
def test_daemon_answers_every_parsed_command(app: App, data: st.DataObject, name: str, operator: str,
                                             age: float | None) -> None:
    """Requests as parse_command could return them (any arguments, odd names and operators, issued now,
    long ago, in the future, or without issued_at but with a message expiry) go through the daemon's
    handler: always an answer, never an exception; the machine stays equal to its journal."""
    args = data.draw(_args_for(name))
    issued = None if age is None else now_iso(age)
    try:
        req = parse_command(name, body(operator, args, issued_at=issued),
                            message_expiry=30 if age is None else None)
    except CommandRejected:
        return
    ok, reason = answer(app, req)
    assert isinstance(ok, bool)
    one_line(reason)
    if not ok:
        assert reason
    if age in (-120.0, 60.0):
        assert not ok
    assert app.machine is not None
    assert app.machine.snapshot() == app._rebuilt_machine().snapshot()


def test_a_valid_command_still_applies_after_garbage(app: App) -> None:
    for i, junk in enumerate(({"card": "ZZ" * 200}, {"alarm": ["x"]}, {str(i): i for i in range(20)})):
        # built by hand, past the parser: the machine's own checks refuse them
        ok, reason = answer(app, CommandRequest("enter_card", junk, "op", command_id=f"junk-{i}",
                                                issued_at=datetime.now(UTC)))
        assert not ok and reason
    ok, reason = answer(app, request("ack_alarm", {"alarm": "1.999"}, "op"))
    assert not ok and "1.999" in reason
    ok, reason = answer(app, request("new_shoe", {"shoe": 1}))
    assert ok, reason
    assert app.journal is not None
    assert app.machine is not None and app.machine.phase.value in ("burn", "betting")
