"""Adversarial review of command ids: "a repeated command id is answered with the first answer and
applied once" must hold for every configuration ``check-config`` and ``run`` accept.

The table remembers the answers of the last 4096 command ids (``daemon.table.machine``
``MAX_REMEMBERED_COMMANDS``); every command the rate limiter lets through counts, refused ones included.
Within one command's validity (``[mqtt] command_max_age``) up to ``command_burst + command_rate x
command_max_age`` commands get through. Before this review the accepted ranges (rate up to 1000/s, burst
up to 10000, age up to 300 s: up to 310,000 commands) let a command's id be forgotten while the command
itself was still valid: redelivered then (a floor system's retry, a QoS 1 redelivery after a long
queue), it was applied a second time and answered differently (``void_round`` of a later round under the
same id; an ``enter_card`` filling a second unreadable card of the round). Such a configuration is now
refused with one line naming the keys.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tablesense.daemon.cli import main
from tablesense.daemon.config import ConfigError, parse_config
from tablesense.daemon.table.machine import MAX_REMEMBERED_COMMANDS
from tablesense.simulators.dealer import sim_config_toml


def config_text(tmp_path: Path, mqtt: str) -> str:
    text = sim_config_toml("baccarat", urls={"shoe": str(tmp_path / "shoe"), "pads": str(tmp_path / "pads")},
                           host="127.0.0.1", port=1883, journal=tmp_path / "journal")
    return text.replace("[mqtt]\n", f"[mqtt]\n{mqtt}", 1)


@pytest.mark.parametrize("mqtt", ["command_max_age = 300\n", "command_rate = 1000\n",
                                  "command_burst = 10000\n",
                                  "command_rate = 200\ncommand_max_age = 60\ncommand_burst = 1\n"])
def test_a_window_larger_than_the_remembered_ids_is_refused(tmp_path: Path, mqtt: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "table.toml"
    path.write_text(config_text(tmp_path, mqtt))
    with pytest.raises(ConfigError, match="command ids the table remembers"):
        parse_config(path.read_text())
    assert main(["check-config", str(path)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "command" in line]
    assert len(lines) == 1 and "mqtt.command_rate" in lines[0] and str(MAX_REMEMBERED_COMMANDS) in lines[0]


@pytest.mark.parametrize("mqtt", ["", "command_max_age = 200\n", "command_rate = 13\ncommand_max_age = 300\n",
                                  "command_rate = 1000\ncommand_max_age = 4\ncommand_burst = 96\n"])
def test_a_window_within_the_remembered_ids_is_accepted(tmp_path: Path, mqtt: str) -> None:
    m = parse_config(config_text(tmp_path, mqtt)).mqtt
    assert m.command_burst + m.command_rate * m.command_max_age <= MAX_REMEMBERED_COMMANDS
