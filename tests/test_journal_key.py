"""The journal key: where it comes from, what is refused, and what each command does without one
(docs/journal.md "The key")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from journal_support import TABLE, Traffic

from tablesense.daemon.app import App, StartupError
from tablesense.daemon.cli import main
from tablesense.daemon.config import ConfigError, parse_config
from tablesense.daemon.journal import Journal, JournalKeyError, key_id, load_key, write_new_key
from tablesense.daemon.journal.key import CREDENTIALS_ENV
from tablesense.simulators.dealer import sim_config_toml

ROOT = Path(__file__).resolve().parent.parent


def config_text(tmp_path: Path, journal_lines: str = "") -> str:
    text = sim_config_toml("baccarat", urls={"shoe": str(tmp_path / "s"), "pads": str(tmp_path / "p")},
                           host="127.0.0.1", port=1, journal=tmp_path / "journal")
    return text.replace("[journal]\n", f"[journal]\n{journal_lines}")


def test_an_absolute_key_file_and_a_credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = write_new_key(tmp_path / "bac-01.journal-key")
    assert (tmp_path / "bac-01.journal-key").stat().st_mode & 0o777 == 0o600
    assert load_key(str(tmp_path / "bac-01.journal-key")) == key
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "journal-key").write_bytes(key)
    (creds / "journal-key").chmod(0o400)  # as systemd leaves a credential
    monkeypatch.setenv(CREDENTIALS_ENV, str(creds))
    assert load_key() == key and load_key("journal-key") == key
    assert len(key_id(key)) == 16 and key_id(key) != key.hex()[:16]
    with pytest.raises(FileExistsError):
        write_new_key(tmp_path / "bac-01.journal-key")  # never overwritten


@pytest.mark.parametrize(("setup", "message"), [
    ("missing", "No such file"),
    ("others", "accessible by other users (mode 0644)"),
    ("short", "holds 16 bytes; a key needs at least 32"),
    ("directory", "is not a regular file"),
    ("relative-path", "must be an absolute path or a bare systemd credential name"),
    ("no-credentials", "names a systemd credential, but $CREDENTIALS_DIRECTORY is not set"),
])
def test_unusable_keys_are_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: str,
                                               message: str) -> None:
    path = tmp_path / "key"
    name = str(path)
    if setup == "others":
        path.write_bytes(os.urandom(32))
        path.chmod(0o644)
    elif setup == "short":
        path.write_bytes(os.urandom(16))
        path.chmod(0o600)
    elif setup == "directory":
        path.mkdir()
    elif setup == "relative-path":
        name = "keys/journal-key"
    elif setup == "no-credentials":
        monkeypatch.delenv(CREDENTIALS_ENV)
        name = "journal-key"
    with pytest.raises(JournalKeyError) as err:
        load_key(name)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_run_without_a_key_does_not_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CREDENTIALS_ENV)
    app = App(parse_config(config_text(tmp_path)))
    with pytest.raises(StartupError, match="CREDENTIALS_DIRECTORY is not set"):
        app.open()
    assert not (tmp_path / "journal" / "journal.sqlite").exists()
    (tmp_path / "table.toml").write_text(config_text(tmp_path))
    env = {k: v for k, v in os.environ.items() if k != CREDENTIALS_ENV}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-m", "tablesense", "run", "--config",
                          str(tmp_path / "table.toml")], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "journal.key_file" in out.stderr


def test_run_with_another_tables_key_refuses_to_settle(tmp_path: Path) -> None:
    config = parse_config(config_text(tmp_path))
    with Journal(tmp_path / "journal", config.table, key=b"x" * 32) as j:
        for inp, emits in Traffic(table=config.table).new_shoe():
            j.append(inp, emits)
    app = App(config)
    app.open()
    assert app.refusal is not None and "sealed with another key" in app.refusal


def test_recall_and_verify_need_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with Journal(tmp_path, TABLE) as j:
        for inp, emits in Traffic().new_shoe():
            j.append(inp, emits)
    monkeypatch.delenv(CREDENTIALS_ENV)
    assert main(["recall", "--journal", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "recall verifies every row" in err and err.count("\n") == 1
    assert main(["verify", "--journal", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--key FILE" in err and err.count("\n") == 1
    other = tmp_path / "other.key"
    write_new_key(other)
    assert main(["recall", "--journal", str(tmp_path), "--key", str(other)]) == 2
    assert "sealed with another key" in capsys.readouterr().err


def test_journal_config_keys(tmp_path: Path) -> None:
    cfg = parse_config(config_text(tmp_path, 'key_file = "/etc/tablesense/bac-01.journal-key"\n'
                                             'max_size = "500 MB"\n'))
    assert cfg.journal.key_file == "/etc/tablesense/bac-01.journal-key"
    assert cfg.journal.max_size_bytes == 500_000_000
    assert parse_config(config_text(tmp_path)).journal.key_file == "journal-key"
    assert parse_config(config_text(tmp_path, "max_size = 0\n")).journal.max_size_bytes is None
    assert parse_config(config_text(tmp_path, 'max_size = "2 GiB"\n')).journal.max_size_bytes == 1 << 31
    for lines, message in (('key_file = ""\n', "journal.key_file: empty"),
                           ('max_size = "lots"\n', "journal.max_size: 'lots' is not a size"),
                           ("max_size = 1000\n", "journal.max_size: 1000 bytes must be 0"),
                           ("max_size = -1\n", "journal.max_size: -1 must not be negative")):
        with pytest.raises(ConfigError, match=message):
            parse_config(config_text(tmp_path, lines))


def test_check_config_checks_the_key_run_would_refuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """check-config makes run's start checks, the journal key included: a key other users can read, or one
    too short, is the same one line run would print; ``--template`` skips it."""
    from tablesense.daemon.cli import main

    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)
    path = tmp_path / "table.toml"
    # devices on /dev/null: check-config also checks the device paths (config_text's do not exist)
    path.write_text(config_text(tmp_path, f'key_file = "{key}"\n')
                    .replace(str(tmp_path / "s"), "/dev/null").replace(str(tmp_path / "p"), "/dev/null"))
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"journal key file {key} is accessible by other users" in err and err.count("\n") == 1
    assert main(["check-config", "--template", str(path)]) == 0
    key.chmod(0o600)
    assert main(["check-config", str(path)]) == 0
    key.write_bytes(b"short")
    assert main(["check-config", str(path)]) == 2
    assert "journal key file" in capsys.readouterr().err
