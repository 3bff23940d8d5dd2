"""Game recall: round records from the journal, `tablesense recall`, and reading while another process
writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from journal_support import PAD, SHOE, TABLE, Step, Traffic

from tablesense.daemon.cli import main
from tablesense.daemon.journal import Journal, JournalDamaged, JournalMissing, open_for_recall

ROOT = Path(__file__).resolve().parent.parent


def feed(journal: Journal, steps: list[Step]) -> None:
    for inp, emits in steps:
        journal.append(inp, emits)


@pytest.fixture
def journal_dir(tmp_path: Path) -> Path:
    """Shoe 1: round 1 plain, round 2 with a past-posting alarm and a Player Pair win, round 3 voided, then
    the first bet and two cards of round 4 (in progress)."""
    t = Traffic()
    with Journal(tmp_path, TABLE) as j:
        feed(j, t.new_shoe())
        feed(j, t.baccarat_round(("QH", "QS", "3D", "8C")))
        feed(j, t.baccarat_round(("7H", "2S", "7C", "6D"), stake=1000, alarm=True))
        feed(j, t.baccarat_round(("AH", "KS", "4D", "9C"), void=True))
        for row in j.pending(limit=1000):
            j.mark_delivered(row.row_id)
        feed(j, t.baccarat_round(("5H", "5S", "9D", "9C"))[:3])
    return tmp_path


def test_complete_round_has_the_full_record(journal_dir: Path) -> None:
    with open_for_recall(journal_dir) as reader:
        r = reader.round("1-2")
    assert r.status == "complete" and not r.void and r.game == "baccarat" and r.table == TABLE
    assert [(c.index, c.card, c.position, c.face_up, c.device, c.device_seq) for c in r.cards] == [
        (1, "7H", "player", True, SHOE, 6), (2, "2S", "banker", True, SHOE, 7),
        (3, "7C", "player", True, SHOE, 8), (4, "6D", "banker", True, SHOE, 9)]
    assert all(c.ts.startswith("2026-11-29T12:") for c in r.cards)
    assert [(w.spot, w.bet, w.stake) for w in r.wagers] == [("P1-PP", "player_pair", 1000)]
    assert [(s.spot, s.outcome, s.odds, s.net, s.changed_after_lock) for s in r.settlements] == [
        ("P1-PP", "win", "11 to 1", 11000, True)]
    assert [(a.alarm_id, a.code, a.severity) for a in r.alarms] == [("1.1", "PAST_POSTING", "warning")]
    assert r.baccarat is not None and r.baccarat.player == ("7H", "7C") and r.baccarat.player_pair
    assert r.started_ts < r.cards[0].ts <= (r.ended_ts or "")
    assert [m.schema for m in r.messages][:2] == ["tablesense.round", "tablesense.round"]
    assert all(m.delivered_at is not None for m in r.messages)


def test_void_round_is_marked(journal_dir: Path) -> None:
    with open_for_recall(journal_dir) as reader:
        r = reader.round("3")  # bare round number: the latest shoe holding it
    assert r.round_id == "1-3" and r.status == "void" and r.void


def test_round_in_progress_shows_only_public_facts(journal_dir: Path) -> None:
    with open_for_recall(journal_dir) as reader:
        rounds = reader.rounds()
        current = rounds[-1]
    assert [r.round_id for r in rounds] == ["1-1", "1-2", "1-3", "1-4"]
    assert current.status == "open" and current.phase == "dealing" and current.ended_ts is None
    assert [(c.card, c.position, c.device_seq) for c in current.cards] == [("5H", "player", 14),
                                                                           ("5S", "banker", 15)]
    assert [(e.kind, e.device, e.detail["spot"], e.detail["amount"]) for e in current.events] == [
        ("SpotChanged", PAD, "P1-PP", 2500)]
    assert current.wagers == () and current.settlements == ()
    assert all(m.delivered_at is None for m in current.messages[1:])


def test_face_down_cards_of_an_open_round_are_never_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    t = Traffic()
    with Journal(tmp_path, TABLE) as j:
        feed(j, t.new_shoe())
        feed(j, t.open_blackjack_round())  # 8S 6D 8H face up, KC the dealer's hole card
    with open_for_recall(tmp_path) as reader:
        r = reader.rounds(last=1)[0]
    assert [c.card for c in r.cards] == ["8S", "6D", "8H"] and r.hidden_cards == 1
    assert main(["recall", "--journal", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"8S"' in out and "KC" not in out and '"rank":13' not in out.replace(" ", "")
    assert main(["recall", "--journal", str(tmp_path)]) == 0
    human = capsys.readouterr().out
    assert "8H" in human and "KC" not in human and "face down" in human


def test_earlier_round_that_never_completed_is_incomplete(tmp_path: Path) -> None:
    t = Traffic()
    with Journal(tmp_path, TABLE) as j:
        feed(j, t.new_shoe())
        feed(j, t.baccarat_round())  # ends by opening round 2 for betting
        feed(j, t.new_shoe())  # round 2 of shoe 1 never dealt
    with open_for_recall(tmp_path) as reader:
        assert [(r.round_id, r.status) for r in reader.rounds()] == [
            ("1-1", "complete"), ("1-2", "incomplete"), ("2-1", "open")]


def test_unknown_rounds_and_bad_ids(journal_dir: Path) -> None:
    with open_for_recall(journal_dir) as reader:
        for rid in ("1-9", "2-1", "9", "x-1", "round one"):
            with pytest.raises(KeyError):
                reader.round(rid)
        with pytest.raises(ValueError):
            reader.rounds(last=0)


def test_missing_and_damaged_journal(tmp_path: Path) -> None:
    with pytest.raises(JournalMissing):
        open_for_recall(tmp_path)
    (tmp_path / "journal.sqlite").write_bytes(b"\x00garbage" * 1000)
    with pytest.raises(JournalDamaged):
        open_for_recall(tmp_path)


def test_cli_json_lists_round_records(journal_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recall", "--journal", str(journal_dir), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["round_id"] for r in records] == ["1-1", "1-2", "1-3", "1-4"]
    assert records[1]["settlements"][0]["net"] == 11000 and records[1]["cards"][3]["card"] == "6D"
    assert main(["recall", "--journal", str(journal_dir), "--json", "--last", "2"]) == 0
    assert [r["round_id"] for r in json.loads(capsys.readouterr().out)] == ["1-3", "1-4"]
    assert main(["recall", "--journal", str(journal_dir), "--json", "--round", "1-1"]) == 0
    (one,) = json.loads(capsys.readouterr().out)
    assert one["round_id"] == "1-1" and one["baccarat"]["winner"] == "banker"


def test_cli_output_into_a_closed_pipe_is_quiet(journal_dir: Path) -> None:
    """``tablesense recall --json | head`` when head has gone: no BrokenPipeError traceback, exit 141."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    try:
        proc = subprocess.run([str(Path(sys.executable).with_name("tablesense")), "recall", "--journal",
                               str(journal_dir), "--json"], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=60, check=False)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_cli_default_is_the_current_round_and_the_nine_before(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    t = Traffic()
    with Journal(tmp_path, TABLE) as j:
        feed(j, t.new_shoe())
        for _ in range(14):
            feed(j, t.baccarat_round())
    assert main(["recall", "--journal", str(tmp_path), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["round_id"] for r in records] == [f"1-{n}" for n in range(6, 16)]
    assert records[-1]["status"] == "open" and all(r["status"] == "complete" for r in records[:-1])


def test_cli_human_view(journal_dir: Path, tmp_path_factory: pytest.TempPathFactory,
                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recall", "--journal", str(journal_dir), "--round", "1-2"]) == 0
    out = capsys.readouterr().out
    for text in ("Round 1-2", "complete", "7H", "player", "player_pair", "11 to 1", "11000", "PAST_POSTING",
                 "winner: banker", "player pair", "minor units"):
        assert text in out, text
    example = (ROOT / "deploy" / "examples" / "baccarat.toml").read_text()
    config = tmp_path_factory.mktemp("cfg") / "table.toml"
    config.write_text(example.replace('directory = "/var/lib/tablesense/bac-01"',
                                      f'directory = "{journal_dir}"'))
    assert main(["recall", "--config", str(config), "--round", "1-2"]) == 0
    out = capsys.readouterr().out
    assert "110.00 EUR" in out and "10.00 EUR" in out  # money in the table's currency
    assert main(["recall", "--journal", str(journal_dir), "--round", "1-3"]) == 0
    assert "VOID" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--last", "0"], "--last must be at least 1"),
    (["--round", "7-7"], "no round '7-7'"),
])
def test_cli_user_errors(journal_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                         message: str) -> None:
    assert main(["recall", "--journal", str(journal_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_missing_damaged_journal_and_bad_config(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recall", "--journal", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no journal in" in err and err.count("\n") == 1
    (tmp_path / "journal.sqlite").write_bytes(b"not sqlite" * 500)
    assert main(["recall", "--journal", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "damaged" in err and err.count("\n") == 1
    assert main(["recall", "--config", str(tmp_path / "missing.toml")]) == 2
    err = capsys.readouterr().err
    assert "cannot read config" in err and err.count("\n") == 1


WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    from journal_support import Traffic
    from tablesense.daemon.journal import Journal

    t = Traffic()
    with Journal(sys.argv[1], "bac-7") as j:
        for inp, emits in t.new_shoe():
            j.append(inp, emits)
        print("ready", flush=True)
        while True:
            for inp, emits in t.baccarat_round():
                j.append(inp, emits)
            for row in j.pending(limit=50):
                j.mark_delivered(row.row_id)
""")


def test_recall_reads_while_another_process_writes(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(ROOT / "tests")],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        seen: list[int] = []
        while len(seen) < 8 or seen[-1] < 12:  # keeps reading as rounds complete under our feet
            with open_for_recall(tmp_path) as reader:
                records = reader.rounds(last=10)
            assert records and records[-1].round is not None
            for r in records[:-1]:
                assert r.status == "complete" and len(r.cards) == 4 and len(r.settlements) == 1
            seen.append(records[-1].round)
            assert writer.poll() is None
            time.sleep(0.02)
        assert seen == sorted(seen) and seen[-1] > seen[0]
        cli = subprocess.run([sys.executable, "-m", "tablesense", "recall", "--journal", str(tmp_path),
                              "--json", "--last", "3"], capture_output=True, text=True, env=env, timeout=60)
        assert cli.returncode == 0, cli.stderr
        assert len(json.loads(cli.stdout)) == 3
    finally:
        writer.kill()
        writer.wait()
        if writer.stdout is not None:
            writer.stdout.close()
    with Journal(tmp_path, TABLE):  # the killed writer left a journal that opens clean
        pass


@pytest.mark.parametrize(("game", "shown"), [("baccarat", False), ("ez-baccarat", True)])
def test_human_view_shows_dragon_7_only_on_an_ez_baccarat_table(game: str, shown: bool) -> None:
    """Player K 6 (6), Banker 4 K 3: a three-card Banker 7 win, a Dragon 7 only where EZ Baccarat is dealt."""
    import io

    from rich.console import Console

    from tablesense.daemon.commands.recall import render_round
    from tablesense.daemon.journal.recall import RoundRecord
    from tablesense.daemon.messages import BaccaratOutcome

    record = RoundRecord(table="T", round_id="1-1", shoe=1, round=1, game=game, status="complete", void=False,
                         started_ts="2026-11-29T12:00:00Z", ended_ts="2026-11-29T12:00:09Z",
                         baccarat=BaccaratOutcome(player=("KH", "6C"), banker=("4S", "KD", "3C"),
                                                  player_total=6, banker_total=7, winner="banker",
                                                  player_natural=False, banker_natural=False,
                                                  player_pair=False, banker_pair=False, dragon_7=True))
    console = Console(file=io.StringIO(), width=200)
    console.print(render_round(record))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "winner: banker" in text
    assert ("dragon 7" in text) is shown
