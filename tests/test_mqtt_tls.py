"""The relay over TLS with server verification against a CA file (docs/security.md), against a
Mosquitto TLS listener the test owns; certificates made with the openssl command line."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tablesense.daemon.broker import MosquittoBroker, free_port, mosquitto_binary
from tablesense.daemon.mqtt import CredentialsError, MqttSettings, Relay, tls_context

pytestmark = pytest.mark.skipif(mosquitto_binary() is None or shutil.which("openssl") is None,
                                reason="needs mosquitto and openssl")


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    key, crt = d / f"{name}.key", d / f"{name}.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    f"/CN={name}", "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True)
    return key, crt


def make_server_cert(d: Path, ca_key: Path, ca_crt: Path) -> tuple[Path, Path]:
    key, csr, crt, ext = d / "server.key", d / "server.csr", d / "server.crt", d / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
                    str(key), "-out", str(csr)], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
                    "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(crt)],
                   check=True, capture_output=True)
    return key, crt


class Outbox:
    def __init__(self) -> None:
        self.delivered: set[int] = set()
        self.row = type("Row", (), {"row_id": 1, "seq": 1, "msg_id": "t-1", "channel": "results",
                                    "device": None, "payload": json.dumps({"msg_id": "t-1"}).encode(),
                                    "retain": False, "qos": 1})()

    def pending(self, limit: int, after_row: int) -> list[object]:
        return [] if 1 in self.delivered or after_row >= 1 else [self.row]

    def mark_delivered(self, row_id: int) -> None:
        self.delivered.add(row_id)

    def retained_latest(self) -> list[object]:
        return []


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> tuple[MosquittoBroker, Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    ca_key, ca_crt = make_ca(d, "tablesense-test-ca")
    _, other_ca = make_ca(d, "some-other-ca")
    key, crt = make_server_cert(d, ca_key, ca_crt)
    port = free_port()
    b = MosquittoBroker(d / "b", port=port, persistence=False,
                        extra=f"cafile {ca_crt}\ncertfile {crt}\nkeyfile {key}")
    b.start()
    yield b, ca_crt, other_ca
    b.stop()


async def run_until(relay: Relay, out: Outbox, seconds: float) -> None:
    task = asyncio.create_task(relay.run())
    for _ in range(int(seconds * 50)):
        if out.delivered:
            break
        await asyncio.sleep(0.02)
    await relay.stop(task)


async def test_tls_with_the_right_ca_publishes(tls_broker: tuple[MosquittoBroker, Path, Path]) -> None:
    broker, ca, _ = tls_broker
    out = Outbox()
    s = MqttSettings(host="127.0.0.1", port=broker.port, table="T1", client_id="tablesense-tls-1",
                     ca_file=str(ca))
    relay = Relay(s, out, lambda st: b"{}", tls=tls_context(str(ca)))
    await run_until(relay, out, 10)
    assert out.delivered == {1} and relay.connects >= 1


async def test_tls_with_an_unknown_ca_never_connects(tls_broker: tuple[MosquittoBroker, Path, Path]) -> None:
    broker, _, other = tls_broker
    out = Outbox()
    s = MqttSettings(host="127.0.0.1", port=broker.port, table="T2", client_id="tablesense-tls-2",
                     ca_file=str(other), backoff_min=0.05, backoff_max=0.1)
    relay = Relay(s, out, lambda st: b"{}", tls=tls_context(str(other)))
    await run_until(relay, out, 1.5)
    assert out.delivered == set() and relay.connects == 0


def test_tls_context_names_an_unusable_file(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="TLS CA file"):
        tls_context(str(tmp_path / "missing.pem"))
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(CredentialsError, match="TLS CA file"):
        tls_context(str(bad))
