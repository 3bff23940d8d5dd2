"""README.md's shell examples work as written, and its prose states what they print.

Each command is taken from README.md itself (not copied here), run with bash from the repository root
with the venv's ``tablesense`` first on ``PATH``, as a reader who activated the venv would.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def sh(command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=120)


def code_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, re.DOTALL)


def test_the_settle_example_prints_what_the_prose_says() -> None:
    (block,) = [b for b in code_blocks() if "tablesense settle -" in b]
    done = sh(block)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    after = README.split(block, 1)[1][:700]
    m = re.search(r"Banker wins (\d+) net after (\d+) commission", after)
    p = re.search(r"coloured pair pays (\d+) to 1, net (\d+)", after)
    t = re.search(r"stake (\d+), net (\d+), commission (\d+)", after)
    assert m and p and t, after
    by_bet = {w["bet"]: w for w in out["wagers"]}
    assert (by_bet["banker"]["net"], by_bet["banker"]["commission"]) == (int(m[1]), int(m[2]))
    assert by_bet["perfect_pairs"]["odds"] == f"{p[1]} to 1" and by_bet["perfect_pairs"]["net"] == int(p[2])
    assert by_bet["perfect_pairs"]["category"] == "colored_pair"
    assert (out["totals"]["stake"], out["totals"]["net"], out["totals"]["commission"]) == tuple(
        int(x) for x in t.groups())
    assert list(out) == ["game", "decks", "paytables", "commission", "wagers", "round", "totals"]


def test_the_journal_key_recipe_works_on_a_fresh_machine(tmp_path: Path) -> None:
    """The one-machine recipe's key command, with its directory not there yet (README step 2 names it
    before step 3 creates anything there). Without ``install -D`` it failed: "cannot create regular
    file '/tmp/ts/journal.key': No such file or directory"."""
    (command,) = re.findall(r"`(install [^`]*journal\.key[^`]*)`", README)
    where = tmp_path / "ts"
    done = sh(command.replace("/tmp/ts", str(where)))
    assert done.returncode == 0, done.stderr
    key = where / "journal.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32


def test_the_check_config_template_example_passes() -> None:
    (block,) = [b for b in code_blocks() if "check-config" in b]
    line = next(ln for ln in block.splitlines() if "--template" in ln)
    done = sh(line.split("#", 1)[0])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: bac-01 (baccarat, 8 decks")
