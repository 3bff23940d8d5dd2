"""``tablesense demo --floor``: the floor service runs inside the demo on an SQLite file (the same code as
``tablesense floor``) and its figures agree with the demo's own summary of what was staked and won."""

from __future__ import annotations

import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))


@pytest.mark.timeout(180)
def test_demo_floor_stores_every_round_and_agrees_with_the_summary() -> None:
    r = subprocess.run([TABLESENSE, "demo", "--floor", "--no-ui", "--no-signage", "--rounds", "6", "--seed",
                        "9"], capture_output=True, text=True, timeout=170)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert re.search(r"floor page on http://127\.0\.0\.1:\d+/", out), out
    # the summary table: wager, bets, won, lost, push, staked, net
    staked = sum(Decimal(m) for m in re.findall(r"^  [a-z_0-9]+ +\d+ +\d+ +\d+ +\d+ +([0-9.]+) +[-+0-9.]+$",
                                                 out, re.M))
    assert staked > 0, out
    house = Decimal(re.search(r"\(house: ([-+0-9.]+)\)", out).group(1))  # type: ignore[union-attr]
    m = re.search(r"floor: (\d+) messages of demo-baccarat stored in floor\.sqlite, (\d+) rounds, handle "
                  r"([-0-9.]+), house win ([-0-9.]+)", out)
    assert m, out
    assert int(m.group(2)) == 6
    assert Decimal(m.group(3)) == staked and Decimal(m.group(4)) == house
