"""The project stands alone: no tracked file cites a document that is not in the repository (the
reference notes its first drafts were written from) or a ticket number instead of saying what is meant.
Regulations, public standards and the repository's own docs are what code and docs cite."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_NOT_IN_REPO = ("ecosystem", "design", "devices-and-standards")
CITATION = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in _NOT_IN_REPO) + r")\.md\b"
                      + r"|\bissues? ?#?\d+(?:-\d+)?\b", re.IGNORECASE)


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
