"""Hostile configs get one clear line, never a traceback nor a daemon that retries a value that can
never work: a NUL or other control character in a path, a device URL whose form no transport accepts
(a scheme pyserial does not know, a port out of range, a malformed ``usb://``), an MQTT host that
cannot be a host name (a label over 63 characters made the relay crash on every connection attempt,
logging a traceback at critical level forever)."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_support import SHOE_TABLE

from tablesense.daemon.cli import main
from tablesense.daemon.config import ConfigError, parse_config

BASE = SHOE_TABLE + """[mqtt]
host = "127.0.0.1"
[journal]
directory = "/tmp/tablesense-adversarial-journal"
key_file = "/tmp/tablesense-adversarial-key"
"""

BAD = [
    ('url = "/dev/null"', 'url = "/dev/nu\\u0000ll"', "devices.shoe.url"),
    ('url = "/dev/null"', 'url = "/dev/null\\n"', "devices.shoe.url"),
    ('url = "/dev/null"', 'url = "tcp://127.0.0.1:4000"', "devices.shoe.url"),
    ('url = "/dev/null"', 'url = "socket://127.0.0.1:-1"', "devices.shoe.url"),
    ('url = "/dev/null"', 'url = "socket://127.0.0.1:99999"', "devices.shoe.url"),
    ('url = "/dev/null"', 'url = "socket://:4000"', "devices.shoe.url"),
    ('url = "/dev/null"', 'url = "rfc2217://:"', "devices.shoe.url"),
    ('url = "/dev/null"', 'url = "usb://zz:yy"', "devices.shoe.url"),
    ('url = "/dev/null"', 'url = "usb://1234:5678?colour=red"', "devices.shoe.url"),
    ('host = "127.0.0.1"', 'host = "' + "a" * 300 + '"', "mqtt.host"),
    ('host = "127.0.0.1"', 'host = "' + "a" * 64 + '.example"', "mqtt.host"),
    ('host = "127.0.0.1"', 'host = "broker\\u0000.example"', "mqtt.host"),
    ('host = "127.0.0.1"', 'host = "broker example"', "mqtt.host"),
    ('directory = "/tmp/tablesense-adversarial-journal"', 'directory = "/tmp/j\\u0000x"',
     "journal.directory"),
    ('key_file = "/tmp/tablesense-adversarial-key"', 'key_file = "/tmp/k\\u0000ey"', "journal.key_file"),
    ('[mqtt]\n', '[mqtt]\ncredentials_file = "/tmp/c\\u0000reds"\n', "mqtt.credentials_file"),
    ('[mqtt]\n', '[mqtt.tls]\nca_file = "/tmp/c\\u0007a.pem"\n[mqtt]\n', "mqtt.tls.ca_file"),
]


@pytest.mark.parametrize(("old", "new", "key"), BAD, ids=[b[1][:30] for b in BAD])
def test_a_hostile_value_is_one_config_error_naming_its_key(old: str, new: str, key: str) -> None:
    assert old in BASE
    with pytest.raises(ConfigError) as info:
        parse_config(BASE.replace(old, new, 1))
    lines = str(info.value).splitlines()
    assert any(line.startswith(f"{key}:") or f": {key}:" in line for line in lines), lines


GOOD = ['url = "socket://127.0.0.1:4000"', 'url = "rfc2217://shoe.example:2217"', 'url = "usb://1234:5678"',
        'url = "usb://1234:5678?serial=A1&interface=1"', 'url = "loop://"', 'url = "/dev/serial/by-id/usb-x"',
        'url = "socket://[::1]:4000"']


@pytest.mark.parametrize("line", GOOD)
def test_the_device_url_forms_the_transports_open_stay_accepted(line: str) -> None:
    parse_config(BASE.replace('url = "/dev/null"', line, 1))


@pytest.mark.parametrize("host", ["broker.casino.internal", "10.0.0.7", "::1", "fe80::1%eth0", "localhost",
                                  "bücher.example", "b" * 63 + ".example"])
def test_usable_mqtt_hosts_stay_accepted(host: str) -> None:
    parse_config(BASE.replace('host = "127.0.0.1"', f'host = "{host}"', 1))


@pytest.mark.parametrize(("old", "new", "key"), [b for b in BAD if "u0000" in b[1]],
                         ids=[b[2] for b in BAD if "u0000" in b[1]])
def test_check_config_says_one_line_for_a_nul_in_a_path(old: str, new: str, key: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "t.toml"
    cfg.write_text(BASE.replace(old, new, 1))
    assert main(["check-config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f": {key}: " in err, err
