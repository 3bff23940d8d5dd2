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
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machine_support import baccarat_config

from tablesense.daemon.app import App
from tablesense.daemon.mqtt import MAX_COMMAND_BYTES, CommandRejected, CommandRequest, parse_command
from tablesense.daemon.table.inputs import COMMAND_NAMES

json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=40)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
names = st.sampled_from(COMMAND_NAMES) | st.text(max_size=80)


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
    assert req.name == name
    assert isinstance(req.operator, str) and req.operator.strip() and len(req.operator) <= 128
    assert isinstance(req.args, dict)
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
@given(names, st.dictionaries(st.sampled_from(["operator", "args", "response_topic", "correlation_data",
                                               "extra"]), json_values, max_size=5),
       st.booleans())
def test_any_json_body_is_parsed_or_refused_in_one_line(name: str, body: dict[str, Any],
                                                         valid_op: bool) -> None:
    if valid_op:
        body["operator"] = "pit boss 4"
    payload = json.dumps(body).encode()
    req = parse(name, payload)
    if req is not None:
        assert req.operator == str(body["operator"]).strip()[:128]
        assert req.args == body.get("args", {})


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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(COMMAND_NAMES) | st.text(min_size=1, max_size=20),
       st.dictionaries(st.text(max_size=300), json_values | st.text(max_size=300), max_size=10),
       st.text(min_size=1, max_size=200))
def test_daemon_answers_every_parsed_command(app: App, name: str, args: dict[str, Any],
                                             operator: str) -> None:
    """Requests as parse_command could return them (any JSON args, odd names and operators) go through
    the daemon's handler: always an answer, never an exception; the machine stays usable."""
    try:
        req = parse_command(name, json.dumps({"operator": operator, "args": args}).encode())
    except CommandRejected:
        return
    ok, reason = answer(app, req)
    assert isinstance(ok, bool)
    one_line(reason)
    if not ok:
        assert reason
    assert app.machine is not None
    app.machine.snapshot()


def test_a_valid_command_still_applies_after_garbage(app: App) -> None:
    for junk in ({"card": "ZZ" * 200}, {"alarm": ["x"]}, {str(i): i for i in range(20)}):
        ok, reason = answer(app, CommandRequest("enter_card", junk, "op"))
        assert not ok and reason
    ok, reason = answer(app, CommandRequest("ack_alarm", {"alarm": "1.999"}, "op"))
    assert not ok and "1.999" in reason
    ok, reason = answer(app, CommandRequest("new_shoe", {}, "pit boss 4"))
    assert ok, reason
    assert app.journal is not None
    assert app.machine is not None and app.machine.phase.value in ("burn", "betting")
