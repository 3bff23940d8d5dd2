"""``tablesense simulate`` never ignores an option silently: ``simulate table`` deals the cards of
``--cards`` (in step with a real ``tablesense run`` over real ptys) and takes ``--heartbeat`` and a
``--decks``/``--via`` that agree with the config; every option it cannot honour (and every option that
does not apply to ``simulate shoe``/``pads``) is refused in one line naming it."""

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
        return int(s.getsockname()[1])


def _config(tmp_path: Path, game: str = "baccarat") -> tuple[Path, dict[str, str]]:
    urls = {"shoe": str(tmp_path / "ts" / "shoe"), "pads": str(tmp_path / "ts" / "pads")}
    config = tmp_path / "table.toml"
    config.write_text(sim_config_toml(game, urls=urls, host="127.0.0.1", port=_closed_port(),
                                      journal=tmp_path / "journal", table="sim-09"), encoding="utf-8")
    return config, urls


@pytest.mark.parametrize(("extra", "message"), [
    (["--fault", "garbage"], "--fault"),
    (["--via", "tcp"], "--via tcp"),
    (["--port", "4001"], "--port"),
    (["--link", "/tmp/x/shoe"], "--link"),
    (["--spots", "P1,P2"], "--spots"),
    (["--presence-only"], "--presence-only"),
    (["--start-now"], "--start-now"),
    (["--decks", "6"], "--decks 6"),
    (["--cards", "QH,QH,QH,QH,QH,QH,QH,QH,QH"], "--cards"),
    (["--cards", "4S,KD,5C,QH,2C"], "--cards"),
])
def test_simulate_table_refuses_what_it_cannot_honour(extra: list[str], message: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    config, _ = _config(tmp_path)
    assert main(["simulate", "table", "--config", str(config), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tablesense: simulate table: ") and message in err, err


@pytest.mark.parametrize(("argv", "message"), [
    (["shoe", "--spots", "P1"], "--spots is for the pads"),
    (["shoe", "--presence-only"], "--presence-only is for the pads"),
    (["pads", "--decks", "6"], "--decks is for the shoe"),
    (["shoe", "--port", "4001"], "--port is for --via tcp"),
    (["pads", "--via", "tcp", "--link", "/tmp/x/pads"], "--link is for --via pty"),
])
def test_simulate_device_refuses_options_that_do_not_apply(argv: list[str], message: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tablesense: simulate: ") and message in err, err


def _first_line(proc: subprocess.Popen[str], bound: float = 30.0) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(bound):
        raise AssertionError("no first line on stdout")
    return proc.stdout.readline().strip()


def test_simulate_table_deals_the_cards_of_a_file(tmp_path: Path) -> None:
    """``--cards FILE``: those cards, in order, then it stops (exit 0) when they are dealt."""
    config, urls = _config(tmp_path)
    coups = [["4S", "KD", "5C", "QH"], ["2C", "3D", "AH", "AS", "9C"], ["7H", "7S", "2D", "KC"]]
    script = tmp_path / "cards.txt"
    script.write_text("# three coups\n" + "\n".join(" ".join(c) for c in coups) + "\n", encoding="utf-8")
    sim = subprocess.Popen([str(TABLESENSE), "simulate", "table", "--config", str(config), "--cards",
                            str(script), "--pace", "0", "--decks", "8", "--via", "pty", "--heartbeat", "0.5"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    daemon = None
    try:
        assert _first_line(sim) == f"shoe {urls['shoe']} pads {urls['pads']}"
        daemon = subprocess.Popen([str(TABLESENSE), "run", "--config", str(config), "--log-level", "warning"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, sim_err = sim.communicate(timeout=90)  # ends by itself once the cards are dealt
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
    complete = [r for r in json.loads(out) if r["status"] == "complete"]
    assert [[c["card"] for c in r["cards"]] for r in complete] == coups
