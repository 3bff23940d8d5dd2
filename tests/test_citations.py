"""The project stands alone: no tracked file cites a document that is not in the repository (the
reference notes its first drafts were written from, by file name or by their "seed NNN" numbers) or a
ticket number instead of saying what is meant. Regulations (58 Pa. Code § 627c.1, § 631a.8, § 631a.11,
§ 653b.5), the Perfect Pairs rule sheet, public standards and the repository's own docs are what code
and docs cite."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_NOT_IN_REPO = ("ecosystem", "design", "devices-and-standards")
CITATION = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in _NOT_IN_REPO) + r")\.md\b"
                      + r"|\bissues? ?#?\d+(?:-\d+)?\b"
                      # a reference note by its number (seed, a space or "_" or "-", then 001, or 3
                      # before a rule); a random seed is written "--seed 7", "seed=7", "seed 7," (the
                      # demo's banner) or "Random(7)", never with leading zeros or before a rule or §
                      + r"|\bseed[ _-]?0\d+|\bseed \d+(?= *(?:rule|§|\)|;|:|\(|definitions|part))"
                      + r"|\.\./shared\b|\bseeds?/", re.IGNORECASE)


def test_no_tracked_file_cites_what_is_not_there() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    bad = []
    for name in files:
        path = ROOT / name
        if path.is_symlink() or not path.is_file() or path.suffix in {".png", ".cap", ".jsonl"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for no, line in enumerate(text.splitlines(), start=1):
            if CITATION.search(line):
                bad.append(f"{name}:{no}: {line.strip()[:120]}")
    assert not bad, "say what is meant instead:\n" + "\n".join(bad)


def test_the_check_finds_such_a_citation() -> None:
    assert CITATION.search("large queues: " + "ecosystem" + ".md §5.2")
    assert CITATION.search("the journal (" + "issue" + " 5)")
    assert not CITATION.search("docs/journal.md, 58 Pa. Code § 627c.1(d)")


@pytest.mark.parametrize("text", [
    "Perfect Pairs (" + "seed" + " 001 rule 8)",
    "58 Pa. Code § 653b.5 (" + "Seed" + " 003)",
    "# " + "Seed" + " 003, transcribed row by row",
    "SEED" + "_003: dict[str, tuple[int | None, ...]] = {",
    "which events win (" + "seed" + " 2)",
    "eligible (" + "seed" + " 1 rule 2)",
    "see " + "../" + "shared" + "/rules.md",
])
def test_reference_notes_by_number_are_caught(text: str) -> None:
    assert CITATION.search(text), text


@pytest.mark.parametrize("text", [
    "tablesense demo: table demo-baccarat (baccarat), 20 rounds, seed 7, broker 127.0.0.1:41235",
    "tablesense simulate shoe --seed 7 --pace 0.5",
    "VirtualShoe(decks=8, seed=13)",
    "rng = random.Random(7)",
    "Perfect Pairs rule sheet rule 8; 58 Pa. Code § 631a.8(a)(3)",
])
def test_random_seeds_and_real_citations_pass(text: str) -> None:
    assert not CITATION.search(text), text
