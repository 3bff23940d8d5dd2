"""The sealed journal against a person with file access but not the key (docs/journal.md "Threat model").

Each attack is made the way such a person would: rows decoded with the public formats, changed,
re-encoded and recompressed (everything that can be recomputed without the key; the old CRC-32 could be).
Each must be caught -- by the start-up check when it touches the recent blocks, by ``tablesense verify``
wherever it is, and by recall, which never shows a forged row -- and ``run`` refuses to settle on it:

* a settlement rewritten from a loss to a win (its floor record too);
* a journaled card changed (replay would rebuild a different round);
* 22 pending messages marked delivered (they would never be published);
* the last two rounds deleted and the counters lowered; and the same done with an older sealed copy of
  the state, which only the chain heads held outside the file (the floor's) can expose.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest
from journal_support import TABLE, Step, Traffic, forge, replace_json

from tablesense.daemon.app import App
from tablesense.daemon.cli import main
from tablesense.daemon.config import parse_config
from tablesense.daemon.journal import Journal, JournalDamaged, audit, load_key, open_for_recall
from tablesense.daemon.journal.blocks import State, encode_state
from tablesense.daemon.journal.seal import MessageRow
from tablesense.daemon.messages import FloorRound, decode_message
from tablesense.simulators.dealer import sim_config_toml


def feed(journal: Journal, steps: list[Step]) -> list[Any]:
    rows = []
    for inp, emits in steps:
        rows += journal.append(inp, emits)
    return rows


def deliver(journal: Journal, rows: list[Any]) -> None:
    for row in rows:
        journal.mark_delivered(row.row_id)


def build(directory: Path, *, shoes: tuple[int, ...] = (5,), pending_rounds: int = 3, table: str = TABLE,
          prune: bool = False) -> Traffic:
    """Shoes of ``shoes`` rounds (all delivered), then ``pending_rounds`` rounds never acknowledged."""
    t = Traffic(table=table)
    with Journal(directory, table) as j:
        for rounds in shoes:
            rows = feed(j, t.new_shoe())
            for _ in range(rounds):
                rows += feed(j, t.baccarat_round())
            deliver(j, rows)
        for _ in range(pending_rounds):
            feed(j, t.baccarat_round())
        if prune:
            j.prune()  # archives closed blocks (nothing is old enough to delete)
    return t


def win(row: Any, shoe: int, rnd: int) -> Any:
    """The settlement of round ``shoe-rnd`` (and its floor record) rewritten from a loss to a win."""
    here = lambda body: body.get("shoe") == shoe and body.get("round") == rnd  # noqa: E731
    row = replace_json(row, "tablesense.settlement", here,
                       {"outcome": "win", "category": "pair", "odds": "11 to 1", "net": 27500})
    if isinstance(row, MessageRow) and b'"tablesense.floor_round"' in row.payload:
        floor = msgspec.json.decode(row.payload)
        if here(floor):
            floor["settlements"][0].update(outcome="win", category="pair", odds="11 to 1", net=27500)
            row = msgspec.structs.replace(row, payload=msgspec.json.encode(floor))
    return row


def verify_cli(directory: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["verify", "--journal", str(directory), "--key", str(_key_file()), *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def _key_file() -> Path:
    import os

    return Path(os.environ["CREDENTIALS_DIRECTORY"]) / "journal-key"


def test_an_untouched_journal_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build(tmp_path, shoes=(20, 3, 3), prune=True)
    with Journal(tmp_path, TABLE) as j:
        seq, head = j.chain_head()
    code, out = verify_cli(tmp_path, capsys)
    assert code == 0, out
    assert f"intact; chain head {seq}:{head};" in out and out.count("\n") == 1
    report = audit(tmp_path, load_key())
    assert report.ok and report.messages == seq and report.pending == 24 and report.blocks >= 29


def test_a_settlement_rewritten_to_a_win_is_caught(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    build(tmp_path)
    assert forge(tmp_path, lambda row: win(row, 1, 3)) == 2  # the settlement and the floor record
    with pytest.raises(JournalDamaged, match=r"outbox seq \d+ \(settlements, .*\) fails its seal"):
        Journal(tmp_path, TABLE)
    code, out = verify_cli(tmp_path, capsys)
    assert code == 1 and "FAILED" in out and "(settlements" in out and "fails its seal" in out, out
    with open_for_recall(tmp_path) as reader, pytest.raises(JournalDamaged, match="fails its seal"):
        reader.round("1-3")
    assert main(["recall", "--journal", str(tmp_path), "--round", "1-3"]) == 2
    assert "fails its seal" in capsys.readouterr().err


def test_an_old_archived_settlement_rewritten_is_caught_by_verify_and_recall(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Start-up verifies the blocks from the replay's start (two shoes) on; a forgery in an older,
    archived round is caught by ``tablesense verify`` and by any read of that round (recall, replay by
    seq), never shown as genuine."""
    build(tmp_path, shoes=(20, 3, 3), prune=True)
    assert forge(tmp_path, lambda row: win(row, 1, 2)) == 2
    Journal(tmp_path, TABLE).close()  # outside the start-up window (docs/journal.md "Start-up")
    code, out = verify_cli(tmp_path, capsys)
    assert code == 1 and "round 1-2" in out and "(settlements" in out, out
    with open_for_recall(tmp_path) as reader:
        with pytest.raises(JournalDamaged, match="fails its seal"):
            reader.round("1-2")
        with pytest.raises(JournalDamaged, match="fails its seal"):
            reader.rounds(last=100)
        assert reader.round("2-1").status == "complete"  # other rounds still read
    with Journal(tmp_path, TABLE) as j, pytest.raises(JournalDamaged, match="fails its seal"):
        j.messages_by_seq(1, j.last_seq)


def test_a_journaled_card_changed_is_caught(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The third card of round 1-4 made a queen: the Player hand would be a pair and replay would rebuild
    a different round."""
    build(tmp_path)
    rank_of_q = 12
    changed = forge(tmp_path, lambda row: replace_json(
        row, "CardDrawn", lambda body: body["seq"] == 4 * 4 + 3, {"card": {"rank": rank_of_q, "suit": "D"}}))
    assert changed == 1
    with pytest.raises(JournalDamaged, match=r"input entry \d+ \(CardDrawn, .*\) fails its seal"):
        Journal(tmp_path, TABLE)
    code, out = verify_cli(tmp_path, capsys)
    assert code == 1 and "(CardDrawn" in out


def test_22_pending_rows_marked_delivered_are_caught(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    build(tmp_path)
    conn = sqlite3.connect(tmp_path / "journal.sqlite")
    assert conn.execute("SELECT count(*) FROM pending").fetchone()[0] == 24
    conn.execute("DELETE FROM pending WHERE seq IN (SELECT seq FROM pending ORDER BY seq LIMIT 22)")
    conn.commit()
    conn.close()
    with pytest.raises(JournalDamaged, match=r"2 message.* await delivery, the sealed counters say 24"):
        Journal(tmp_path, TABLE)
    code, out = verify_cli(tmp_path, capsys)
    assert code == 1 and "delivery marks altered" in out


def test_pending_rows_swapped_for_delivered_ones_are_caught(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The count kept: 22 pending rows marked delivered and 22 delivered ones made pending instead."""
    build(tmp_path)
    conn = sqlite3.connect(tmp_path / "journal.sqlite")
    conn.execute("DELETE FROM pending WHERE seq IN (SELECT seq FROM pending ORDER BY seq LIMIT 22)")
    conn.executemany("INSERT INTO pending VALUES (?, NULL)", [(s,) for s in range(2, 24)])
    conn.commit()
    conn.close()
    with pytest.raises(JournalDamaged, match="contradicts the sealed delivery marks"):
        Journal(tmp_path, TABLE)
    code, out = verify_cli(tmp_path, capsys)
    assert code == 1 and "acknowledged it" in out


def _drop_last_two_rounds(directory: Path) -> State:
    """Delete the last two rounds' rows and blocks (open block included); return the state as it was."""
    conn = sqlite3.connect(directory / "journal.sqlite")
    try:
        state = msgspec.msgpack.decode(conn.execute("SELECT data FROM state").fetchone()[0], type=State)
        two_back = conn.execute("SELECT id, first_seq FROM blocks ORDER BY id DESC LIMIT 1 OFFSET 1"
                                ).fetchone()
        conn.execute("DELETE FROM log WHERE id >= ?", (two_back[0],))
        conn.execute("DELETE FROM outbox WHERE seq >= ?", (two_back[1],))
        conn.execute("DELETE FROM pending WHERE seq >= ?", (two_back[1],))
        conn.execute("DELETE FROM blocks WHERE id >= ?", (two_back[0],))
        conn.commit()
        return state
    finally:
        conn.close()


def test_the_last_two_rounds_deleted_and_the_counters_lowered_are_caught(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build(tmp_path)
    old = _drop_last_two_rounds(tmp_path)
    conn = sqlite3.connect(tmp_path / "journal.sqlite")
    row = conn.execute("SELECT id, first_seq, link_before FROM blocks ORDER BY id DESC LIMIT 1").fetchone()
    lowered = msgspec.structs.replace(old, entry=row[0] - 1, last_seq=row[1] - 1, head=bytes(row[2]),
                                      open_entry=row[0], open_seq=row[1], open_link=bytes(row[2]))
    conn.execute("UPDATE state SET data = ?", (encode_state(lowered),))
    conn.commit()
    conn.close()
    with pytest.raises(JournalDamaged, match=r"state record .* fails its seal"):
        Journal(tmp_path, TABLE)
    code, out = verify_cli(tmp_path, capsys)
    assert code == 1 and "fails its seal" in out


def test_a_rollback_to_an_older_sealed_copy_is_caught_by_the_chain_heads_held_outside(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The honest limit: the journal rolled back to an older, genuine copy of itself (state record
    included) looks intact from inside. The head the writer last recorded in ``journal.lock`` catches it
    while that file is left alone; the chain heads the floor received in each floor record catch it
    whatever was done to the files (``tablesense verify --head``)."""
    t = Traffic()
    backup = tmp_path / "backup"
    with Journal(tmp_path / "j", TABLE) as j:
        feed(j, t.new_shoe())
        for _ in range(4):
            feed(j, t.baccarat_round())
        j.flush_marks()
        j.close()
        shutil.copytree(tmp_path / "j", backup)
    with Journal(tmp_path / "j", TABLE) as j:
        rows = []
        for _ in range(2):
            rows += feed(j, t.baccarat_round())
    floor = [decode_message(r.payload) for r in rows if r.channel == "floor/rounds"][-1]
    assert isinstance(floor, FloorRound) and floor.chain_seq == floor.seq - 1 and len(floor.chain_head) == 64
    held = f"{floor.chain_seq}:{floor.chain_head}"
    code, out = verify_cli(tmp_path / "j", capsys, "--head", held)  # the genuine journal holds it
    assert code == 0 and "on the chain" in out, out
    shutil.copy(backup / "journal.sqlite", tmp_path / "j" / "journal.sqlite")  # the last two rounds gone
    with pytest.raises(JournalDamaged, match="behind the last head its writer recorded"):
        Journal(tmp_path / "j", TABLE)
    code, out = verify_cli(tmp_path / "j", capsys)
    assert code == 1 and "behind the last head" in out
    shutil.copy(backup / "journal.lock", tmp_path / "j" / "journal.lock")  # and the lock file too
    Journal(tmp_path / "j", TABLE).close()  # nothing inside the files tells
    code, out = verify_cli(tmp_path / "j", capsys, "--head", held)
    assert code == 1 and "NOT on the chain" in out


def test_a_floor_record_head_is_on_the_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = Traffic()
    with Journal(tmp_path, TABLE) as j:
        rows = feed(j, t.new_shoe())
        for _ in range(3):
            rows += feed(j, t.baccarat_round())
        status_seq, status_head = j.chain_head()
    floors = [decode_message(r.payload) for r in rows if r.channel == "floor/rounds"]
    heads = [f"{f.chain_seq}:{f.chain_head}" for f in floors if isinstance(f, FloorRound)]
    assert len(heads) == 3 and len(set(heads)) == 3
    args = [a for h in heads for a in ("--head", h)]
    code, out = verify_cli(tmp_path, capsys, *args, "--head", f"{status_seq}:{status_head}")
    assert code == 0 and out.count("on the chain") == 4, out
    wrong = heads[0][:-1] + ("0" if heads[0][-1] != "0" else "1")
    code, out = verify_cli(tmp_path, capsys, "--head", wrong)
    assert code == 1 and "NOT on the chain" in out


def test_run_refuses_to_settle_on_a_broken_chain(tmp_path: Path) -> None:
    urls = {"shoe": str(tmp_path / "s"), "pads": str(tmp_path / "p")}
    config = parse_config(sim_config_toml("baccarat", urls=urls, host="127.0.0.1", port=1,
                                          journal=tmp_path / "journal"))
    build(tmp_path / "journal", table=config.table)
    forge(tmp_path / "journal", lambda row: win(row, 1, 4))
    app = App(config)
    app.open()
    assert app.refusal is not None and "fails its seal" in app.refusal
    assert app.journal is None and not app.links


def test_a_journal_opened_with_another_key_says_so(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    build(tmp_path)
    other = tmp_path / "other.key"
    other.write_bytes(b"k" * 32)
    other.chmod(0o600)
    with pytest.raises(JournalDamaged, match="sealed with another key"):
        Journal(tmp_path, TABLE, key=b"k" * 32)
    assert main(["verify", "--journal", str(tmp_path), "--key", str(other)]) == 1
    assert "sealed with another key" in capsys.readouterr().out
