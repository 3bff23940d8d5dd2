"""End-to-end harness: simulated devices on ptys -> `tablesense run` (a subprocess) -> a Mosquitto the test
owns -> a recording subscriber. Used by tests/test_e2e_*.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tablesense.daemon.broker import MosquittoBroker
from tablesense.daemon.config import TableConfig, parse_config
from tablesense.simulators.dealer import SimTable, sim_config_toml

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))


class Received(NamedTuple):
    """One message as the subscriber got it (also unpacks as ``topic, body, retain``)."""

    topic: str
    body: dict[str, Any]
    retain: bool


async def retained_body(broker: MosquittoBroker, topic: str, timeout: float = 5.0) -> dict[str, Any]:
    """The JSON body of the message the broker keeps retained on ``topic`` (a fresh subscription's first
    message, which must carry the retain flag); ``AssertionError`` when none came within ``timeout`` s."""
    async with aiomqtt.Client(broker.host, broker.port) as c:
        await c.subscribe(topic, qos=1)
        try:
            async with asyncio.timeout(timeout):
                async for m in c.messages:
                    assert m.retain, f"the first message on {topic} is not the retained one"
                    return dict(json.loads(m.payload))  # type: ignore[arg-type]
        except TimeoutError:
            pass
    raise AssertionError(f"no retained message on {topic}")


@dataclass
class Recorder:
    """A persistent-session MQTT v5 subscriber recording everything under ``filter``."""

    broker: MosquittoBroker
    filter: str
    ident: str
    messages: list[Received] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    async def _run(self) -> None:
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 3600
        while True:
            try:
                async with aiomqtt.Client(self.broker.host, self.broker.port, identifier=self.ident,
                                          protocol=aiomqtt.ProtocolVersion.V5, clean_start=False,
                                          properties=props) as client:
                    await client.subscribe(self.filter, qos=1)
                    self._ready.set()
                    async for m in client.messages:
                        raw = m.payload if isinstance(m.payload, bytes | bytearray) else b""
                        body = json.loads(raw) if raw else {}
                        self.messages.append(Received(str(m.topic), body, bool(m.retain)))
            except aiomqtt.MqttError:
                await asyncio.sleep(0.05)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self._ready.wait(), 10)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def __aenter__(self) -> Recorder:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def on(self, suffix: str) -> list[Received]:
        """Messages whose topic ends with ``/suffix``, de-duplicated by ``msg_id`` (first kept)."""
        seen: set[str] = set()
        out = []
        for r in self.messages:
            if not r.topic.endswith("/" + suffix):
                continue
            mid = r.body.get("msg_id", "")
            if mid and mid in seen:
                continue
            seen.add(mid)
            out.append(r)
        return out

    async def wait_for(self, pred: Any, timeout: float = 60.0) -> None:
        async with asyncio.timeout(timeout):
            while not pred(self):
                await asyncio.sleep(0.02)


class Daemon:
    """``tablesense run --config FILE`` as a subprocess, its log in ``log``."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config, self.log = config, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen([TABLESENSE, "run", "--config", str(self.config)], stdout=logf,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    async def terminate(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait (in a thread); returns the exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.proc.wait, timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


async def start_table(broker: MosquittoBroker, tmp: Path, game: str, *, seed: int = 1,
                      cards: list[str] | None = None, table: str | None = None,
                      spots: int | None = None) -> tuple[TableConfig, SimTable, Daemon, Recorder]:
    """Devices, a config file, the recording subscriber (everything under the table, floor included)
    and the daemon subprocess, with the daemon connected to both devices."""
    dev = tmp / "dev"
    urls = {"shoe": str(dev / "shoe"), "pads": str(dev / "pads")}
    text = sim_config_toml(game, urls=urls, host=broker.host, port=broker.port, journal=tmp / "journal",
                           table=table, spots=spots)
    path = tmp / "table.toml"
    path.write_text(text)
    config = parse_config(text)
    sim = SimTable(config, dev, seed=seed, cards=cards)
    await sim.start()
    rec = Recorder(broker, f"tablesense/{config.table}/#", f"rec-{config.table}-{tmp.name}")
    await rec.start()
    daemon = Daemon(path, tmp / "daemon.log")
    daemon.start()
    try:
        await sim.wait_host(30)
    except TimeoutError:
        daemon.kill()
        raise AssertionError("daemon never opened the devices:\n" + daemon.log.read_text()[-3000:]) from None
    return config, sim, daemon, rec


def public(received: list[Received]) -> list[Received]:
    """Messages on topics signage may read (not floor/, not cmd/)."""
    return [r for r in received if "/floor/" not in r.topic and "/cmd/" not in r.topic]
