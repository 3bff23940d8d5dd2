"""Defects a hostile tester found (input bounds, configs ``run`` cannot use, tracebacks): each is one
line on stderr and exit status 2 now, and ``check-config`` refuses what ``run`` refuses."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from config_support import PLAYER_TABLE

from tablesense.daemon.config import MAX_MONEY, ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[1]
TABLESENSE = str(Path(sys.executable).parent / "tablesense")
BASE = PLAYER_TABLE


def _cli(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([TABLESENSE, *args], capture_output=True, cwd=ROOT,
                          input=stdin, timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(errors="replace"),
                                       proc.stderr.decode(errors="replace"))


def _one_line_exit_2(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


def _err(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


# ------------------------------------------------------------------------------- bounded reads


def test_check_config_on_dev_zero_is_bounded() -> None:
    """/dev/zero has st_size 0: the read stops at 1 MiB + 1 byte (it used to grow to 7 GB)."""
    _one_line_exit_2(_cli("check-config", "/dev/zero"), "/dev/zero", "larger than 1048576")


def test_check_config_reads_a_fifo_bounded(tmp_path: Path) -> None:
    """A FIFO with a writer is read like a file, and a never-ending one is cut at 1 MiB."""
    fifo = tmp_path / "cfg"
    os.mkfifo(fifo)

    def writer(data: bytes) -> None:
        with contextlib.suppress(BrokenPipeError), open(fifo, "wb") as f:
            f.write(data)

    t = threading.Thread(target=writer, args=(b"x = 1\n" * 400_000,))
    t.start()
    _one_line_exit_2(_cli("check-config", str(fifo)), "larger than 1048576")
    t.join()
    t = threading.Thread(target=writer, args=(BASE.encode(),))
    t.start()
    proc = _cli("check-config", "--template", str(fifo))
    t.join()
    assert proc.returncode == 0 and proc.stdout.startswith("ok: t9"), proc.stderr


def test_settle_input_is_bounded() -> None:
    _one_line_exit_2(_cli("settle", "/dev/zero"), "settle", "/dev/zero", "larger than")
    _one_line_exit_2(_cli("settle", "-", stdin=b" " * (5 << 20)), "settle", "larger than")


# ------------------------------------------------------------------- configs run cannot use


@pytest.mark.parametrize(("edit", "expected"), [
    ('[devices.shoe]\nurl = "/dev/null"\nrole = "shoe"\nprotocol = "nope"\n',
     "devices.shoe.protocol: unknown protocol 'nope'"),
    ("[mqtt]\nsession_expiry = 99999999999\n", "mqtt.session_expiry: 99999999999 must be 0 to 4294967295"),
    ("[mqtt]\nsession_expiry = -1\n", "mqtt.session_expiry"),
    ('[mqtt]\ntopic_prefix = "a\\u0000b"\n', "mqtt.topic_prefix"),
    ('[mqtt]\ntopic_prefix = "a/+/b"\n', "wildcard"),
    ('[mqtt]\ntopic_prefix = "a/#"\n', "wildcard"),
    ('[mqtt]\ntopic_prefix = "a//b"\n', "empty topic level"),
    ('[mqtt]\ntopic_prefix = "/a"\n', "empty topic level"),
    ('[mqtt]\ntopic_prefix = "a/"\n', "empty topic level"),
    ('[mqtt]\ntopic_prefix = "a\\u0007b"\n', "control character"),
    ('[mqtt]\ntopic_prefix = "$SYS/x"\n', "reserved"),
    ('[mqtt]\ntopic_prefix = ""\n', "empty"),
    ("[wagers.banker]\nmax = 9223372036854775807\n", f"wagers.banker.max: 9223372036854775807 is above "
                                                     f"the largest amount {MAX_MONEY}"),
    ("[blackjack]\nhole_card = false\n", "[blackjack] configures blackjack only; this table deals baccarat"),
    ("[uth]\nboard = 'before'\n", "[uth] configures uth only"),
    ("[commission]\nunit = 9007199254740992\n", "commission.unit"),
    ("[journal]\nretention_rounds = 9223372036854775807\n", "journal.retention_rounds"),
])
def test_config_refuses_what_run_cannot_use(edit: str, expected: str) -> None:
    assert expected in _err(BASE + edit)


def test_table_id_with_topic_characters_is_refused() -> None:
    for table in ("a/b", "a+", "#", "a\x00", "", "x" * 65):
        text = BASE.replace('table = "t9"', f"table = {json.dumps(table)}")
        assert _err(text).startswith("table: "), table


def test_largest_amount_is_accepted() -> None:
    cfg = parse_config(BASE + f"[wagers.banker]\nmax = {MAX_MONEY}\n")
    assert cfg.wagers["banker"].max == MAX_MONEY == 2**53 - 1


def test_journal_directory_that_is_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "journal"
    afile.write_text("not a directory")
    cfg = tmp_path / "t.toml"
    cfg.write_text(BASE + f"[journal]\ndirectory = {str(afile)!r}\n")
    with pytest.raises(ConfigError, match=r"journal.directory: .* exists and is not a directory"):
        load_config(cfg)


def test_run_and_check_config_agree_on_an_unknown_protocol(tmp_path: Path) -> None:
    """``run`` crashed with an UnknownProtocol traceback (rc 1) on a config check-config passed."""
    cfg = tmp_path / "t.toml"
    cfg.write_text(BASE + f'[journal]\ndirectory = "{tmp_path}/j"\n'
                   '[devices.shoe]\nurl = "/dev/null"\nrole = "shoe"\nprotocol = "nope"\n')
    for args in (("check-config", "--template", str(cfg)), ("run", "--config", str(cfg))):
        _one_line_exit_2(_cli(*args), "devices.shoe.protocol: unknown protocol 'nope'")


# ------------------------------------------------------------------------------------- settle

ROUND = ('{"game": "baccarat", "decks": 8, %s"wagers": [{"spot": "1", "bet": "banker", "stake": %s}], '
         '"cards": ["2H", "3H", "4H", "5H"]}')


def test_settle_bounds_stakes_and_names_the_wager() -> None:
    err = _one_line_exit_2(_cli("settle", "-", stdin=(ROUND % ("", "1" + "0" * 400)).encode()))
    assert "wagers[0].stake: a 401-digit number is above the largest stake 9007199254740991" in err
    ok = _cli("settle", "-", stdin=(ROUND % ("", str(MAX_MONEY))).encode())
    assert ok.returncode == 0 and json.loads(ok.stdout)["totals"]["stake"] == MAX_MONEY


@pytest.mark.parametrize("rate", ['"1e999999"', '"1e999999999"', '"150%"', '"5e-2"'])
def test_settle_commission_rate_named_cleanly(rate: str) -> None:
    err = _one_line_exit_2(_cli("settle", "-", stdin=(ROUND % (f'"commission": {rate}, ', "100")).encode()),
                           "settle: commission.rate: ")
    assert "set_int_max_str_digits" not in err and "4300" not in err


# ------------------------------------------------------------------------------ recall, replay


def test_recall_huge_numbers_are_one_line(tmp_path: Path) -> None:
    """``--last 10**21`` and ``--round 10**23-1`` raised OverflowError (SQLite integers are 64-bit)."""
    from journal_support import TABLE, Traffic

    from tablesense.daemon.journal import Journal

    t = Traffic()
    with Journal(tmp_path, TABLE) as j:
        for inp, emits in t.new_shoe() + t.baccarat_round(("QH", "QS", "3D", "8C")):
            j.append(inp, emits)
    _one_line_exit_2(_cli("recall", "--journal", str(tmp_path), "--last", "999999999999999999999"),
                     "--last must be at least 1 and at most 1000000")
    for rid in ("99999999999999999999999-1", "1-99999999999999999999999", "99999999999999999999999"):
        _one_line_exit_2(_cli("recall", "--journal", str(tmp_path), "--round", rid), "holds no round")
    ok = _cli("recall", "--journal", str(tmp_path), "--round", "1-1", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)[0]["round"] == 1, ok.stderr


def test_replay_binary_or_endless_file_is_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "bin.cap"
    binary.write_bytes(b"# tablesense-capture 1\n\xff\xfe\x00garbage")
    _one_line_exit_2(_cli("replay", str(binary), "--exit-at-end"), f"replay: {binary}: not a tablesense "
                     "capture (not UTF-8 text at byte 23)")
    _one_line_exit_2(_cli("replay", "/dev/zero", "--exit-at-end"), "replay: /dev/zero", "larger than")


# ----------------------------------------------------------------- monitor, signage, simulate


@pytest.mark.parametrize(("command", "option", "value", "expected"), [
    ("monitor", "--table", "a/+", "--table 'a/+' must be 1-64 letters"),
    ("monitor", "--prefix", "", "--prefix '' is empty"),
    ("monitor", "--prefix", "a//b", "empty topic level"),
    ("signage", "--table", "a/+", "--table 'a/+' must be 1-64 letters"),
    ("signage", "--prefix", "", "--prefix '' is empty"),
    ("signage", "--prefix", "x/#", "wildcard"),
])
def test_monitor_and_signage_share_the_topic_validator(command: str, option: str, value: str,
                                                        expected: str) -> None:
    """``monitor`` accepted ``--table 'a/+'`` and ``--prefix ''``, which signage refused; both now use
    :func:`daemon.topics.option_problem` (the config's rules)."""
    args = [command, "--broker", "127.0.0.1:1"]
    if command == "signage" and option != "--table":
        args += ["--table", "T1"]
    if command == "monitor":
        args += ["--no-ui"]
    _one_line_exit_2(_cli(*args, option, value, timeout=30), f"{command}: ", expected)


@pytest.mark.parametrize(("args", "expected"), [
    (["shoe", "--pace", "nan"], "--pace must be a finite number, got 'nan'"),
    (["shoe", "--pace", "inf"], "--pace must be a finite number"),
    (["shoe", "--heartbeat", "nan"], "--heartbeat must be a finite number"),
    (["shoe", "--cards", ""], "--cards: no cards given"),
    (["pads", "--spots", "bad spot,$x"], "--spots: spot id 'bad spot' must be 1-64"),
    (["pads", "--spots", ""], "--spots: spot id ''"),
])
def test_simulate_refuses_bad_options(args: list[str], expected: str) -> None:
    _one_line_exit_2(_cli("simulate", *args, timeout=30), "simulate: ", expected)
