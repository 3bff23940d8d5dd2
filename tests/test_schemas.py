"""Committed JSON Schemas (docs/schemas/) must equal what the message models generate."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from tablesense.daemon.cli import main
from tablesense.daemon.commands.schemas import DEFAULT_DIR, drift, render_schemas
from tablesense.daemon.messages import SettlementMessage, message_types


def test_committed_schemas_match_models() -> None:
    bad = drift(DEFAULT_DIR)
    assert not bad, f"docs/schemas/ drifted from daemon/messages.py: {bad}; run `tablesense schemas`"


def test_one_schema_per_message_and_tag_is_required() -> None:
    files = render_schemas()
    assert len(files) == len(message_types())
    doc = json.loads(files["tablesense.settlement.json"])
    body = doc["$defs"]["SettlementMessage"]
    assert body["properties"]["schema"]["enum"] == ["tablesense.settlement"]
    assert {"schema", "table", "ts", "stake", "net"} <= set(body["required"])
    assert body["properties"]["stake"]["type"] == "integer"  # money is integer minor units


def test_check_mode_reports_drift_and_write_mode_fixes_it(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["schemas", "--out", str(tmp_path), "--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert main(["schemas", "--out", str(tmp_path)]) == 0
    (tmp_path / "old.json").write_text("{}")
    assert drift(tmp_path) == ["old.json"]
    assert main(["schemas", "--out", str(tmp_path)]) == 0
    assert main(["schemas", "--out", str(tmp_path), "--check"]) == 0
    # a produced message validates against its schema's required fields
    msg = SettlementMessage(table="T1", ts="2026-01-01T00:00:00Z", spot="1", seat="1", bet="player_pair",
                            hand=None, stake=500, outcome="win", category="pair", odds="11 to 1", net=5500)
    payload = json.loads(msgspec.json.encode(msg))
    schema = json.loads((tmp_path / "tablesense.settlement.json").read_text())
    assert set(schema["$defs"]["SettlementMessage"]["required"]) <= set(payload)
