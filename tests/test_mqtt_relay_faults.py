"""The relay under faults of its own, against a real Mosquitto the test owns (docs/reliability.md):

* the journal cannot record acknowledgements (``mark_delivered`` raises ``JournalUnwritable``, as on a
  full disk): publishing goes on, one critical ``journal_mark_failed`` line, the unmarked rows are
  published again with the same ``msg_id`` by the next relay, and marking resumes when the disk does;
* an unexpected exception in the relay: logged at critical (``relay_crashed``), the relay starts over and
  delivers everything; it is never silently dead;
* :meth:`Relay.stop` with a relay task that died of an exception logs it and returns;
* :meth:`Relay.republish_status` puts the current status on the retained topic while connected.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog
from test_mqtt_relay import MemoryOutbox, Row, Subscriber, run_relay, settings, status

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.journal import JournalUnwritable
from tablesense.daemon.mqtt import Relay

pytestmark = pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = MosquittoBroker(tmp_path_factory.mktemp("mosq-faults") / "b")
    b.start()
    yield b
    b.stop()


class FullDiskOutbox(MemoryOutbox):
    """``mark_delivered`` fails as the journal's does on a full disk while ``full`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.full = True
        self.mark_attempts = 0

    def mark_delivered(self, row_id: int) -> None:
        self.mark_attempts += 1
        if self.full:
            raise JournalUnwritable("mark_delivered: database or disk is full")
        super().mark_delivered(row_id)


class FlakyOutbox(MemoryOutbox):
    """``pending`` raises an unexpected error the first ``failures`` times (a bug, not an MQTT error)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def pending(self, limit: int, after_row: int) -> list[Row]:
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("unexpected failure in the outbox")
        return super().pending(limit, after_row)


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e.get("event") == name]


def ids(sub: Subscriber, topic: str) -> list[str]:
    return [str(b["msg_id"]) for t, b, _ in sub.messages if t == topic]


async def test_relay_keeps_publishing_when_marks_cannot_be_written(broker: MosquittoBroker) -> None:
    out = FullDiskOutbox()
    for i in range(40):  # more than the relay's in-flight window (32)
        out.add("settlements", {"n": i})
    topic = "ts/F1/settlements"
    async with Subscriber(broker, "ts/F1/#", "sub-F1") as sub:
        with structlog.testing.capture_logs() as logs:
            relay = Relay(settings(broker, "F1"), out, status)
            task = await run_relay(relay)
            await sub.wait_for(lambda ms: len(ids(sub, topic)) >= 40)
            assert ids(sub, topic) == [f"m{n}" for n in range(1, 41)]
            assert not task.done(), "the relay died on a journal that cannot be written"
            assert out.delivered == set() and relay.mark_failures == 40 and relay.delivered == 0
            failed = events(logs, "journal_mark_failed")
            assert len(failed) == 1 and failed[0]["log_level"] == "critical"  # once, not per row

            out.full = False  # space again: new rows are published and marked
            for i in range(40, 45):
                out.add("settlements", {"n": i})
            relay.notify()
            await sub.wait_for(lambda ms: len(ids(sub, topic)) >= 45)
            for _ in range(500):  # the recovery is logged once the marks' recording returns
                if out.delivered == {41, 42, 43, 44, 45} and events(logs, "journal_mark_recovered"):
                    break
                await asyncio.sleep(0.01)
            assert out.delivered == {41, 42, 43, 44, 45}
            assert len(events(logs, "journal_mark_recovered")) == 1
            assert len(events(logs, "journal_mark_failed")) == 1
            await relay.stop(task)

        # The next relay (a reconnect or restart) publishes the 40 unmarked rows again, same msg_ids.
        again = Relay(settings(broker, "F1"), out, status)
        task = await run_relay(again)
        await sub.wait_for(lambda ms: len(ids(sub, topic)) >= 85)
        await again.stop(task)
    received = ids(sub, topic)
    assert received[45:] == [f"m{n}" for n in range(1, 41)]
    assert set(received) == {f"m{n}" for n in range(1, 46)}
    assert out.delivered == set(range(1, 46))


async def test_relay_restarts_after_an_unexpected_exception(broker: MosquittoBroker) -> None:
    out = FlakyOutbox(failures=2)
    for i in range(10):
        out.add("settlements", {"n": i})
    async with Subscriber(broker, "ts/F2/#", "sub-F2") as sub:
        with structlog.testing.capture_logs() as logs:
            relay = Relay(settings(broker, "F2"), out, status)
            task = asyncio.create_task(relay.run())
            await sub.wait_for(lambda ms: len(ids(sub, "ts/F2/settlements")) >= 10)
            assert not task.done()
            await relay.stop(task)
    assert ids(sub, "ts/F2/settlements") == [f"m{n}" for n in range(1, 11)]
    assert out.delivered == set(range(1, 11))
    assert relay.crashes == 2 and relay.connects == 3
    crashed = events(logs, "relay_crashed")
    assert len(crashed) == 2 and all(e["log_level"] == "critical" for e in crashed)
    assert "unexpected failure in the outbox" in crashed[0]["error"]


async def test_stop_logs_a_dead_relay_task_and_returns(broker: MosquittoBroker) -> None:
    relay = Relay(settings(broker, "F3"), MemoryOutbox(), status)

    async def died() -> None:
        raise RuntimeError("relay bug")

    task = asyncio.create_task(died())
    await asyncio.sleep(0)
    with structlog.testing.capture_logs() as logs:
        await relay.stop(task, stop_timeout=1.0)  # must not raise: the rest of the shutdown must run
    failed = events(logs, "relay_task_failed")
    assert len(failed) == 1 and failed[0]["log_level"] == "critical" and "relay bug" in failed[0]["error"]


async def test_republish_status_while_connected(broker: MosquittoBroker) -> None:
    detail = {"text": ""}

    def status_with_detail(state: str) -> bytes:
        import json
        return json.dumps({"schema": "table_status", "state": state, "detail": detail["text"]}).encode()

    relay = Relay(settings(broker, "F4"), MemoryOutbox(), status_with_detail)
    relay.republish_status()  # not connected: nothing to do, no error
    async with Subscriber(broker, "ts/F4/status", "sub-F4") as sub:
        task = await run_relay(relay)
        await sub.wait_for(lambda ms: any(b.get("state") == "online" for _, b, _ in ms))
        detail["text"] = "journal failure, settling stopped: disk full"
        relay.republish_status()
        await sub.wait_for(lambda ms: any("disk full" in str(b.get("detail")) for _, b, _ in ms))
        assert relay.connects == 1  # published on the live connection, not at a reconnect
        detail["text"] = ""
        relay.republish_status()
        await sub.wait_for(lambda ms: ms[-1][1].get("detail") == "" and ms[-1][1].get("state") == "online")
        await relay.stop(task)
    states = [(b["state"], b["detail"]) for _, b, _ in sub.messages]
    first_failure = states.index(("online", "journal failure, settling stopped: disk full"))
    assert ("online", "") in states[first_failure + 1:]
    assert states[-1][0] == "offline"


class BuggyMarkOutbox(MemoryOutbox):
    """``mark_delivered`` raises an unexpected error (a bug, not a JournalError) once, for row ``bad``."""

    def __init__(self, bad: int) -> None:
        super().__init__()
        self.bad = bad
        self.marks: list[int] = []

    def mark_delivered(self, row_id: int) -> None:
        if row_id == self.bad and self.bad not in self.marks:
            self.marks.append(row_id)
            raise RuntimeError("unexpected failure marking a row")
        self.marks.append(row_id)
        super().mark_delivered(row_id)


async def test_unexpected_mark_failure_in_a_burst_counts_the_rows_before_it(broker: MosquittoBroker) -> None:
    """Acknowledgements of a burst are marked in one worker-thread call; an unexpected exception on one
    row still counts the rows marked before it, ends the session (``relay_crashed``), and the next
    session publishes the unmarked rows again and marks them, in row order."""
    out = BuggyMarkOutbox(bad=5)
    for i in range(12):
        out.add("settlements", {"n": i})
    async with Subscriber(broker, "ts/F4/#", "sub-F4") as sub:
        with structlog.testing.capture_logs() as logs:
            relay = Relay(settings(broker, "F4"), out, status)
            task = asyncio.create_task(relay.run())
            await sub.wait_for(lambda ms: len(ids(sub, "ts/F4/settlements")) >= 20)
            for _ in range(500):
                if out.delivered == set(range(1, 13)):
                    break
                await asyncio.sleep(0.01)
            await relay.stop(task)
    assert out.marks == [1, 2, 3, 4, 5, *range(5, 13)]  # row order; 5 failed once, then 5..12 again
    assert out.delivered == set(range(1, 13))
    assert relay.crashes == 1 and relay.delivered == 12  # rows 1-4 counted although row 5 raised
    assert "unexpected failure marking a row" in events(logs, "relay_crashed")[0]["error"]
    got = ids(sub, "ts/F4/settlements")
    assert got == [f"m{n}" for n in range(1, 13)] + [f"m{n}" for n in range(5, 13)]
