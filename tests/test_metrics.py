"""Prometheus metrics and the retained health message (daemon/metrics.py).

* While ``tablesense demo`` deals, its metrics endpoint is scraped twice: the counters move as the rounds
  do (cards in, settlements, journal commits and card-to-publish latencies observed), and every series
  the Grafana dashboard uses is there; the retained ``health`` message is on the broker.
* ``tablesense run`` with ``[metrics] textfile`` writes the node_exporter text file, with the table label.
* The config refuses a listener that is not on a loopback address; the dashboard uses only real names.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiomqtt
import pytest
from e2e_support import Daemon, Recorder
from prometheus_client.parser import text_string_to_metric_families

from tablesense.daemon import metrics
from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.config import ConfigError, parse_config
from tablesense.simulators.dealer import SimTable, sim_config_toml

ROOT = Path(__file__).resolve().parent.parent
TABLESENSE = str(Path(sys.executable).with_name("tablesense"))

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(240)]


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of one scrape."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items()
               if n == name and all(dict(ls).get(k) == want for k, want in labels.items()))


ON_EVENT_ONLY = {"tablesense_alarms_total", "tablesense_commission_minor_units_total"}
"""Labelled by what happened (an alarm code): no series until it first happens (test_journaled_counts)."""


def _results_seen(lines: list[str]) -> int:
    return sum(1 for ln in lines if re.match(r"\[demo-baccarat\] round 1/\d+ P ", ln))


def test_demo_metrics_move_with_the_rounds() -> None:
    proc = subprocess.Popen([TABLESENSE, "demo", "--rounds", "100000", "--no-ui", "--pace", "0.03",
                             "--seed", "11", "--metrics-port", "0", "--no-signage"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        m = re.search(r"broker 127\.0\.0\.1:(\d+).*metrics on (http://127\.0\.0\.1:\d+/metrics)", banner)
        assert m, banner
        broker_port, url = int(m.group(1)), m.group(2)

        def read_until_results(n: int) -> None:
            while _results_seen(lines) < n:
                line = proc.stdout.readline() if proc.stdout else ""
                assert line, "demo ended early:\n" + "".join(lines[-20:])
                lines.append(line)

        read_until_results(2)
        time.sleep(1.5)  # the gauges are read every second in the demo
        first = scrape(url)
        r1 = _results_seen(lines)
        read_until_results(r1 + 5)
        time.sleep(1.5)
        second = scrape(url)
        r2 = _results_seen(lines)

        for name in set(metrics.NAMES) - ON_EVENT_ONLY:  # every series the dashboard uses exists
            family = name.removesuffix("_total")
            assert any(n == name or n.startswith(family + "_") for n, _ in second), name

        cards = (total(first, "tablesense_inputs_total", kind="CardDrawn", device="shoe"),
                 total(second, "tablesense_inputs_total", kind="CardDrawn", device="shoe"))
        assert cards[1] - cards[0] >= 4 * (r2 - r1 - 1) > 0, cards  # a baccarat coup is 4 to 6 cards
        settled = (total(first, "tablesense_settlements_total"),
                   total(second, "tablesense_settlements_total"))
        assert settled[1] > settled[0] > 0, settled
        staked = total(second, "tablesense_staked_minor_units_total")
        assert staked > total(first, "tablesense_staked_minor_units_total")
        pads = total(second, "tablesense_inputs_total", device="pads")
        assert pads > total(first, "tablesense_inputs_total", device="pads")
        commits = (total(first, "tablesense_journal_commit_seconds_count"),
                   total(second, "tablesense_journal_commit_seconds_count"))
        assert commits[1] - commits[0] >= cards[1] - cards[0], commits
        latency = (total(first, "tablesense_card_to_publish_seconds_count"),
                   total(second, "tablesense_card_to_publish_seconds_count"))
        assert latency[1] - latency[0] >= cards[1] - cards[0] - 6, (latency, cards)  # in flight at a scrape
        assert total(second, "tablesense_card_to_publish_seconds_sum") > 0
        assert total(second, "tablesense_published_total") > total(first, "tablesense_published_total")
        assert total(second, "tablesense_broker_connected", table="demo-baccarat") == 1
        assert total(second, "tablesense_device_up", device="shoe") == 1
        assert total(second, "tablesense_frames_total", device="shoe") >= cards[1]
        assert ("tablesense_frames_rejected_total", (("device", "shoe"), ("reason", "checksum"),
                                                    ("table", "demo-baccarat"))) in second
        assert total(second, "tablesense_journal_size_bytes") > 0
        assert total(second, "tablesense_build_info", table="demo-baccarat") == 1

        async def health() -> dict[str, object]:
            async with aiomqtt.Client("127.0.0.1", broker_port) as c:
                await c.subscribe("tablesense/demo-baccarat/health", qos=1)
                async with asyncio.timeout(10):
                    async for msg in c.messages:
                        assert msg.retain
                        return json.loads(msg.payload)  # type: ignore[arg-type, no-any-return]
            raise AssertionError("no health message")

        body = asyncio.run(health())
        assert body["schema"] == "tablesense.health" and body["table"] == "demo-baccarat"
        assert int(body["inputs"]) > 0 and body["seq"] == 0 and body["msg_id"] == ""  # type: ignore[call-overload]
        assert body["devices"] == {"pads": "online", "shoe": "online"}
    finally:
        proc.terminate()
        proc.wait(20)


async def test_run_writes_the_textfile_with_the_table_label(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    try:
        dev = tmp_path / "dev"
        text = sim_config_toml("baccarat", urls={"shoe": str(dev / "shoe"), "pads": str(dev / "pads")},
                               host=broker.host, port=broker.port, journal=tmp_path / "journal",
                               table="bac-09")
        prom = tmp_path / "metrics" / "bac-09.prom"
        prom.parent.mkdir()
        text += f'[metrics]\ntextfile = "{prom}"\ninterval = 1\n'
        path = tmp_path / "table.toml"
        path.write_text(text)
        config = parse_config(text)
        sim = SimTable(config, dev, seed=3)
        await sim.start()
        daemon = Daemon(path, tmp_path / "daemon.log")
        daemon.start()
        rec = Recorder(broker, "tablesense/bac-09/#", "rec-metrics")
        await rec.start()
        try:
            await sim.wait_host(30)
            for _ in range(3):
                await sim.play_round()
            await rec.wait_for(lambda r: len(r.on("results")) == 3)

            def settled() -> float:
                if not prom.exists():
                    return 0
                return sum(s.value for f in text_string_to_metric_families(prom.read_text())
                           for s in f.samples if s.name == "tablesense_settlements_total")

            async with asyncio.timeout(10):
                while settled() < len(rec.on("settlements")):
                    await asyncio.sleep(0.2)
            body = prom.read_text()
            assert 'tablesense_inputs_total{device="shoe",kind="CardDrawn",table="bac-09"}' in body
            assert settled() == len(rec.on("settlements"))
            assert await daemon.terminate() == 0
        finally:
            daemon.kill()
            await rec.stop()
            await sim.close()
    finally:
        broker.stop()


def test_the_listener_must_be_on_a_loopback_address() -> None:
    base = (ROOT / "deploy" / "examples" / "uth.toml").read_text()
    assert parse_config(base + '[metrics]\nlisten = "127.0.0.1:9464"\n').metrics.listen == "127.0.0.1:9464"
    assert parse_config(base + '[metrics]\nlisten = "[::1]:9464"\n').metrics.listen == "[::1]:9464"
    for bad, why in (('listen = "0.0.0.0:9464"', "not a loopback address"), ('listen = "9464"', "HOST:PORT"),
                     ('textfile = "m.prom"', "absolute path"), ('textfile = "/run/m.txt"', ".prom"),
                     ("interval = 0", "1 to 3600")):
        with pytest.raises(ConfigError, match=re.escape(why)):
            parse_config(base + f"[metrics]\n{bad}\n")


def test_the_dashboard_uses_only_metrics_that_exist() -> None:
    dash = json.loads((ROOT / "deploy" / "grafana" / "tablesense.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\btablesense_[a-z_]+", e)}
    known = set(metrics.NAMES) | {f"{n}_bucket" for n in metrics.NAMES}
    assert used <= known, used - known
    base = {u.removesuffix("_bucket") for u in used}
    assert base == set(metrics.NAMES), set(metrics.NAMES) - base  # every metric is on the dashboard


def test_journaled_counts_alarms_holds_settlements_and_commission() -> None:
    from types import SimpleNamespace

    from tablesense.daemon.messages import AlarmMessage, RoundState, SettlementMessage
    from tablesense.daemon.table.inputs import Emit

    metrics.bind("unit-t")
    ts = "2026-12-01T10:00:00.000Z"
    alarm = AlarmMessage(table="unit-t", ts=ts, alarm_id="1.1", code="PAST_POSTING", severity="warning",
                         text="x", held=True)
    held = RoundState(table="unit-t", ts=ts, shoe=1, round=2, game="baccarat", phase="dealing", held=True,
                      hold_codes=("PAST_POSTING",))
    won = SettlementMessage(table="unit-t", ts=ts, shoe=1, round=2, spot="1B", seat="1", bet="banker",
                            hand=None, stake=1000, outcome="win", category="banker_win", odds="1 to 1",
                            net=950, commission=50)
    before = metrics.REGISTRY.get_sample_value
    start = {k: before(k, labels) or 0 for k, labels in (
        ("tablesense_alarms_total", {"table": "unit-t", "code": "PAST_POSTING", "severity": "warning"}),
        ("tablesense_commission_minor_units_total", {"table": "unit-t"}))}
    event = SimpleNamespace(device="pads")
    metrics.journaled(SimpleNamespace(event=event, ts=ts), [Emit(channel=None, message=m)  # type: ignore[arg-type]
                                                            for m in (alarm, held, won)], None)
    get = metrics.REGISTRY.get_sample_value
    alarm_labels = {"table": "unit-t", "code": "PAST_POSTING", "severity": "warning"}
    assert get("tablesense_alarms_total", alarm_labels) == start["tablesense_alarms_total"] + 1
    assert get("tablesense_open_holds", {"table": "unit-t"}) == 1
    assert get("tablesense_commission_minor_units_total", {"table": "unit-t"}) \
        == start["tablesense_commission_minor_units_total"] + 50
    input_labels = {"table": "unit-t", "device": "pads", "kind": "SimpleNamespace"}
    assert (get("tablesense_inputs_total", input_labels) or 0) >= 1
    metrics.bind("")
