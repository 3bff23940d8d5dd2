"""What a newcomer following README.md met on the command line: ``analyze`` split a house edge over two
lines, help texts showed ``%%`` and reST markup, and ``monitor`` showed nothing when its output was not
a terminal and printed no summary when stopped by SIGTERM."""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.cli import build_parser, main
from tablesense.daemon.messages import TableStatus, encode_message

TABLESENSE = Path(sys.executable).parent / "tablesense"


def test_analyze_prints_each_house_edge_whole_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The Tie table (8 to 1, 14.3596 %) is narrower than its summary; as a rich table caption the
    summary was wrapped to the table's width and the ``%`` landed alone on the next line."""
    assert main(["analyze", "--game", "baccarat", "--decks", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "expected return -0.143596 per unit staked, house edge 14.3596 %" in lines
    edges = [line for line in lines if "house edge" in line]
    assert len(edges) == 8  # player, banker, tie, dragon x2, perfect pairs x2, house money
    assert all(line.rstrip().endswith(" %") for line in edges)
    assert not [line for line in lines if line.strip() == "%"]


def _help_texts() -> Iterator[tuple[str, str]]:
    parser = build_parser()
    yield "tablesense", parser.format_help()
    stack: list[tuple[str, argparse.ArgumentParser]] = [("tablesense", parser)]
    while stack:
        name, p = stack.pop()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    full = f"{name} {sub_name}"
                    yield full, sub.format_help()
                    stack.append((full, sub))


def test_no_help_text_shows_format_escapes_or_rest_markup() -> None:
    """``floor report --help`` said ``hold %%`` (argparse does not %-format a description) and
    ``schemas --help`` showed the module docstring's ````tablesense schemas````."""
    texts = dict(_help_texts())
    assert {"tablesense floor report", "tablesense schemas", "tablesense analyze"} <= set(texts)
    assert "hold % and" in " ".join(texts["tablesense floor report"].split())
    bad = {name: text for name, text in texts.items() if "%%" in text or "``" in text}
    assert bad == {}


# --- monitor ------------------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    if mosquitto_binary() is None:
        pytest.skip("the mosquitto binary is not installed")
    b = MosquittoBroker(tmp_path / "broker", persistence=False)
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _publish_retained_status(b: MosquittoBroker, prefix: str, table: str) -> None:
    status = TableStatus(table=table, ts="2026-12-01T12:00:00Z", state="online", software="0.1.0")
    subprocess.run(["mosquitto_pub", "-h", b.host, "-p", str(b.port), "-q", "1", "-r",
                    "-t", f"{prefix}/{table}/status", "-s"], input=encode_message(status), check=True,
                   timeout=10)


def _read_until(proc: subprocess.Popen[bytes], needle: bytes, timeout: float) -> bytes:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    got = b""
    deadline = time.monotonic() + timeout
    while needle not in got and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            got += chunk
    return got


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_monitor_into_a_pipe_prints_lines_and_its_summary_when_stopped(broker: MosquittoBroker,
                                                                      sig: signal.Signals) -> None:
    """Piped (no terminal) and without ``--no-ui``, the monitor printed nothing while it ran (a rich
    live view off a terminal draws only at the end), and SIGTERM killed it without that end: the
    output stayed empty. Now it prints plain lines off a terminal and ends on SIGTERM/SIGHUP as on
    Ctrl-C, with the summary and status 0."""
    prefix, table = "ts-newcomer", "nc-1"
    _publish_retained_status(broker, prefix, table)
    proc = subprocess.Popen([str(TABLESENSE), "monitor", "--broker", f"{broker.host}:{broker.port}",
                             "--prefix", prefix, "--table", table],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        seen = _read_until(proc, b"status online", 20)
        assert f"[{table}] status online".encode() in seen
        proc.send_signal(sig)
        rest, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert f"table {table} (".encode() in seen + rest  # the summary
    assert b"Traceback" not in err


def test_settle_tells_a_blackjack_wager_with_a_box_as_hand_to_name_no_hand(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A blackjack wager with ``"hand": "1"`` (the box) was told "(player, banker or null)", the
    baccarat hands only; docs/rules-blackjack-uth.md gives blackjack and uth wagers no hand at all."""
    import io
    import json

    doc = {"game": "blackjack", "decks": 6,
           "wagers": [{"spot": "1", "bet": "perfect_pairs", "hand": "1", "stake": 500}],
           "hands": {"1": ["QH", "QD"], "dealer": ["5C"]}}
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(doc)))
    assert main(["settle", "-"]) == 2
    err = capsys.readouterr().err
    assert "wagers[0].hand: unknown hand '1'" in err
    assert "blackjack and uth wagers name no hand" in err
    assert len(err.strip().splitlines()) == 1
