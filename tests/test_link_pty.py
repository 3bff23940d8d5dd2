"""DeviceLink over real pseudo-terminals: pyserial + pyserial-asyncio-fast run for real.

The simulator writes on the pty master; the link opens the stable symlink to the slave with pyserial.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
import structlog
from link_support import expected_cards, running, running_link, wait_until
from structlog.testing import capture_logs

from tablesense.daemon.rules.cards import Card
from tablesense.drivers.events import CardDrawn, DeviceIdentity, LinkState, ShoeStatus, ShoeStatusKind
from tablesense.drivers.link import DeviceLink
from tablesense.drivers.protocols.tsref import encode
from tablesense.simulators.exposure import PtyExposure
from tablesense.simulators.runner import SimulatorRunner, script_program, shoe_program
from tablesense.simulators.shoe import VirtualShoe

pytestmark = pytest.mark.timeout(60)

# A baccarat round by the drawing rules: Player 2S 3H (5) draws, Banker KD 7C (7) stands on the
# Player's third card 9D.  Then a natural round: Player 4S 5C (9), Banker QH KC (0).
ROUND = ["2S", "KD", "3H", "7C", "9D", "4S", "QH", "5C", "KC"]


@pytest.fixture(autouse=True)
def _plain_structlog() -> None:
    structlog.reset_defaults()


def cards_of(items: list[CardDrawn]) -> list[str]:
    return [str(c.card) for c in items]


async def test_scripted_baccarat_round_arrives_in_order(tmp_path: object) -> None:
    shoe = VirtualShoe(decks=8, cards=ROUND)
    exposure = PtyExposure(directory=str(tmp_path))
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=2, loop_shoes=False), pace=0.01,
                             start_on_host=True)
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged, "pty created")
        async with running_link(exposure.address) as rec:
            await wait_until(lambda: runner.finished.is_set() and len(rec.cards) >= 9, "two rounds dealt")
            await rec.wait_state(LinkState.ONLINE)
    assert cards_of(rec.cards) == ROUND
    assert [c.seq for c in rec.cards] == [c.seq for c in expected_cards(shoe.history)]
    assert rec.of(DeviceIdentity)[0].serial == "VS-0001"
    assert ShoeStatusKind.NEW_SHOE in [s.kind for s in rec.of(ShoeStatus)]
    assert rec.link.stats.bad_checksum == 0 and rec.link.stats.seq_gaps == 0
    assert [s.state for s in rec.states][:2] == [LinkState.CONNECTING, LinkState.ONLINE]
    assert str(exposure.link).startswith(str(tmp_path))


async def test_unplug_and_replug_mid_round_loses_and_doubles_nothing(tmp_path: object) -> None:
    shoe = VirtualShoe(decks=8, seed=7)
    exposure = PtyExposure(directory=str(tmp_path))
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=3, loop_shoes=False), pace=0.02,
                             start_on_host=True, resend_window=4, heartbeat=None)
    with capture_logs() as logs:
        async with running(runner.run()):
            await wait_until(lambda: exposure.plugged, "pty created")
            async with running_link(exposure.address) as rec:
                # Unplug right after the second card of the first round left the shoe.
                await wait_until(lambda: sum(isinstance(e, CardDrawn) for e in shoe.history) >= 2,
                                 "two cards dealt")
                await runner.unplug()
                first_pty = exposure.pty_path
                await wait_until(lambda: rec.link.state is LinkState.DISCONNECTED, "link notices the unplug")
                await wait_until(lambda: rec.link.open_failures >= 2, "link retries while unplugged")
                await runner.replug()
                await wait_until(lambda: runner.finished.is_set(), "three rounds dealt")
                await wait_until(lambda: len(rec.cards) >= len(expected_cards(shoe.history)),
                                 "every card received")
                await asyncio.sleep(0.1)  # let any doubled frame arrive (it must not)
    sent = expected_cards(shoe.history)
    assert len(sent) >= 12  # three rounds of at least four cards
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in sent]
    assert rec.link.connects == 2
    assert rec.link.stats.duplicates >= 1  # the resent frames were recognised, not delivered twice
    assert rec.link.stats.seq_gaps == 0
    assert first_pty is None or isinstance(first_pty, str)
    lost = [entry for entry in logs if entry["event"] == "link.lost"]
    assert len(lost) == 1 and lost[0]["log_level"] == "warning"
    assert "disconnected" in lost[0]["cause"]
    retries = [entry for entry in logs if entry["event"] == "link.open_failed"]
    assert len([r for r in retries if r["log_level"] != "debug"]) == 1  # logged once, not per retry
    assert [s.state for s in rec.states].count(LinkState.ONLINE) == 2


async def test_partial_frame_at_open_is_dropped_not_misread(tmp_path: object) -> None:
    """Opening mid-frame: the tail of a frame without its start is garbage, never a card."""
    exposure = PtyExposure(directory=str(tmp_path))
    await exposure.start()
    try:
        half = encode(CardDrawn("shoe", 5, Card.parse("QH")))
        async with running_link(exposure.address) as rec:
            await rec.wait_state(LinkState.ONLINE)
            await wait_until(lambda: not exposure.from_host.empty(), "status request from the link")
            await exposure.write(half[7:])  # the host only sees the tail of frame 5
            for seq, text in ((6, "9D"), (7, "AS")):
                await exposure.write(encode(CardDrawn("shoe", seq, Card.parse(text))))
            await wait_until(lambda: len(rec.cards) >= 2, "the two whole frames")
        assert [(c.seq, str(c.card)) for c in rec.cards] == [(6, "9D"), (7, "AS")]
        assert rec.link.stats.garbage_bytes + rec.link.stats.malformed > 0
    finally:
        await exposure.close()


async def test_opening_mid_stream_yields_only_true_cards(tmp_path: object) -> None:
    shoe = VirtualShoe(decks=8, seed=11)
    exposure = PtyExposure(directory=str(tmp_path))
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe), pace=0.005, heartbeat=0.2)
    async with running(runner.run()):
        await wait_until(lambda: sum(isinstance(e, CardDrawn) for e in shoe.history) >= 20,
                         "the shoe is dealing before the host opens")
        async with running_link(exposure.address) as rec:
            await wait_until(lambda: len(rec.cards) >= 15, "fifteen cards after opening")
    sent = {c.seq: c.card for c in expected_cards(shoe.history)}
    got = [(c.seq, c.card) for c in rec.cards]
    assert all(sent.get(seq) == card for seq, card in got), "a card the shoe never sent"
    seqs = [seq for seq, _ in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert min(seqs) > min(sent)  # really opened mid-stream: the first cards were never seen


async def test_wrong_baud_gives_zero_cards_and_a_warning(tmp_path: object) -> None:
    shoe = VirtualShoe(decks=8, seed=3)
    exposure = PtyExposure(directory=str(tmp_path))
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe), pace=0.005, faults=["wrong-baud"],
                             start_on_host=True, heartbeat=0.2)
    with capture_logs() as logs:
        async with running(runner.run()):
            await wait_until(lambda: exposure.plugged, "pty created")
            async with running_link(exposure.address, stale_after=0.5) as rec:
                await wait_until(lambda: any(e["event"] == "link.no_valid_frames" for e in logs),
                                 "the no-valid-frames warning")
                await wait_until(lambda: sum(isinstance(e, CardDrawn) for e in shoe.history) >= 20,
                                 "twenty cards sent")
                await rec.wait_state(LinkState.STALE)
    assert rec.cards == []
    assert rec.link.stats.frames == 0
    warning = next(e for e in logs if e["event"] == "link.no_valid_frames")
    assert warning["log_level"] == "warning" and "baud" in warning["message"]


async def test_split_and_garbled_stream_delivers_every_card(tmp_path: object) -> None:
    shoe = VirtualShoe(decks=8, seed=5)
    exposure = PtyExposure(directory=str(tmp_path))
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=4, loop_shoes=False), pace=0.005,
                             faults=["split", "garbage", "repeat", "bad-checksum"], seed=9,
                             start_on_host=True, heartbeat=None)
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged, "pty created")
        async with running_link(exposure.address) as rec:
            await wait_until(lambda: runner.finished.is_set(), "four rounds dealt")
            await wait_until(lambda: len(rec.cards) >= len(expected_cards(shoe.history)), "every card")
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in expected_cards(shoe.history)]
    stats = rec.link.stats
    assert stats.bad_checksum > 0 and stats.duplicates > 0 and stats.garbage_bytes > 0


async def test_device_missing_at_start_is_logged_once_then_connects(tmp_path: object) -> None:
    exposure = PtyExposure(directory=str(tmp_path))
    shoe = VirtualShoe(decks=1, cards=["AS", "2S", "3S", "4S"])
    with capture_logs() as logs:
        async with running_link(exposure.address) as rec:
            await wait_until(lambda: rec.link.open_failures >= 5, "several failed opens")
            assert rec.link.state is LinkState.DISCONNECTED
            assert "no such device" in rec.link.detail
            runner = SimulatorRunner(shoe, exposure, script_program(shoe), pace=0.01, start_on_host=True)
            async with running(runner.run()):
                await wait_until(lambda: len(rec.cards) == 4, "the device appears and deals")
    failed = [e for e in logs if e["event"] == "link.open_failed"]
    loud = [e for e in failed if e["log_level"] == "warning"]
    assert len(loud) == 1 and len(failed) >= 5
    assert loud[0]["device"] == "shoe" and loud[0]["url"] == exposure.address
    assert "no such device" in loud[0]["message"] and exposure.address in loud[0]["message"]
    disconnected = [s for s in rec.states if s.state is LinkState.DISCONNECTED and s.detail != "stopped"]
    assert len(disconnected) == 1  # one state message for the whole outage, not one per retry
    assert cards_of(rec.cards) == ["AS", "2S", "3S", "4S"]


async def test_a_link_that_never_comes_up_keeps_trying_and_never_exits(tmp_path: object) -> None:
    url = str(tmp_path) + "/no-such-shoe"
    async with running_link(url) as rec:
        await wait_until(lambda: rec.link.open_failures >= 8, "eight attempts")
        assert rec.task is not None and not rec.task.done()
    assert rec.task.cancelled()
    assert rec.states[-1].detail == "stopped"


async def test_second_reader_of_the_same_port_is_refused_as_busy(tmp_path: object) -> None:
    exposure = PtyExposure(directory=str(tmp_path))
    await exposure.start()
    try:
        with capture_logs() as logs:
            async with running_link(exposure.address) as first:
                await first.wait_state(LinkState.ONLINE)
                async with running_link(exposure.address, name="shoe2") as second:
                    await wait_until(lambda: second.link.open_failures >= 2, "second link refused")
                    assert second.link.state is LinkState.DISCONNECTED
                    assert "busy" in second.link.detail
        loud = [e for e in logs if e["event"] == "link.open_failed" and e["log_level"] == "warning"]
        assert len(loud) == 1 and loud[0]["device"] == "shoe2" and loud[0]["kind"] == "busy"
    finally:
        await exposure.close()


async def test_stale_link_asks_for_status_and_recovers(tmp_path: object) -> None:
    shoe = VirtualShoe(decks=1, cards=["AS"])
    exposure = PtyExposure(directory=str(tmp_path))
    # The device says who it is and then goes quiet (no heartbeats): the link goes stale, asks for
    # status, the device answers and the link is online again.
    runner = SimulatorRunner(shoe, exposure, iter([(shoe.identity(), 0)]), pace=0, heartbeat=None)
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged, "pty created")
        async with running_link(exposure.address, stale_after=0.3, status_on_connect=False) as rec:
            await wait_until(lambda: any(s.state is LinkState.STALE for s in rec.states), "stale")
            await wait_until(lambda: len(rec.of(DeviceIdentity)) >= 1, "identity in answer to the request")
            await rec.wait_state(LinkState.ONLINE)
    states = [s.state for s in rec.states]
    assert states.index(LinkState.STALE) < len(states) - 1
    assert states[states.index(LinkState.STALE) + 1] is LinkState.ONLINE
    assert rec.link.connects == 1


async def test_acks_and_status_requests_reach_the_device(tmp_path: object) -> None:
    shoe = VirtualShoe(decks=1, cards=["AS", "KH"])
    exposure = PtyExposure(directory=str(tmp_path))
    runner = SimulatorRunner(shoe, exposure, script_program(shoe), pace=0.01, start_on_host=True)
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged, "pty created")
        async with running_link(exposure.address, auto_ack=True) as rec:
            await wait_until(lambda: len(rec.cards) == 2, "both cards")
            await wait_until(lambda: rec.cards[-1].seq in shoe.acked, "ack of the last card")
    assert [c.seq for c in rec.cards] == [s for s in shoe.acked if s in {c.seq for c in rec.cards}]


class _LowestDraw(random.Random):
    """A random source that records every ``uniform(a, b)`` window asked for and answers ``a``."""

    def __init__(self) -> None:
        super().__init__(0)
        self.windows: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.windows.append((a, b))
        return a


async def test_reconnect_uses_the_shared_full_jitter_backoff(tmp_path: Any) -> None:
    """A device that cannot be opened is retried with drivers.backoff.Backoff: after the n-th failure a
    delay drawn from the whole window [0, min(backoff_max, backoff_initial * 2 ** (n - 1))] (full
    jitter, as the module docstring and docs/devices.md say). The link's own equal-jitter copy drew
    from [c/2, c] (it asked for the window (0, c/2) and added c/2), so this failed with it."""
    rng = _LowestDraw()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    link = DeviceLink("shoe", str(tmp_path / "absent-shoe"), "tsref", queue=queue,
                      backoff_initial=0.5, backoff_max=2.0, rng=rng)
    task = asyncio.create_task(link.run())
    try:
        await wait_until(lambda: len(rng.windows) >= 6, "six failed opens")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert rng.windows[:6] == [(0.0, 0.5), (0.0, 1.0), (0.0, 2.0), (0.0, 2.0), (0.0, 2.0), (0.0, 2.0)]
    assert link.open_failures >= 6 and link.state is LinkState.DISCONNECTED


def test_backoff_bounds_are_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="backoff"):
        DeviceLink("shoe", "/dev/null", "tsref", queue=asyncio.Queue(), backoff_initial=2.0, backoff_max=1.0)


def test_unknown_protocol_is_refused_at_construction() -> None:
    from tablesense.drivers.protocols import UnknownProtocol

    with pytest.raises(UnknownProtocol, match="nope"):
        DeviceLink("shoe", "/dev/null", "nope", queue=asyncio.Queue())


async def test_periodic_unplug_fault_with_acks_loses_and_doubles_nothing(tmp_path: object) -> None:
    """The ``unplug`` fault replugs repeatedly; the host acknowledges, so the device resends exactly
    what came after the last acknowledged frame."""
    shoe = VirtualShoe(decks=8, seed=13)
    exposure = PtyExposure(directory=str(tmp_path))
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=4, loop_shoes=False), pace=0.02,
                             faults=["unplug"], unplug_every=0.25, unplug_for=0.1, start_on_host=True,
                             heartbeat=None)
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged, "pty created")
        async with running_link(exposure.address, auto_ack=True) as rec:
            await wait_until(lambda: runner.finished.is_set(), "four rounds dealt")
            await wait_until(lambda: len(rec.cards) >= len(expected_cards(shoe.history)), "every card")
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in expected_cards(shoe.history)]
    assert rec.link.connects >= 3  # it really was unplugged more than once
    assert rec.link.stats.seq_gaps == 0
    assert shoe.acked  # the acknowledgements reached the device


def test_permission_denied_names_the_device_and_the_cause(tmp_path: Any) -> None:
    """A user without access to the tty (not in its group) gets one clear line: permission denied."""
    import os
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("needs root to run the probe as another user")
    master, slave = os.openpty()
    try:
        path = os.ttyname(slave)
        os.chmod(path, 0o600)  # owned by root, no access for others (like a tty outside dialout)
        probe = ("import asyncio\nfrom tablesense.drivers.transports import OpenError, open_transport\n"
                 "async def main():\n"
                 f"    try:\n        await open_transport({path!r})\n"
                 "    except OpenError as exc:\n        print(exc.kind, '|', exc)\n"
                 "asyncio.run(main())\n")
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                user=65534, group=65534, extra_groups=[])
    finally:
        os.close(slave)
        os.close(master)
    assert result.returncode == 0, result.stderr
    kind, _, text = result.stdout.strip().partition(" | ")
    assert kind == "permission"
    assert text.startswith(f"cannot open {path}: permission denied")
