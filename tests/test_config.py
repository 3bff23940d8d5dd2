"""Table configuration: strict decoding, one-line errors naming the key, examples, ``check-config``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tablesense.daemon.cli import main
from tablesense.daemon.config import MAX_CONFIG_BYTES, ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "deploy" / "examples").glob("*.toml"))

BASE = """
table = "t9"
game = "baccarat"
decks = 6
seats = ["1", "2"]
[wagers.player]
min = 100
max = 1000
[wagers.perfect_pairs]
paytable = "A"
[spots]
"3" = { seat = "1", bet = "player" }
"4" = { seat = "1", bet = "perfect_pairs", hand = "player" }
"""


def _err(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    msg = str(info.value)
    assert "\n" not in msg and msg
    return msg


def test_every_example_loads_and_names_its_game() -> None:
    games = {load_config(p).game for p in EXAMPLES}
    assert games == {"baccarat", "ez-baccarat", "blackjack", "uth"}
    for p in EXAMPLES:
        cfg = load_config(p)
        cfg.rules()  # the rules core accepts the paytables
        assert cfg.spots and cfg.devices


def test_defaults() -> None:
    cfg = parse_config(BASE)
    assert cfg.mqtt.topic_prefix == "tablesense" and cfg.mqtt.protocol == "5" and cfg.mqtt.fallback
    assert cfg.client_id == "tablesense-t9"
    assert cfg.burn.mode == "shoe" and cfg.blackjack.hole_card and cfg.round.start == "card"
    assert cfg.spot_for("1", "perfect_pairs", "player") == "4"
    uth = (BASE.replace('game = "baccarat"\ndecks = 6', 'game = "uth"').replace("player", "ante")
           .replace('[wagers.perfect_pairs]\npaytable = "A"', "[wagers.ultimate_pairs]")
           .replace('bet = "perfect_pairs", hand = "ante"', 'bet = "ultimate_pairs"'))
    assert parse_config(uth).shoe_decks == 1


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t + '[mqtt]\nhots = "x"\n', "unknown key: mqtt.hots"),
    (lambda t: 'colour = "red"\n' + t, "unknown key: colour"),
    (lambda t: t + '"8" = { seat = 2, bet = "player" }\n', "spots.8.seat: expected `str`, got `int`"),
    (lambda t: t + '"8" = { seat = "2", bet = "player", stake = 5 }\n', "unknown key: spots.8.stake"),
    (lambda t: t + '[devices.shoe]\nurl = "x"\nrole = "dealer"\n', "devices.shoe.role: invalid enum value"),
    (lambda t: t.replace('paytable = "A"', 'paytable = "25-12-5"'),
     "wagers.perfect_pairs.paytable: '25-12-5' is allowed with 8 decks only, not 6"),
    (lambda t: t + "[wagers.dragon_7]\n", "wagers.dragon_7: not offered in baccarat (only ez-baccarat)"),
    (lambda t: t + "[wagers.ultimate_pairs]\n", "wagers.ultimate_pairs: not offered in baccarat (only uth)"),
    (lambda t: t + '"7" = { seat = "1", bet = "player" }\n', "spots.7: mapped twice (also spots.3)"),
    (lambda t: t + '[mqtt]\nport = "1883"\n', "mqtt.port: expected `int`, got `str`"),
    (lambda t: t.replace("decks = 6\n", ""), "decks: baccarat needs the number of decks"),
    (lambda t: t.replace("decks = 6", "decks = 9"), "decks: must be 1 to 8, got 9"),
    (lambda t: t.replace('table = "t9"', 'table = "a/b"'), "table: 'a/b' must be"),
    (lambda t: t + '"8" = { seat = "5", bet = "player" }\n', "spots.8.seat: '5' is not in seats"),
    (lambda t: t + '"8" = { seat = "2", bet = "tie" }\n', "spots.8.bet: 'tie' is not an offered wager"),
    (lambda t: t + '"8" = { seat = "2", bet = "perfect_pairs" }\n',
     "spots.8.hand: perfect_pairs is placed on a hand"),
    (lambda t: t + '"8" = { seat = "2", bet = "player", hand = "banker" }\n',
     "spots.8.hand: player names no hand"),
    (lambda t: t.replace("max = 1000", "max = 10"), "wagers.player.max: 10 is below min 100"),
    (lambda t: t + '[commission]\nrate = "lots"\n', "commission.rate: 'lots' is not a rate"),
    (lambda t: t + '[commission]\nrounding = "sideways"\n', "commission.rounding: 'sideways' is not one of"),
    (lambda t: t + '[commission]\nmode = "half_up"\n',
     "unknown key: commission.mode (renamed: commission.rounding)"),
    (lambda t: t.replace('seats = ["1", "2"]', 'seats = ["1", "1"]'), "seats[1]: seat '1' listed twice"),
    (lambda t: t + '[burn]\nmode = "fixed"\n', "burn.count: 0 must be 1 to 312 with mode 'fixed'"),
    (lambda t: t + '[burn]\nmode = "sometimes"\n', "burn.mode: invalid enum value 'sometimes'"),
    (lambda t: t + '[devices.a]\nurl = "x"\nrole = "shoe"\n[devices.b]\nurl = "y"\nrole = "shoe"\n',
     "devices.b.role: a table has one shoe (also devices.a)"),
    (lambda t: t + '[mqtt.tls]\ncert_file = "c.pem"\n', "mqtt.tls: cert_file and key_file go together"),
    (lambda t: t + "[wagers.jackpot]\n", "wagers.jackpot: unknown wager 'jackpot'"),
    (lambda t: t.replace('table = "t9"\n', ""), "missing key: table"),
    (lambda t: t + "[[", "invalid TOML:"),
])
def test_one_line_errors_name_the_key(edit, expected: str) -> None:  # type: ignore[no-untyped-def]
    msg = _err(edit(BASE))
    assert msg.startswith(expected), msg


def test_game_specific_rules() -> None:
    ez = BASE.replace('game = "baccarat"', 'game = "ez-baccarat"')
    assert _err(ez + '[commission]\nrate = "5%"\n').startswith("commission: ez-baccarat takes no commission")
    uth = BASE.replace('game = "baccarat"', 'game = "uth"')
    assert _err(uth).startswith("decks: uth is dealt from one 52-card deck")
    bj = BASE.replace('game = "baccarat"', 'game = "blackjack"')
    assert _err(bj).startswith("wagers.player: not offered in blackjack (only baccarat, ez-baccarat)")
    bj_ok = (BASE.replace('game = "baccarat"', 'game = "blackjack"')
             .replace('seats = ["1", "2"]', 'seats = ["9"]')
             .replace("[wagers.player]", "[wagers.blackjack]").replace('bet = "player"', 'bet = "blackjack"')
             .replace('paytable = "A"', ""))
    assert _err(bj_ok).startswith("seats[0]: blackjack seats are boxes '1' to '7'")


def test_file_size_is_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_text(BASE + "# " + "x" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ConfigError, match="larger than"):
        load_config(big)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"table = \"\xff\"\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(bad)


def test_check_config_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["check-config", "--template", str(ROOT / "deploy/examples/baccarat.toml")]) == 0
    assert capsys.readouterr().out.strip() == "ok: bac-01 (baccarat, 8 decks, 17 spots)"
    assert main(["check-config", "--template", str(ROOT / "deploy/examples/uth.toml")]) == 0
    assert capsys.readouterr().out.strip() == "ok: uth-03 (uth, 1 deck, 12 spots)"
    bad = tmp_path / "t.toml"
    bad.write_text(BASE + '"7" = { seat = "1", bet = "player" }\n')
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == f"tablesense: {bad}:14: spots.7: mapped twice (also spots.3)\n"


def test_check_config_refuses_what_run_refuses(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """check-config makes run's start checks: the example's credentials and CA files do not exist here,
    a world-readable credentials file and a missing TLS CA file are each one line and exit 2."""
    example = str(ROOT / "deploy/examples/baccarat.toml")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CREDENTIALS_DIRECTORY", raising=False)  # outside a service (tests/conftest.py sets one)
        assert main(["check-config", example]) == 2
    err = capsys.readouterr().err
    assert "mqtt.credentials_file" in err and "names ${CREDENTIALS_DIRECTORY}, which is not set" in err
    creds_dir = tmp_path / "credentials"
    creds_dir.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CREDENTIALS_DIRECTORY", str(creds_dir))
        assert main(["check-config", example]) == 2
    assert f"credentials file {creds_dir}/mqtt: No such file" in capsys.readouterr().err
    creds = tmp_path / "creds"
    creds.write_text('username = "u"\npassword = "p"\n')
    creds.chmod(0o644)
    cfg = tmp_path / "t.toml"
    cfg.write_text(BASE + f'[mqtt]\nhost = "127.0.0.1"\ncredentials_file = "{creds}"\n')
    assert main(["check-config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tablesense: {cfg}:16: mqtt.credentials_file: credentials file ")
    assert "accessible by other users" in err and err.count("\n") == 1
    creds.chmod(0o600)
    assert main(["check-config", str(cfg)]) == 0
    assert capsys.readouterr().out.startswith("ok: t9 ")
    cfg.write_text(BASE + f'[mqtt]\nhost = "127.0.0.1"\ncredentials_file = "{creds}"\n'
                   f'[mqtt.tls]\nca_file = "{tmp_path / "no-ca.pem"}"\n')
    assert main(["check-config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tablesense: {cfg}:18: mqtt.tls.ca_file: TLS CA file {tmp_path / 'no-ca.pem'}")
    assert err.count("\n") == 1
    assert main(["check-config", "--template", str(cfg)]) == 0


def test_check_config_as_a_process_exits_2_without_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "t.toml"
    bad.write_text(BASE + '[mqtt]\nhots = "x"\n')
    proc = subprocess.run([sys.executable, "-m", "tablesense",
                           "check-config", str(bad)], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 2
    assert proc.stderr == f"tablesense: {bad}:15: unknown key: mqtt.hots\n" and proc.stdout == ""


# --- every problem at once, with file, line and key -------------------------------------------------

MANY_DECODE = BASE + """colour = "red"
"8" = { seat = 2, bet = "player" }
"9" = { seat = "2", bet = "player", stake = 5 }
[mqtt]
hots = "x"
port = "1883"
"""

MANY_CHECKS = (BASE.replace('seats = ["1", "2"]', 'seats = ["1", "1", "x/y"]')
               .replace("max = 1000", "max = 10")
               + '"7" = { seat = "1", bet = "player" }\n"8" = { seat = "5", bet = "player" }\n'
               + "[mqtt]\nport = 0\nkeepalive = 1\n[burn]\nmode = \"fixed\"\n[uth]\nburn_before_board = 9\n")


def test_every_decoding_problem_at_once_with_its_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(MANY_DECODE)
    # TOML puts colour, after [spots], into the spots table: it is a spot entry that is no table
    assert [i.format() for i in info.value.issues] == [
        "spots.colour: expected `object`, got `str` (at line 14)",
        "spots.8.seat: expected `str`, got `int` (at line 15)",
        "unknown key: spots.9.stake (at line 16)",
        "unknown key: mqtt.hots (at line 18)",
        "mqtt.port: expected `int`, got `str` (at line 19)",
    ]
    one = str(info.value)
    assert "\n" not in one and one.startswith("spots.colour: expected `object`, got `str` (at line 14)")
    assert one.endswith("(and 4 more problems: tablesense check-config lists them)")


def test_every_check_problem_at_once_with_its_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(MANY_CHECKS)
    lines = [i.format() for i in info.value.issues]
    assert lines == [
        "wagers.player.max: 10 is below min 100 (at line 8)",
        "seats[1]: seat '1' listed twice (at line 5)",
        "seats[2]: 'x/y' must be 1-64 letters, digits, '_', '-' or '.' (at line 5)",
        "spots.7: mapped twice (also spots.3) (at line 14)",
        "spots.8.seat: '5' is not in seats (at line 15)",
        "mqtt.port: 0 is not a TCP port (at line 17)",
        "mqtt.keepalive: 1 must be 5 to 3600 seconds (at line 18)",
        "burn.count: 0 must be 1 to 312 with mode 'fixed' (at line 19)",
        "uth.burn_before_board: 9 must be 0 to 5 (at line 22)",
        "uth: [uth] configures uth only; this table deals baccarat (remove the section) (at line 21)",
    ], lines


def test_check_config_lists_every_problem_with_file_line_and_key(capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path) -> None:
    bad = tmp_path / "bac-01.toml"
    bad.write_text(MANY_CHECKS)
    assert main(["check-config", "--template", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 10
    assert err[0] == f"tablesense: {bad}:8: wagers.player.max: 10 is below min 100"
    assert err[3] == f"tablesense: {bad}:14: spots.7: mapped twice (also spots.3)"
    # run refuses in one line: the first problem and how many more there are
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert str(info.value) == (f"{bad}:8: wagers.player.max: 10 is below min 100 (and 9 more problems: "
                               "tablesense check-config lists them)")


def test_a_toml_syntax_error_names_file_line_and_column(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    bad = tmp_path / "t.toml"
    bad.write_text(BASE + "[mqtt]\nport = 18 83\n")
    assert main(["check-config", str(bad)]) == 2
    assert capsys.readouterr().err == (f"tablesense: {bad}:15:11: invalid TOML: Expected newline or end of "
                                       "document after a statement\n")
    assert _err(BASE + "x = \n").startswith("invalid TOML: Invalid value (at line 14, column 5)")


def test_file_problems_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "missing.toml")
    assert str(info.value) == f"{tmp_path / 'missing.toml'}: cannot read config: No such file or directory"


def test_credentials_directory_is_expanded_in_file_keys() -> None:
    text = (BASE + '[mqtt]\ncredentials_file = "${CREDENTIALS_DIRECTORY}/mqtt"\n[mqtt.tls]\n'
            'ca_file = "/etc/ca.pem"\ncert_file = "/etc/c.pem"\n'
            'key_file = "${CREDENTIALS_DIRECTORY}/tls-key"\n')
    run_dir = "/run/credentials/tablesense@t9.service"
    cfg = parse_config(text, environ={"CREDENTIALS_DIRECTORY": run_dir})
    assert cfg.mqtt.credentials_file == f"{run_dir}/mqtt"
    assert cfg.mqtt.tls is not None and cfg.mqtt.tls.key_file == f"{run_dir}/tls-key"
    assert parse_config(text, environ={}).mqtt.credentials_file == "${CREDENTIALS_DIRECTORY}/mqtt"
    # only *_file keys: a topic prefix is never rewritten
    odd = BASE + '[mqtt]\ntopic_prefix = "${CREDENTIALS_DIRECTORY}"\n'
    with pytest.raises(ConfigError, match=r"mqtt\.topic_prefix"):
        parse_config(odd, environ={"CREDENTIALS_DIRECTORY": "/x"})
