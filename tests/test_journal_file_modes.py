"""A new journal is private whatever the umask: the journal file, its WAL and WAL index, the lock file
(which holds the sealed head record) and a journal directory tablesense creates are owner-only. The
journal holds every face-down card of the completed rounds (the blackjack hole card, the UTH hands), so a
daemon run by hand with the usual umask 022 must not leave it readable by every user of the controller
(under systemd, ``StateDirectoryMode=0700`` protects the directory as well)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from journal_support import RealTable

from tablesense.daemon.journal import Journal


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_journal_and_its_directory_are_owner_only(tmp_path: Path, umask_022: None) -> None:
    directory = tmp_path / "state" / "bac-01"
    table = RealTable(seed=2)
    with Journal(directory, "bac-01") as j:
        j.append_many(table.round())
        files = {p.name: mode(p) for p in directory.iterdir()}
        assert {"journal.sqlite", "journal.sqlite-wal", "journal.lock"} <= set(files)
        assert all(m & 0o077 == 0 for m in files.values()), files
    assert mode(directory) == 0o700


def test_an_existing_directory_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    """A directory the operator made (e.g. systemd's StateDirectory) is not changed."""
    directory = tmp_path / "journal"
    directory.mkdir(mode=0o750)
    with Journal(directory, "bac-01"):
        pass
    assert mode(directory) == 0o750
    assert mode(directory / "journal.sqlite") == 0o600
