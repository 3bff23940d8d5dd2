"""``tablesense demo --keep`` keeps the journal "(journal, logs)", but a newcomer could not read it: recall
and verify take ``--config FILE`` and the demo kept no config. It now writes its table's config beside
the journal and names it when it ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TABLESENSE = Path(sys.executable).parent / "tablesense"


@pytest.mark.timeout(180)
def test_a_kept_demo_journal_is_read_by_recall_and_verify(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    demo = subprocess.run([str(TABLESENSE), "demo", "--rounds", "1", "--seed", "3", "--no-ui", "--no-signage",
                           "--keep"], capture_output=True, text=True, env=env, timeout=150)
    assert demo.returncode == 0, demo.stderr
    (kept,) = tmp_path.glob("tablesense-demo-*")
    config = kept / "table.toml"
    assert f"tablesense recall --config {config}" in demo.stderr
    verify = subprocess.run([str(TABLESENSE), "verify", "--config", str(config)], capture_output=True,
                            text=True, timeout=60)
    assert verify.returncode == 0, verify.stderr
    assert "(table demo-baccarat" in verify.stdout and ": intact;" in verify.stdout
    recall = subprocess.run([str(TABLESENSE), "recall", "--config", str(config), "--json"],
                            capture_output=True, text=True, timeout=60)
    assert recall.returncode == 0, recall.stderr
    rounds = json.loads(recall.stdout)
    assert [(r["shoe"], r["round"], r["table"]) for r in rounds][:1] == [(1, 1, "demo-baccarat")]
    assert rounds[0]["settlements"] and rounds[0]["cards"]


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: nobody listens there


@pytest.mark.timeout(60)
def test_demo_with_a_broker_nobody_listens_on_says_it_cannot_reach_it(tmp_path: Path) -> None:
    """``demo --broker`` at a port nobody listens on waited the whole 15 s for a subscription that could
    not come and then said "cannot subscribe at the broker": the connection error was never looked at."""
    port = _closed_port()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    demo = subprocess.run([str(TABLESENSE), "demo", "--rounds", "1", "--no-ui", "--no-signage", "--broker",
                           f"127.0.0.1:{port}"], capture_output=True, text=True, env=env, timeout=50)
    assert demo.returncode == 2
    assert demo.stderr.startswith(f"tablesense: cannot reach the broker at 127.0.0.1:{port}: ")
    assert "refused" in demo.stderr.lower() and len(demo.stderr.strip().splitlines()) == 1
    assert list(tmp_path.glob("tablesense-demo-*")) == []  # its directory removed
