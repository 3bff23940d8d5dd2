"""``tablesense check-config`` lists every problem of a config in one run: TOML syntax errors, decoding
(type) errors and value checks together with the file checks ``run`` makes (MQTT credentials, TLS files,
the journal key) and the device paths, each line ``FILE:LINE: key: what is wrong``; exit 2 when any."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from config_support import SHOE_TABLE

from tablesense.daemon.cli import main
from tablesense.daemon.config import ConfigError, load_config, parse_config

BASE = SHOE_TABLE


def _files(tmp_path: Path, *, journal_key: Path | None = None) -> str:
    """``[mqtt]`` and ``[journal]`` naming files in ``tmp_path`` that do not exist."""
    key = journal_key if journal_key is not None else tmp_path / "no-key"
    return (f'[mqtt]\ncredentials_file = "{tmp_path / "no-creds"}"\n'
            f'[mqtt.tls]\nca_file = "{tmp_path / "no-ca.pem"}"\n'
            f'cert_file = "{tmp_path / "no-cert.pem"}"\nkey_file = "{tmp_path / "no-client.key"}"\n'
            f'[journal]\ndirectory = "{tmp_path / "journal"}"\nkey_file = "{key}"\n')


def _check(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    assert main(["check-config", *extra, str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert all(line.startswith(f"tablesense: {path}") for line in lines), lines
    return [line.removeprefix(f"tablesense: {path}") for line in lines]


def test_type_errors_and_file_problems_in_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "t.toml"
    text = BASE.replace("decks = 6", 'decks = "six"') + _files(tmp_path)
    text += '[devices.pads]\nurl = "/dev/tablesense-no-such-pads"\nrole = "pads"\n'
    cfg.write_text(text)
    lines = _check(cfg, capsys)
    assert lines == [
        ":3: decks: expected `int | null`, got `str`",
        f":14: mqtt.credentials_file: credentials file {tmp_path / 'no-creds'}: No such file or directory",
        f":16: mqtt.tls.ca_file: TLS CA file {tmp_path / 'no-ca.pem'}: [Errno 2] No such file or directory",
        f":18: mqtt.tls.key_file: TLS client key {tmp_path / 'no-client.key'}: No such file or directory",
        f":21: journal.key_file: journal key file {tmp_path / 'no-key'}: No such file or directory",
        ":23: devices.pads.url: /dev/tablesense-no-such-pads does not exist (the device is not plugged in, "
        "or the path is wrong)",
    ], lines


def test_toml_syntax_errors_are_listed_with_the_file_problems(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "t.toml"
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)  # run refuses a key other users can read
    text = BASE.replace("max = 1000", "max = 10 00") + _files(tmp_path, journal_key=key)
    text = text.replace('url = "/dev/null"', 'url = "/dev/null" "x"')
    cfg.write_text(text)
    lines = _check(cfg, capsys)
    assert lines[:2] == [":7:10: invalid TOML: Expected newline or end of document after a statement",
                         ":11:19: invalid TOML: Expected newline or end of document after a statement"]
    assert [line.split(": ", 2)[1] for line in lines[2:]] == [
        "mqtt.credentials_file", "mqtt.tls.ca_file", "mqtt.tls.key_file", "journal.key_file"], lines
    assert lines[5] == (f":21: journal.key_file: journal key file {key} is accessible by other users (mode "
                        f"0644); run: chmod o-rwx {key}")
    # a key set aside for its syntax error is not also reported missing (devices.shoe.url is required;
    # the device is left out of the checks that need it)
    assert not any("missing key" in line or "devices.shoe" in line for line in lines)
    # run prints the first problem and how many more there are, in one line
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    assert str(info.value) == (f"{cfg}:7:10: invalid TOML: Expected newline or end of document after a "
                               "statement (and 1 more problem: tablesense check-config lists them)")


def test_value_problems_are_listed_with_the_file_problems(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "t.toml"
    creds = tmp_path / "creds"
    creds.write_text('username = "u"\npassword = "p"\n')
    creds.chmod(0o604)
    cfg.write_text(BASE.replace("max = 1000", "max = 10") + f'[mqtt]\ncredentials_file = "{creds}"\n')
    lines = _check(cfg, capsys)
    assert lines == [
        ":7: wagers.player.max: 10 is below min 100",
        f":14: mqtt.credentials_file: credentials file {creds} is accessible by other users (mode 0604); "
        f"run: chmod o-rwx {creds}",
    ], lines
    lines = _check(cfg, capsys, "--template")  # a config for another machine: no file checks
    assert lines == [":7: wagers.player.max: 10 is below min 100"]


def test_every_unset_credentials_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    cfg = tmp_path / "t.toml"
    cfg.write_text(BASE + '[mqtt]\ncredentials_file = "${CREDENTIALS_DIRECTORY}/mqtt"\n'
                   '[journal]\nkey_file = "${CREDENTIALS_DIRECTORY}/journal-key"\n')
    lines = _check(cfg, capsys)
    assert [line.split(": ", 2)[:2] for line in lines] == [[":14", "mqtt.credentials_file"],
                                                          [":16", "journal.key_file"]], lines
    assert all("names ${CREDENTIALS_DIRECTORY}, which is not set" in line for line in lines)


def test_a_device_path_that_is_not_a_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "t.toml"
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    cfg.write_text(BASE.replace('url = "/dev/null"', f'url = "{tmp_path}"')
                   + f'[journal]\nkey_file = "{key}"\n')
    assert _check(cfg, capsys) == [f":11: devices.shoe.url: {tmp_path} is not a serial device (not a "
                                   "character device)"]
    cfg.write_text(BASE + f'[journal]\nkey_file = "{key}"\n')
    assert main(["check-config", str(cfg)]) == 0
    assert capsys.readouterr().out == "ok: t9 (baccarat, 6 decks, 1 spots)\n"


def test_parse_config_still_raises_every_syntax_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(BASE + '[mqtt]\nport = 18 83\nhost = "a" "b"\nkeepalive = [\n')
    assert [(i.line, i.message.split(":")[0]) for i in info.value.issues] == [
        (14, "invalid TOML"), (15, "invalid TOML"), (None, "invalid TOML")]  # an unclosed array ends it
