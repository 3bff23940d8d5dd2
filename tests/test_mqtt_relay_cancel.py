"""A relay session's tasks end when cancelled, also when what they wait for completes in the same loop turn.

CI once saw the older of two daemons sharing a client id never step back: Mosquitto closed its session,
the receive task ended, the session cancelled its outbox task -- and that task, woken by new rows in the
same loop turn, swallowed the cancellation in ``asyncio.wait_for`` (Python 3.11, CPython gh-86296), went
back to waiting for rows for ever, and the session never ended, so the relay never reconnected. The tests
put the relay's waits in exactly that turn, deterministically: complete, then cancel, before the loop
runs again. Also here: a connection attempt that closes before CONNACK ends at once (it waited for
the CONNACK timeout), the other wait that kept the relay from coming back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

import aiomqtt
import pytest
import structlog
from test_mqtt_relay import MemoryOutbox, broker, run_relay, settings, status

from tablesense.daemon.broker import MosquittoBroker
from tablesense.daemon.mqtt import SESSION_TASKS_STOP, MqttSettings, Relay
from tablesense.drivers.backoff import Backoff
from tablesense.drivers.waits import wait_at_most

pytestmark = pytest.mark.timeout(30)
__all__ = ["broker"]  # the fixture, imported for the reconnect test


def relay() -> tuple[Relay, MemoryOutbox]:
    outbox = MemoryOutbox()
    s = MqttSettings(host="127.0.0.1", port=1, table="t1", client_id="tablesense-t1", prefix="ts",
                     publish_timeout=5.0)
    return Relay(s, outbox, status), outbox


async def ended_by_cancel(task: asyncio.Task[Any], what: str) -> None:
    """The task must end cancelled (not go on, not return) within 2 s."""
    done, _ = await asyncio.wait({task}, timeout=2.0)
    if not done:
        task.cancel()  # once more, so the test itself does not hang
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 2.0)
        raise AssertionError(f"{what}: cancelled, but still running 2 s later (the cancellation was lost)")
    assert task.cancelled(), f"{what}: cancelled, but it returned {task.result()!r} as if never cancelled"


class HeldClient:
    """What the outbox task uses of the MQTT client: every publish stays unacknowledged."""

    def __init__(self) -> None:
        self.published: list[str] = []

    def start_publish(self, topic: str, payload: bytes, qos: int, retain: bool,
                      properties: object) -> asyncio.Future[None]:
        self.published.append(topic)
        return asyncio.get_running_loop().create_future()

    def write_now(self) -> None:
        pass


async def test_the_idle_outbox_task_ends_when_cancelled_as_new_rows_wake_it() -> None:
    r, outbox = relay()
    outbox.add("round", {"x": 1})
    client = HeldClient()
    task = asyncio.create_task(r._drain(client))  # type: ignore[arg-type]
    for _ in range(100):  # until it published the row and waits (for its PUBACK, or new rows)
        await asyncio.sleep(0.005)
    assert client.published and not task.done()
    r._wakeup.set()  # rows committed (notify) ...
    task.cancel()  # ... in the turn the session tears its tasks down
    await ended_by_cancel(task, "the outbox task")


async def test_waiting_for_the_head_acknowledgement_ends_when_cancelled_as_it_arrives() -> None:
    r, outbox = relay()
    row = outbox.add("round", {"x": 1})
    ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(r._settle_head(deque([(row, "ts/t1/round", ack)])))
    await asyncio.sleep(0.01)
    ack.set_result(None)  # the PUBACK ...
    task.cancel()  # ... and the teardown in one turn
    await ended_by_cancel(task, "waiting for the head's PUBACK")


async def test_waiting_for_a_replay_acknowledgement_ends_when_cancelled_as_it_arrives() -> None:
    r, _ = relay()
    ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(r._replay_settle("ts/t1/replay/x", ack))
    await asyncio.sleep(0.01)
    ack.set_result(None)
    task.cancel()
    await ended_by_cancel(task, "waiting for a replay's PUBACK")


async def test_the_reconnect_pause_ends_when_cancelled() -> None:
    r, _ = relay()
    r._backoff = Backoff(5.0, 10.0, floor=5.0)  # full jitter could otherwise end the pause at once
    task = asyncio.create_task(r._pause(None, False, False, 0.0))
    await asyncio.sleep(0.01)
    task.cancel()
    await ended_by_cancel(task, "the reconnect pause")


async def test_wait_at_most_keeps_a_cancellation_that_arrives_as_the_wait_completes() -> None:
    event = asyncio.Event()
    task = asyncio.create_task(wait_at_most(event.wait(), 10.0))
    await asyncio.sleep(0.01)
    event.set()
    task.cancel()
    await ended_by_cancel(task, "wait_at_most")


async def test_wait_at_most_times_out_returns_and_passes_errors_on() -> None:
    with pytest.raises(TimeoutError):
        await wait_at_most(asyncio.Event().wait(), 0.02)
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    fut.set_result(7)
    assert await wait_at_most(fut, 0.0) == 7  # ready: no wait needed
    pending: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await wait_at_most(asyncio.shield(pending), 0.0)
    assert not pending.cancelled()  # shielded: still running for whoever else waits
    failing: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    failing.set_exception(ValueError("x"))
    with pytest.raises(ValueError):
        await wait_at_most(failing, None)


async def test_the_clients_acknowledgement_wait_keeps_a_cancellation_too() -> None:
    """aiomqtt waits for CONNACK, SUBACK and PUBACK with ``asyncio.wait_for``; the relay's client does not."""
    from tablesense.daemon.mqtt import _AckClient
    client = _AckClient("127.0.0.1", 1, identifier="t")
    acked = asyncio.Event()
    task = asyncio.create_task(client._wait_for(acked.wait(), 10.0))
    await asyncio.sleep(0.01)
    acked.set()
    task.cancel()
    await ended_by_cancel(task, "the client's wait for an acknowledgement")
    with pytest.raises(Exception, match="timed out"):
        await client._wait_for(asyncio.Event().wait(), 0.01)


def test_no_loop_of_tablesense_waits_with_asyncio_wait_for() -> None:
    """Every bounded wait in the product goes through ``wait_at_most`` (the relay's was not the only loop:
    the links, the floor consumer and audit, the signage and floor pages' event streams)."""
    import ast
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    found = []
    for folder in ("daemon", "drivers", "simulators"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr == "wait_for" and \
                        isinstance(node.value, ast.Name) and node.value.id == "asyncio":
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == [], f"asyncio.wait_for (swallows a cancellation on Python 3.11) in {found}"


async def test_a_session_task_that_will_not_end_does_not_keep_the_relay_from_reconnecting(
        broker: MosquittoBroker) -> None:
    """Second line of defence: whatever a task of the session waits for, the relay reconnects (after
    :data:`SESSION_TASKS_STOP`) and says which task it left behind."""
    s = settings(broker, "cancel-stuck")
    r = Relay(s, MemoryOutbox(), status)
    release = asyncio.Event()

    async def stubborn_replayer(client: Any) -> None:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()

    r._replayer = stubborn_replayer  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as logs:
        task = await run_relay(r)
        try:
            assert r._client is not None
            r._client.force_close()  # the link dies: the session ends and cancels its tasks
            for _ in range(int((SESSION_TASKS_STOP + 5) / 0.02)):
                if r.connects >= 2 and r.connected:
                    break
                await asyncio.sleep(0.02)
            assert r.connects >= 2 and r.connected, "the relay did not reconnect"
        finally:
            release.set()
            await r.stop(task)
    [stuck] = [e for e in logs if e.get("event") == "relay_task_stuck"]
    assert stuck["log_level"] == "critical" and stuck["task"] == "mqtt-replay"


async def test_a_connection_closed_before_connack_fails_the_attempt_at_once() -> None:
    """A half-open attempt dropped when the network comes back (or a broker that closes before CONNACK)
    ends the attempt when the socket closes, not after the CONNACK timeout: the relay's next try is then
    only its backoff away (the dead-link test's bound, missed under load: 3 s of CONNACK wait + 5 s)."""
    from tablesense.daemon.mqtt import _AckClient

    async def accept_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)  # the CONNECT arrived; answer nothing, then drop the connection
        await asyncio.sleep(0.2)
        writer.transport.abort()

    server = await asyncio.start_server(accept_then_close, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = _AckClient("127.0.0.1", port, identifier="t", timeout=30.0)
    client._client.connect_timeout = 30.0
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(aiomqtt.MqttError, match="before CONNACK"):
            async with asyncio.timeout(20):  # without the fix: the 30 s CONNACK wait, cut here
                async with client:
                    pass
        assert loop.time() - started < 20
    finally:
        server.close()
        await server.wait_closed()
