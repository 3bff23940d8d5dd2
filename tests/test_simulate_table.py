"""``tablesense simulate table``: a shoe and pads dealt in step with a separately started daemon
(README's one-machine recipe), real processes over real ptys: every round completes and settles with no
PAST_POSTING, UNEXPECTED_BUTTON or SEQUENCE_GAP alarm."""

from __future__ import annotations

import json
import selectors
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tablesense.daemon.cli import main
from tablesense.simulators.dealer import sim_config_toml

pytestmark = pytest.mark.timeout(120)
TABLESENSE = Path(sys.executable).with_name("tablesense")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once closed: the daemon keeps retrying


def _first_line(proc: subprocess.Popen[str], bound: float = 30.0) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(bound):
        raise AssertionError("no first line on stdout")
    return proc.stdout.readline().strip()


def test_simulate_table_deals_in_step_with_tablesense_run(tmp_path: Path) -> None:
    devices = tmp_path / "ts"  # does not exist yet: simulate table creates it
    urls = {"shoe": str(devices / "shoe"), "pads": str(devices / "pads")}
    config = tmp_path / "table.toml"
    config.write_text(sim_config_toml("baccarat", urls=urls, host="127.0.0.1", port=_closed_port(),
                                      journal=tmp_path / "journal", table="sim-01"), encoding="utf-8")
    sim = subprocess.Popen([str(TABLESENSE), "simulate", "table", "--config", str(config), "--rounds", "4",
                            "--pace", "0", "--seed", "5"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    daemon = None
    try:
        assert _first_line(sim) == f"shoe {urls['shoe']} pads {urls['pads']}"
        daemon = subprocess.Popen([str(TABLESENSE), "run", "--config", str(config), "--log-level", "warning"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, sim_err = sim.communicate(timeout=90)  # ends by itself after the four rounds
        assert sim.returncode == 0, sim_err
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.wait()
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=15)
    out = subprocess.run([str(TABLESENSE), "recall", "--journal", str(tmp_path / "journal"), "--json"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    records = json.loads(out)
    complete = [r for r in records if r["status"] == "complete"]
    assert len(complete) == 4, [r["status"] for r in records]
    assert all(r["settlements"] for r in complete)
    codes = {a["code"] for r in records for a in r["alarms"]}
    assert not codes & {"PAST_POSTING", "UNEXPECTED_BUTTON", "SEQUENCE_GAP"}, codes


def _floor_records(journal: Path) -> int:
    """Floor records the (sealed) journal holds so far; 0 while it cannot be read yet."""
    from journal_support import sealed_rows

    from tablesense.daemon.journal.seal import MessageRow

    if not (journal / "journal.sqlite").exists():
        return 0
    try:
        return sum(1 for r in sealed_rows(journal)
                   if isinstance(r, MessageRow) and r.channel == "floor/rounds")
    except Exception:  # the daemon is creating it, or killed mid-way: not readable yet
        return 0


def test_simulate_table_survives_a_daemon_sigkill(tmp_path: Path) -> None:
    """Defect: ``simulate table`` never resent an unacknowledged frame; after one SIGKILL of the daemon it
    exited ("did not acknowledge a frame within 30 s"). Now its devices resend, it waits for the restarted
    daemon, and every round is journaled exactly once (each floor record one valid coup)."""
    import time

    from tablesense.daemon.rules.baccarat import next_card_hand
    from tablesense.daemon.rules.cards import Card

    devices = tmp_path / "ts"
    urls = {"shoe": str(devices / "shoe"), "pads": str(devices / "pads")}
    config = tmp_path / "table.toml"
    journal = tmp_path / "journal"
    config.write_text(sim_config_toml("baccarat", urls=urls, host="127.0.0.1", port=_closed_port(),
                                      journal=journal, table="sim-02"), encoding="utf-8")
    sim = subprocess.Popen([str(TABLESENSE), "simulate", "table", "--config", str(config), "--rounds", "8",
                            "--pace", "0.05", "--seed", "9"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = [str(TABLESENSE), "run", "--config", str(config), "--log-level", "warning"]
    daemon = None
    try:
        assert _first_line(sim) == f"shoe {urls['shoe']} pads {urls['pads']}"
        daemon = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while _floor_records(journal) < 2:
            assert time.monotonic() < deadline and sim.poll() is None, "two rounds never completed"
            time.sleep(0.02)
        time.sleep(0.13)  # into the third round
        daemon.kill()
        assert daemon.wait(timeout=10) == -9
        time.sleep(2.5)  # the devices resend meanwhile: into a port nobody has open
        assert sim.poll() is None, "simulate table gave up while the daemon was down"
        daemon = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, sim_err = sim.communicate(timeout=90)
        assert sim.returncode == 0, sim_err
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.wait()
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=15)
    out = subprocess.run([str(TABLESENSE), "recall", "--journal", str(journal), "--json", "--last", "20"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    records = json.loads(out)
    complete = [r for r in records if r["status"] == "complete"]
    assert len(complete) == 8, [r["status"] for r in records]
    for r in complete:
        cards = [Card.parse(c["card"]) for c in r["cards"]]
        assert all(c["status"] == "dealt" for c in r["cards"]), r["cards"]
        assert next_card_hand(cards) is None and all(next_card_hand(cards[:k]) is not None
                                                     for k in range(len(cards))), "not one coup"
    codes = {a["code"] for r in records for a in r["alarms"]}
    assert codes <= {"CUT_CARD", "ADVANTAGE_PLAY", "DEVICE_LOST"}, codes  # lost: simulate ended first


@pytest.mark.parametrize(("extra", "message"), [
    ("", "--config FILE is required"),
    ("socket", "is not a path"),
    ("face_value", "[burn] mode is 'face_value'"),
])
def test_simulate_table_user_errors(extra: str, message: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "table"]
    if extra:
        urls = {"shoe": "socket://127.0.0.1:1" if extra == "socket" else str(tmp_path / "shoe"),
                "pads": str(tmp_path / "pads")}
        text = sim_config_toml("baccarat", urls=urls, host="127.0.0.1", port=1, journal=tmp_path / "j")
        if extra == "face_value":
            text = text.replace('mode = "shoe"', 'mode = "face_value"')
        (tmp_path / "t.toml").write_text(text, encoding="utf-8")
        argv += ["--config", str(tmp_path / "t.toml")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tablesense: simulate table: ") and message in err, err
