"""`tablesense demo` end to end (in-process, as the command runs it): with Mosquitto, and with the
in-process amqtt fallback (MQTT 3.1.1) used when no mosquitto binary is installed."""

from __future__ import annotations

import io
import re

import pytest

import tablesense.daemon.broker
from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.cli import main
from tablesense.daemon.commands.demo import run_demo


@pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")
def test_demo_command_plain_output_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-ui", "--rounds", "6", "--seed", "11", "--game", "baccarat"]) == 0
    out = capsys.readouterr().out
    rounds = re.findall(r"^\[demo-baccarat\] round 1/(\d+) P .* -> (player|banker|tie)", out, re.M)
    assert [int(n) for n, _ in rounds] == [1, 2, 3, 4, 5, 6]
    settles = re.findall(r"^\[demo-baccarat\] settle r\d+ .* net ([+-]?\d+\.\d\d)", out, re.M)
    summary = re.search(r"^table demo-baccarat \(baccarat\): 6 rounds settled, 0 void, (\d+) settlements",
                        out, re.M)
    assert summary is not None and int(summary.group(1)) == len(settles) > 0
    net = re.search(r"players' net over all wagers: ([+-]?\d+\.\d\d)", out)
    assert net is not None
    assert cents(net.group(1)) == sum(cents(x) for x in settles)


def cents(text: str) -> int:
    """"+12.34" -> 1234, "-0.50" -> -50 (no floats)."""
    sign = -1 if text.startswith("-") else 1
    whole, frac = text.lstrip("+-").split(".")
    return sign * (int(whole) * 100 + int(frac))


async def test_demo_falls_back_to_in_process_amqtt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tablesense.daemon.broker, "mosquitto_binary", lambda: None)
    buf = io.StringIO()
    lines = await run_demo("uth", 3, 5, out=buf)
    assert "(amqtt, MQTT 3.1.1)" in lines[0]
    assert "3 rounds settled" in lines[1]
    assert len(re.findall(r"^\[demo-uth\] round ", buf.getvalue(), re.M)) == 3


def test_demo_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--rounds", "0"]) == 2
    assert "--rounds must be" in capsys.readouterr().err
    assert main(["demo", "--broker", "host:notaport"]) == 2
