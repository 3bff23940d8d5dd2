"""``tablesense simulate`` / ``capture`` / ``replay``: real processes, real ptys, and the error lines."""

from __future__ import annotations

import asyncio
import io
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import structlog
from link_support import expected_cards, running, running_link, wait_until

from tablesense.daemon.cli import main
from tablesense.daemon.commands.capture import capture
from tablesense.drivers.events import CardDrawn
from tablesense.drivers.protocols.tsref import TsrefCodec, encode
from tablesense.simulators.capture_format import loads
from tablesense.simulators.exposure import PtyExposure
from tablesense.simulators.runner import SimulatorRunner, shoe_program
from tablesense.simulators.shoe import VirtualShoe

pytestmark = pytest.mark.timeout(90)
TABLESENSE = Path(sys.executable).with_name("tablesense")


@pytest.fixture(autouse=True)
def _plain_structlog() -> None:
    structlog.reset_defaults()


def _first_line(proc: subprocess.Popen[str], bound: float = 30.0) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(bound):
        raise AssertionError("no first line on stdout")
    return proc.stdout.readline().strip()


async def test_capture_records_every_byte_and_replay_plays_it_back(tmp_path: Path) -> None:
    shoe = VirtualShoe(decks=8, seed=41)
    exposure = PtyExposure(directory=tmp_path)
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=2, loop_shoes=False), pace=0.005,
                             start_on_host=True, heartbeat=None)
    out = io.StringIO()
    stop = asyncio.Event()
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged, "pty")
        job = asyncio.create_task(capture(exposure.address, out, seconds=None, baud=9600, device="shoe",
                                          protocol="tsref", notes="two rounds", poke=True, stop=stop))
        await wait_until(lambda: runner.finished.is_set(), "two rounds dealt")
        sent = b"".join(encode(e) for e in shoe.history)
        await wait_until(lambda: len(loads(out.getvalue()).data) >= len(sent), "every byte captured")
        stop.set()
        chunks, size, why = await job
    cap = loads(out.getvalue())
    assert (cap.device, cap.protocol, cap.notes, why) == ("shoe", "tsref", "two rounds", "stopped")
    assert chunks == len(cap.chunks) and size == len(cap.data) > 0
    assert cap.meta["source"] == exposure.address and cap.meta["serial"] == "9600 8N1"
    assert [c.offset for c in cap.chunks] == sorted(c.offset for c in cap.chunks)
    assert TsrefCodec("shoe").feed(cap.data) == shoe.history  # every frame the shoe sent, nothing else
    assert len(expected_cards(shoe.history)) >= 8

    path = tmp_path / "two-rounds.cap"
    path.write_text(out.getvalue(), encoding="utf-8")
    link_path = tmp_path / "replayed"
    proc = subprocess.Popen([str(TABLESENSE), "replay", str(path), "--speed", "0", "--link", str(link_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _first_line(proc) == str(link_path)
        async with running_link(str(link_path)) as rec:
            await wait_until(lambda: len(rec.cards) == len(expected_cards(shoe.history)), "replayed cards")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=15)
    assert code == 0
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in expected_cards(shoe.history)]
    assert not link_path.exists()


def test_simulate_pads_over_tcp_prints_url_first_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen([str(TABLESENSE), "simulate", "pads", "--via", "tcp", "--pace", "0.01",
                             "--seed", "2", "--start-now", "--spots", "P1,P2,banker"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        url = _first_line(proc)
        assert url.startswith("socket://127.0.0.1:")

        async def read_some() -> list[object]:
            async with running_link(url, name="pads") as rec:
                await wait_until(lambda: len(rec.events) >= 6, "pad events")
            return rec.events

        events = asyncio.run(read_some())
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=15)
    assert code == 0
    assert {type(e).__name__ for e in events} & {"SpotChanged", "DealerButton", "DeviceIdentity"}


def test_simulate_scripted_cards_from_a_file(tmp_path: Path) -> None:
    """Also: ``--link`` in a directory that does not exist yet creates it (mode 0700), as README's
    one-machine recipe (``--link /tmp/ts/shoe``) expects."""
    script = tmp_path / "round.txt"
    script.write_text("# a natural for the Player\n4S KD 5C\nQH\n", encoding="utf-8")
    proc = subprocess.Popen([str(TABLESENSE), "simulate", "shoe", "--cards", str(script), "--pace", "0.01",
                             "--link", str(tmp_path / "ts" / "shoe")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = _first_line(proc)
        assert path == str(tmp_path / "ts" / "shoe")
        assert os.path.realpath(path).startswith("/dev/pts/")
        assert (tmp_path / "ts").stat().st_mode & 0o777 == 0o700

        async def read_cards() -> list[str]:
            async with running_link(path) as rec:
                await wait_until(lambda: len(rec.cards) == 4, "the four scripted cards")
            return [str(c.card) for c in rec.of(CardDrawn)]

        cards = asyncio.run(read_cards())
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=15)
    assert code == 0
    assert cards == ["4S", "KD", "5C", "QH"]


@pytest.mark.parametrize(("argv", "message"), [
    (["simulate", "dice"], "unknown device 'dice'"),
    (["simulate", "shoe", "--decks", "9"], "--decks must be 1 to 8"),
    (["simulate", "shoe", "--pace", "fast"], "--pace must be a number"),
    (["simulate", "shoe", "--via", "usb"], "choose pty or tcp"),
    (["simulate", "shoe", "--fault", "gremlins"], "unknown fault 'gremlins'"),
    (["simulate", "shoe", "--cards", "QH,QH,QH", "--decks", "2"], "--cards"),
    (["simulate", "shoe", "--cards", "/no/such/file.txt"], "no such file"),
    (["simulate", "pads", "--spots", "A,A"], "duplicate spot"),
    (["simulate", "shoe", "--link", "afile/shoe"], "cannot create directory afile"),
    (["capture", "/dev/no-such-shoe", "--out", "x.cap"], "cannot open /dev/no-such-shoe: no such device"),
    (["capture", "/dev/null"], "--out FILE is required"),
    (["capture", "/dev/null", "--out", "x.cap", "--seconds", "-1"], "must be positive"),
    (["replay", "missing.cap"], "cannot read missing.cap"),
    (["replay", "x.cap", "--speed", "-2"], "--speed must be >= 0"),
])
def test_user_errors_are_one_line_exit_2(argv: list[str], message: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("not a directory")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tablesense: ") and message in err, err


def test_replay_rejects_a_broken_capture_naming_the_line(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.cap"
    bad.write_text("# tablesense-capture 1\n# device: shoe\n# protocol: tsref\n+0.5 2443\n+0.1 zz\n")
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:5" in err and err.count("\n") == 1
