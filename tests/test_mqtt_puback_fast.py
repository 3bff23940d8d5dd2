"""The relay client's PUBACK fast path (``daemon.mqtt._success_puback``): the same acknowledgement as
paho's own decoding for every PUBACK form, and taken for the broker's success PUBACKs on a real Mosquitto."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import aiomqtt
import paho.mqtt._packet as paho_packet
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from tablesense.daemon.mqtt import _AckClient, _success_puback


def _client(protocol: int) -> tuple[paho.Client, list[tuple[int, int, str, Any]]]:
    """A paho client (not connected) that records each ``on_publish`` (mid, reason code, its name, props)."""
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=protocol)
    seen: list[tuple[int, int, str, Any]] = []

    def on_publish(_c: Any, _u: Any, mid: int, reason: Any, props: Any) -> None:
        seen.append((mid, reason.value, reason.getName(), props.json() if props is not None else None))

    client.on_publish = on_publish
    return client, seen


def _acknowledge(client: paho.Client, packet: bytes, *, fast: bool) -> MQTTErrorCode:
    """Hand ``client`` one PUBACK (``packet``: the bytes after the fixed header) for an in-flight mid 7."""
    client._out_messages[7] = paho.MQTTMessage(7)
    client._in_packet = {**client._in_packet, "command": 0x40, "packet": packet,
                         "remaining_length": len(packet)}
    if fast:
        rc = _success_puback(client, "PUBACK")
        if rc is not None:
            return rc
    return client._handle_pubackcomp("PUBACK")


PUBACKS = {
    "short": b"\x00\x07",                          # success: reason code and properties omitted (§3.4.2.1)
    "explicit-success": b"\x00\x07\x00",
    "no-subscribers": b"\x00\x07\x10\x00",         # No matching subscribers, empty properties
    "no-subscribers-3": b"\x00\x07\x10",            # the same, properties omitted
    "not-authorized": b"\x00\x07\x87\x00",
    "not-authorized-3": b"\x00\x07\x87",
    "reason-string": b"\x00\x07\x10\x03\x1f\x00\x00",  # No matching subscribers, a Reason String
    "unknown-mid": b"\x00\x08",                    # a mid not in flight: nothing to report
}
CASES = [pytest.param(paho.MQTTv5, packet, id=f"v5-{name}") for name, packet in PUBACKS.items()] + [
    pytest.param(paho.MQTTv311, PUBACKS[name], id=f"v3.1.1-{name}") for name in ("short", "unknown-mid")]


@pytest.mark.parametrize(("protocol", "packet"), CASES)
def test_the_fast_path_reports_what_paho_reports(protocol: int, packet: bytes) -> None:
    ours, seen_ours = _client(protocol)
    theirs, seen_theirs = _client(protocol)
    assert _acknowledge(ours, packet, fast=True) == _acknowledge(theirs, packet, fast=False)
    assert seen_ours == seen_theirs
    assert (7 in ours._out_messages) == (7 in theirs._out_messages)


def test_a_delivered_puback_builds_no_reason_code_or_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = paho_packet.decode_puback
    monkeypatch.setattr(paho_packet, "decode_puback", lambda *a: calls.append(a) or original(*a))
    client, seen = _client(paho.MQTTv5)
    _acknowledge(client, b"\x00\x07", fast=True)
    assert seen == [(7, 0, "Success", {})] and calls == []
    _acknowledge(client, b"\x00\x07\x10", fast=True)
    assert seen[-1][1] == 0x10 and calls == []
    _acknowledge(client, b"\x00\x07\x87\x00", fast=True)
    assert seen[-1][1] == 0x87 and len(calls) == 1  # a failure: paho's own decoding


@pytest.mark.parametrize("v5", [True, False], ids=["v5", "v3.1.1"])
async def test_a_real_brokers_acknowledgements_complete_every_publish(
        v5: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mosquitto acknowledges a QoS 1 success with a 2-byte PUBACK: every publish completes without
    paho's decoder (a negative acknowledgement takes paho's path: the cases above, and
    tests/test_broker_acl.py for the relay end to end)."""
    decoded = []
    original = paho_packet.decode_puback
    monkeypatch.setattr(paho_packet, "decode_puback", lambda *a: decoded.append(a) or original(*a))
    client = _AckClient("127.0.0.1", 1883, identifier=f"puback-{secrets.token_hex(4)}",
                        protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311)
    prefix = f"test-puback-{secrets.token_hex(4)}"
    async with asyncio.timeout(20):
        async with client:
            futures = [client.start_publish(f"{prefix}/m{i}", b"x" * 50, 1, False, None) for i in range(200)]
            client.write_now()
            done = []
            for fut in futures:
                await fut
                done.append(fut)
    assert len(done) == 200 and all(f.exception() is None for f in done)
    assert decoded == []
