"""deploy/mosquitto/: the production broker config (TLS + password file + ACL) on a real Mosquitto.

The broker runs ``deploy/mosquitto/tablesense-tls.conf`` as shipped, with only its two listener ports
(loopback, free), the certificate/password/ACL file paths and the persistence directory replaced, and
``deploy/mosquitto/acl`` verbatim. Certificates are made here with the ``openssl`` binary (a test CA, a
broker certificate for 127.0.0.1/localhost, a client certificate, and a second, unrelated CA); the
password file with ``mosquitto_passwd -b``. Every client verifies the broker's certificate.

A refused publish is seen as a negative MQTT v5 PUBACK (0x87 Not authorized) through the daemon's own
detection (``daemon.mqtt._AckClient`` / :class:`PublishRejected`). "Never reaches a subscriber" is shown
without timing: the subscriber reads in order until a later sentinel message from the same publisher
arrives (Mosquitto delivers one publisher's QoS 1 messages to a subscriber in order), and the refused
message must not be among what came before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import re
import shutil
import ssl
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from command_support import body
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tablesense.daemon.broker import free_port, mosquitto_binary
from tablesense.daemon.mqtt import PublishRejected, _AckClient

DEPLOY = Path(__file__).resolve().parent.parent / "deploy" / "mosquitto"
T1, T2 = "bac-01", "bj-07"
USERS = {f"table-{T1}": "pw-table-1", f"table-{T2}": "pw-table-2", f"signage-{T1}": "pw-signage-1",
         "floor-1": "pw-floor-1", "floor-2": "pw-floor-2", "surveillance": "pw-surv"}
GUARD_S = 15.0
"""Hang guard for a whole exchange (never an assertion about speed)."""

OPENSSL = shutil.which("openssl")
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or (
    "/usr/bin/mosquitto_passwd" if os.access("/usr/bin/mosquitto_passwd", os.X_OK) else None)
DYNSEC = next((str(p) for pattern in ("/usr/lib/*/mosquitto_dynamic_security.so",
                                      "/usr/lib/mosquitto_dynamic_security.so",
                                      "/usr/local/lib/mosquitto_dynamic_security.so")
               for p in sorted(Path("/").glob(pattern.lstrip("/")))), None)
pytestmark = pytest.mark.skipif(
    mosquitto_binary() is None or OPENSSL is None or MOSQUITTO_PASSWD is None or DYNSEC is None,
    reason="needs the mosquitto and mosquitto_passwd binaries and the dynamic security plugin (Debian "
           "package mosquitto) and openssl: the password file must be made by mosquitto_passwd itself, "
           "never by hand")


# ------------------------------------------------------------------------------------ certificates

def _openssl(*args: str, cwd: Path) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _make_ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _make_cert(d: Path, ca: str, name: str, cn: str, ext: str) -> None:
    (d / f"{name}.ext").write_text(ext)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
             f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


# ------------------------------------------------------------------------------------ the broker

@dataclass
class Broker:
    port: int
    cert_port: int
    dir: Path
    log: Path
    pid: int

    @property
    def ca(self) -> str:
        return str(self.dir / "ca.pem")


def shipped_config(d: Path, port: int, cert_port: int) -> str:
    """deploy/mosquitto/tablesense-tls.conf with only ports, file paths and persistence replaced."""
    text = (DEPLOY / "tablesense-tls.conf").read_text()
    replacements = {
        r"^listener 8883$": f"listener {port} 127.0.0.1",
        r"^listener 8884$": f"listener {cert_port} 127.0.0.1",
        r"^password_file .*$": f"password_file {d / 'passwd'}",
        r"^acl_file .*$": f"acl_file {DEPLOY / 'acl'}",
        r"^cafile .*$": f"cafile {d / 'ca.pem'}",
        r"^certfile .*$": f"certfile {d / 'broker.pem'}",
        r"^keyfile .*$": f"keyfile {d / 'broker.key'}",
        r"^persistence_location .*$": f"persistence_location {d}/",
        r"^plugin .*mosquitto_dynamic_security\.so$": f"plugin {DYNSEC}",
        r"^plugin_opt_config_file .*$": f"plugin_opt_config_file {d / 'dynsec.json'}",
    }
    for pattern, new in replacements.items():
        text, n = re.subn(pattern, new, text, flags=re.MULTILINE)
        assert n >= 1, f"the shipped config lost its {pattern!r} line"
    # the security settings under test are the shipped ones, untouched
    for line in ("per_listener_settings false", "allow_anonymous false", "require_certificate true",
                 "use_identity_as_username true"):
        assert re.search(rf"^{line}$", text, flags=re.MULTILINE), line
    # the identity binding under test, on both listeners
    assert len(re.findall(r"^use_username_as_clientid true$", text, flags=re.MULTILINE)) == 2
    # as root mosquitto would switch to user "mosquitto", which cannot read the temp directory
    return text + f"\nuser {getpass.getuser()}\nlog_dest file {d / 'mosquitto.log'}\nlog_type all\n"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    d = tmp_path_factory.mktemp("tls-broker")
    _make_ca(d, "ca")
    _make_ca(d, "rogue-ca")
    _make_cert(d, "ca", "broker", "localhost",
               "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _make_cert(d, "ca", "client-t1", f"table-{T1}", "extendedKeyUsage=clientAuth\n")
    _make_cert(d, "rogue-ca", "client-rogue", f"table-{T1}", "extendedKeyUsage=clientAuth\n")
    passwd = d / "passwd"
    assert MOSQUITTO_PASSWD is not None
    for i, (user, pw) in enumerate(USERS.items()):
        args = [MOSQUITTO_PASSWD, *(["-c"] if i == 0 else []), "-b", str(passwd), user, pw]
        subprocess.run(args, check=True, capture_output=True, timeout=30)
    port, cert_port = free_port(), free_port()
    conf = d / "mosquitto.conf"
    shutil.copyfile(DEPLOY / "dynsec.json", d / "dynsec.json")  # verbatim (the plugin may rewrite its file)
    conf.write_text(shipped_config(d, port, cert_port))
    binary = mosquitto_binary()
    assert binary is not None
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    b = Broker(port, cert_port, d, d / "mosquitto.log", proc.pid)
    try:
        _wait_listening(proc, b)
        yield b
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_listening(proc: subprocess.Popen[bytes], b: Broker) -> None:
    import socket
    import time
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            log = b.log.read_text() if b.log.exists() else ""
            pytest.fail(f"mosquitto exited with {proc.returncode}: {err[-800:]} {log[-800:]}")
        ok = 0
        for p in (b.port, b.cert_port):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", p), timeout=0.2):
                ok += 1
        if ok == 2:
            return
        time.sleep(0.05)
    pytest.fail("mosquitto did not listen within 10 s")


def client(b: Broker, user: str | None = None, password: str | None = None, *, ca: str | None = None,
           cert: str | None = None, port: int | None = None, tls12: bool = False,
           identifier: str | None = None, persistent: bool = False, clean: bool = True) -> _AckClient:
    """A verifying TLS client (MQTT v5) of the test broker; ``user`` defaults to its password entry.

    ``tls12``: at most TLS 1.2, where a refused client certificate fails the handshake itself (with TLS
    1.3 the refusal comes after the client's handshake is done and paho only notices at its timeout).
    ``identifier``: the client id it asks for (default: a random one; the broker uses the user name
    anyway). ``persistent``: a session that outlives the connection (expiry 1 h); ``clean``: Clean Start.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca or b.ca)
    if tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if cert:
        ctx.load_cert_chain(str(b.dir / f"{cert}.pem"), str(b.dir / f"{cert}.key"))
    if user is not None and password is None:
        password = USERS[user]
    props = None
    if persistent:
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600
    return _AckClient(hostname="127.0.0.1", port=port or b.port, username=user, password=password,
                      tls_context=ctx, protocol=aiomqtt.ProtocolVersion.V5,
                      identifier=identifier or f"acl-test-{uuid.uuid4().hex[:10]}", timeout=5,
                      clean_start=clean, properties=props)


@contextlib.asynccontextmanager
async def connected(c: _AckClient) -> AsyncIterator[_AckClient]:
    async with c:
        yield c


async def pub(c: _AckClient, topic: str, payload: bytes, props: Properties | None = None) -> None:
    await c.publish_acked(topic, payload, 1, False, props, timeout=5)


async def read_until(c: _AckClient, done: Callable[[aiomqtt.Message], bool]) -> list[aiomqtt.Message]:
    """Every message up to and including the first for which ``done`` is true."""
    got: list[aiomqtt.Message] = []
    async with asyncio.timeout(GUARD_S):
        async for m in c.messages:
            got.append(m)
            if done(m):
                return got
    raise AssertionError("the message stream ended")


async def logged(b: Broker, *texts: str) -> bool:
    """Whether every one of ``texts`` appears in the broker's log; Mosquitto writes its log after it
    handled the event, so poll (hang guard only) rather than read once."""
    async with asyncio.timeout(GUARD_S):
        while True:
            log = b.log.read_text(errors="replace") if b.log.exists() else ""
            if all(t in log for t in texts):
                return True
            await asyncio.sleep(0.02)


def topics(msgs: list[aiomqtt.Message]) -> list[str]:
    return [str(m.topic) for m in msgs]


def is_payload(p: bytes) -> Callable[[aiomqtt.Message], bool]:
    return lambda m: m.payload == p


def sub_codes(result: object) -> list[int]:
    return [getattr(r, "value", r) for r in (result if isinstance(result, list | tuple) else [result])]


# ------------------------------------------------------------------------------------ who may connect

def _connected_sockets_nodelay(pid: int) -> list[int]:
    """TCP_NODELAY of every connected TCP socket of process ``pid``, read from a duplicate of each
    descriptor (pidfd_getfd(2), Linux 5.6; the caller may trace the process: it is our child). Skips
    the test where the kernel refuses it."""
    import ctypes
    import errno
    import socket

    libc = ctypes.CDLL(None, use_errno=True)
    sys_pidfd_getfd = 438  # the same number on every architecture (the unified syscall table)
    pidfd = os.pidfd_open(pid)
    values: list[int] = []
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                    continue
            except FileNotFoundError:
                continue
            dup = libc.syscall(sys_pidfd_getfd, pidfd, int(name), 0)
            if dup < 0:
                err = ctypes.get_errno()
                if err == errno.EBADF:  # closed meanwhile
                    continue
                pytest.skip(f"pidfd_getfd refused: {os.strerror(err)}")
            with socket.socket(fileno=dup) as s:  # closes the duplicate only
                if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                try:
                    s.getpeername()
                except OSError:  # a listener
                    continue
                values.append(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    finally:
        os.close(pidfd)
    return values


async def test_the_broker_sends_without_nagle_delay(broker: Broker) -> None:
    """``set_tcp_nodelay true``: the broker's side of each client connection has TCP_NODELAY, so a
    PUBACK or the second message of a settlement burst never waits for the peer's delayed ACK (up to
    40 ms on Linux). Read off the broker's own sockets, not timed."""
    async with connected(client(broker, f"signage-{T1}")), connected(client(broker, "floor-1")):
        values = _connected_sockets_nodelay(broker.pid)
    assert len(values) >= 2, values  # both clients' connections found
    assert all(values), values


async def test_anonymous_client_is_refused(broker: Broker) -> None:
    with pytest.raises(aiomqtt.MqttCodeError) as exc:
        async with client(broker):
            pass
    assert exc.value.rc in (0x86, 0x87), exc.value  # Bad user name or password / Not authorized


async def test_wrong_password_is_refused(broker: Broker) -> None:
    with pytest.raises(aiomqtt.MqttCodeError) as exc:
        async with client(broker, "floor-1", "not-the-password"):
            pass
    assert exc.value.rc in (0x86, 0x87), exc.value


async def test_client_with_another_ca_fails_server_verification(broker: Broker) -> None:
    """The broker's certificate does not chain to the CA the client trusts: the handshake fails."""
    with pytest.raises(aiomqtt.MqttError) as exc:
        async with client(broker, "floor-1", ca=str(broker.dir / "rogue-ca.pem")):
            pass
    assert "CERTIFICATE_VERIFY_FAILED" in str(exc.value) or isinstance(
        exc.value.__cause__ or exc.value.__context__, ssl.SSLCertVerificationError), repr(exc.value)


# ------------------------------------------------------------------------------------ signage

async def test_signage_reads_public_topics_only(broker: Broker) -> None:
    base = f"tablesense/{T1}"
    token = uuid.uuid4().hex.encode()
    async with connected(client(broker, f"signage-{T1}")) as signage, \
            connected(client(broker, f"table-{T1}")) as table:
        # subscriptions to topics signage may not read (and a catch-all) are accepted or refused by the
        # broker, but must never deliver anything from them
        await signage.subscribe(f"{base}/round", qos=1)
        await signage.subscribe(f"{base}/results", qos=1)
        await signage.subscribe(f"{base}/devices/+", qos=1)
        refused = sub_codes(await signage.subscribe(f"{base}/floor/rounds", qos=1))
        sub_codes(await signage.subscribe(f"{base}/alarms", qos=1))
        sub_codes(await signage.subscribe("tablesense/#", qos=1))
        await pub(table, f"{base}/round", b'{"phase": "dealing", "' + token + b'": 1}')
        await pub(table, f"{base}/floor/rounds", b"full record " + token)
        await pub(table, f"{base}/alarms", b"alarm " + token)
        await pub(table, f"{base}/cmd/void_round", b"not a table's business " + token)
        await pub(table, f"{base}/devices/shoe", b"device " + token)
        await pub(table, f"{base}/results", b"results " + token)
        got = await read_until(signage, is_payload(b"results " + token))
    seen = topics(got)
    assert f"{base}/round" in seen and f"{base}/devices/shoe" in seen and f"{base}/results" in seen
    assert not any("/floor/" in t or t.endswith("/alarms") or "/cmd/" in t for t in seen), seen
    # Mosquitto 2.0 accepts a SUBSCRIBE it will never deliver to (the read ACL is applied per message);
    # a broker that refuses it answers 0x87. Either way nothing was delivered (checked above).
    assert refused[0] in (0, 1, 0x87), refused


async def test_signage_cannot_publish_anything(broker: Broker) -> None:
    base = f"tablesense/{T1}"
    token = uuid.uuid4().hex.encode()
    async with connected(client(broker, f"signage-{T1}")) as signage, \
            connected(client(broker, f"table-{T1}")) as table, \
            connected(client(broker, "floor-1")) as floor:
        await table.subscribe(f"{base}/cmd/#", qos=1)
        await floor.subscribe("tablesense/#", qos=1)
        for topic in (f"{base}/cmd/void_round", f"{base}/round", f"{base}/results",
                      f"tablesense/signage-{T1}/round", f"{base}/reply/x"):
            with pytest.raises(PublishRejected) as exc:
                await pub(signage, topic, b"forged " + token)
            assert exc.value.reason.value == 0x87, exc.value
        # the floor's real command reaches the table; the forged one never did
        await pub(floor, f"{base}/cmd/ack_alarm", b"real " + token)
        got = await read_until(table, is_payload(b"real " + token))
        assert [m.payload for m in got] == [b"real " + token]
        seen = await read_until(floor, is_payload(b"real " + token))
        assert not any(m.payload == b"forged " + token for m in seen)


# ------------------------------------------------------------------------------------ tables

async def test_one_table_cannot_publish_as_another(broker: Broker) -> None:
    token = uuid.uuid4().hex.encode()
    async with connected(client(broker, f"table-{T2}")) as other, \
            connected(client(broker, "floor-1")) as floor:
        await floor.subscribe("tablesense/#", qos=1)
        for suffix in ("results", "settlements", "status", "floor/rounds", "cmd/void_round"):
            with pytest.raises(PublishRejected) as exc:
                await pub(other, f"tablesense/{T1}/{suffix}", b"impostor " + token)
            assert exc.value.reason.value == 0x87, exc.value
        await pub(other, f"tablesense/{T2}/results", b"own " + token)
        got = await read_until(floor, is_payload(b"own " + token))
    assert [(str(m.topic), m.payload) for m in got] == [(f"tablesense/{T2}/results", b"own " + token)]


async def test_table_reads_only_its_own_commands(broker: Broker) -> None:
    token = uuid.uuid4().hex.encode()
    async with connected(client(broker, f"table-{T2}")) as other, \
            connected(client(broker, "floor-1")) as floor:
        await other.subscribe("tablesense/+/cmd/#", qos=1)
        await other.subscribe(f"tablesense/{T1}/results", qos=1)
        await pub(floor, f"tablesense/{T1}/cmd/void_round", b"for t1 " + token)
        await pub(floor, f"tablesense/{T2}/cmd/void_round", b"for t2 " + token)
        got = await read_until(other, is_payload(b"for t2 " + token))
    assert [m.payload for m in got] == [b"for t2 " + token]


# ------------------------------------------------------------------------------------ floor & commands

async def test_floor_reads_everything_and_commands_round_trip(broker: Broker) -> None:
    """The floor system reads floor/rounds and alarms, sends a command with a v5 response topic and
    correlation data; the table answers under its own tree (reply/), which the floor reads."""
    base = f"tablesense/{T1}"
    token = uuid.uuid4().hex.encode()
    async with connected(client(broker, "floor-1")) as floor, \
            connected(client(broker, f"table-{T1}")) as table:
        await floor.subscribe(f"{base}/#", qos=1)
        await table.subscribe(f"{base}/cmd/#", qos=1)
        await pub(table, f"{base}/floor/rounds", b"record " + token)
        await pub(table, f"{base}/alarms", b"alarm " + token)
        got = await read_until(floor, is_payload(b"alarm " + token))
        assert topics(got)[-2:] == [f"{base}/floor/rounds", f"{base}/alarms"]

        props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        props.ResponseTopic = f"{base}/reply/floor"
        props.CorrelationData = token
        await pub(floor, f"{base}/cmd/void_round", b'{"operator": "supervisor 17"}', props)
        [cmd] = await read_until(table, lambda m: True)
        assert str(cmd.topic) == f"{base}/cmd/void_round"
        assert cmd.properties is not None
        reply_props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        reply_props.CorrelationData = cmd.properties.CorrelationData
        await pub(table, cmd.properties.ResponseTopic, b'{"ok": true, "reason": ""}', reply_props)
        got = await read_until(floor, lambda m: str(m.topic) == f"{base}/reply/floor")
        assert got[-1].properties is not None and got[-1].properties.CorrelationData == token


async def test_surveillance_reads_alarms_but_sends_no_command(broker: Broker) -> None:
    base = f"tablesense/{T1}"
    token = uuid.uuid4().hex.encode()
    async with connected(client(broker, "surveillance")) as surv, \
            connected(client(broker, f"table-{T1}")) as table:
        await surv.subscribe(f"{base}/alarms", qos=1)
        await pub(table, f"{base}/alarms", b"alarm " + token)
        got = await read_until(surv, is_payload(b"alarm " + token))
        assert topics(got) == [f"{base}/alarms"]
        with pytest.raises(PublishRejected):
            await pub(surv, f"{base}/cmd/void_round", b"{}")


# ------------------------------------------------------------------------------------ client certificates

async def test_client_certificate_identity_is_the_user_name(broker: Broker) -> None:
    """Listener 2 requires a client certificate and takes its CN as the user name: CN=table-bac-01 may
    write its own table and nothing else, without a password."""
    token = uuid.uuid4().hex.encode()
    async with connected(client(broker, cert="client-t1", port=broker.cert_port)) as table, \
            connected(client(broker, "floor-1")) as floor:
        await floor.subscribe("tablesense/#", qos=1)
        with pytest.raises(PublishRejected):
            await pub(table, f"tablesense/{T2}/results", b"impostor " + token)
        await pub(table, f"tablesense/{T1}/results", b"cert " + token)
        got = await read_until(floor, is_payload(b"cert " + token))
    assert topics(got) == [f"tablesense/{T1}/results"]


async def test_certificate_listener_refuses_without_a_valid_client_certificate(broker: Broker) -> None:
    """No client certificate (a password is not enough there), or one from another CA: refused."""
    with pytest.raises(aiomqtt.MqttError):
        async with client(broker, "floor-1", port=broker.cert_port, tls12=True):
            pass
    with pytest.raises(aiomqtt.MqttError):
        async with client(broker, cert="client-rogue", port=broker.cert_port, tls12=True):
            pass
    assert await logged(broker, "peer did not return a certificate", "certificate verify failed")


# ------------------------------------------------------------------------------------ the daemon itself

def daemon_config(b: Broker, tmp: Path) -> Any:
    """Table bac-01 over TLS to the test broker as user table-bac-01 (credentials file mode 0600)."""
    from tablesense.daemon.config import parse_config
    creds = tmp / "bac-01.credentials"
    creds.write_text(f'username = "table-{T1}"\npassword = "{USERS[f"table-{T1}"]}"\n')
    creds.chmod(0o600)
    return parse_config(f"""
table = "{T1}"
game = "baccarat"
decks = 8
seats = ["1"]
[commission]
rate = "5%"
[wagers.player]
[wagers.perfect_pairs]
[spots]
"1P" = {{ seat = "1", bet = "player" }}
"1PP" = {{ seat = "1", bet = "perfect_pairs", hand = "player" }}
[mqtt]
host = "127.0.0.1"
port = {b.port}
credentials_file = "{creds}"
[mqtt.tls]
ca_file = "{b.ca}"
[journal]
directory = "{tmp / 'journal'}"
""")


async def test_the_daemon_runs_within_its_acl_over_tls(broker: Broker, tmp_path: Path) -> None:
    """`tablesense run`'s App as user table-bac-01 over verified TLS: its status is published (nothing
    it writes is refused), a floor command with a v5 response topic under reply/ is answered with the
    correlation data, and a reply to a topic outside its table's reply/ is never even sent (the daemon
    refuses it itself, so the broker denies nothing) without harming the daemon (the next command is
    still answered)."""
    import json

    from tablesense.daemon.app import App
    app = App(daemon_config(broker, tmp_path))
    log_start = len(broker.log.read_bytes()) if broker.log.exists() else 0  # earlier tests' table-bac-01
    task = asyncio.create_task(app.run())
    base = f"tablesense/{T1}"
    try:
        async with connected(client(broker, "floor-1")) as floor:
            await floor.subscribe(f"{base}/#", qos=1)
            got = await read_until(floor, lambda m: str(m.topic) == f"{base}/status"
                                   and json.loads(m.payload)["state"] == "online")  # type: ignore[arg-type]
            assert got
            for reply_to, token in ((f"tablesense/floor-replies/{T1}", b"outside"),
                                    (f"{base}/reply/floor", b"inside")):
                props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
                props.ResponseTopic = reply_to
                props.CorrelationData = token
                await pub(floor, f"{base}/cmd/ack_alarm", body("supervisor 17", {"alarm": "9.9"}), props)
            got = await read_until(floor, lambda m: str(m.topic) == f"{base}/reply/floor")
            reply = got[-1]
            assert reply.properties is not None and reply.properties.CorrelationData == b"inside"
            answer = json.loads(reply.payload)  # type: ignore[arg-type]
            assert answer["ok"] is False and "9.9" in answer["reason"]
            assert not any(str(m.topic).startswith("tablesense/floor-replies") for m in got)
        # every row the daemon journaled is delivered: none was refused by the ACL (a refused row stays
        # pending); the relay marks rows after their PUBACK, so wait for it (hang guard only)
        assert app.journal is not None
        async with asyncio.timeout(GUARD_S):
            while app.journal.pending_count():
                await asyncio.sleep(0.02)
    finally:
        app.stop()
        await asyncio.wait_for(task, 15)
    # the daemon never tried: the broker, which has logged everything before our own commands' replies,
    # denied nothing to the table's user
    assert await logged(broker, f"Received PUBLISH from table-{T1}")
    ours = broker.log.read_bytes()[log_start:].decode(errors="replace")
    assert f"Received PUBLISH from table-{T1}" in ours and f"Denied PUBLISH from table-{T1}" not in ours


# ------------------------------------------------------------------------------------ identities bound

async def test_signage_credentials_cannot_take_over_the_daemons_session(broker: Broker,
                                                                        tmp_path: Path) -> None:
    """The tester, with the signage password, connected as the daemon's client id and kicked the real
    daemon off 26 times in 30 s. With ``use_username_as_clientid`` the broker makes that connection
    ``signage-bac-01`` whatever id it asks for: the daemon (`App` as `tablesense run` runs it, user
    table-bac-01 over verified TLS) stays connected on its first connection and keeps answering."""
    import json

    from tablesense.daemon.app import App
    app = App(daemon_config(broker, tmp_path))
    task = asyncio.create_task(app.run())
    base = f"tablesense/{T1}"
    try:
        async with asyncio.timeout(GUARD_S):
            while app.relay is None or not app.relay.connected:
                await asyncio.sleep(0.01)
        assert app.relay.settings.client_id == f"table-{T1}"  # the user name is the client id
        for identifier in (f"table-{T1}", f"tablesense-{T1}"):
            for _ in range(3):
                async with connected(client(broker, f"signage-{T1}", identifier=identifier, persistent=True,
                                            clean=False)) as signage:
                    with pytest.raises(PublishRejected):  # and it is still only signage
                        await pub(signage, f"{base}/status", b'{"state": "offline"}')
        async with connected(client(broker, "floor-1")) as floor:
            await floor.subscribe(f"{base}/reply/#", qos=1)
            props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            props.ResponseTopic = f"{base}/reply/floor"
            props.CorrelationData = b"after"
            await pub(floor, f"{base}/cmd/ack_alarm", body("supervisor 17", {"alarm_id": "9.9"}), props)
            got = await read_until(floor, lambda m: str(m.topic) == f"{base}/reply/floor")
            assert json.loads(got[-1].payload)["command"] == "ack_alarm"  # type: ignore[arg-type]
        assert app.relay.connects == 1 and app.relay.connected and app.relay.takeovers == 0
    finally:
        app.stop()
        await asyncio.wait_for(task, 15)
    log = broker.log.read_text(errors="replace")
    assert f"Client table-{T1} already connected" not in log
    assert await logged(broker, f"as signage-{T1} (p5, c0")


async def test_signage_credentials_can_neither_take_nor_wipe_the_floors_session(broker: Broker) -> None:
    """The tester connected with the floor system's client id and took its queued settlements, or wiped
    its session. Now the floor's persistent session is out of reach of other users: its queued messages
    are all there, in order, when it comes back."""
    base = f"tablesense/{T1}"
    tokens = [uuid.uuid4().hex.encode() for _ in range(3)]
    async with connected(client(broker, "floor-2", persistent=True, clean=True)) as floor:
        await floor.subscribe(f"{base}/settlements", qos=1)
    async with connected(client(broker, f"table-{T1}")) as table:  # the floor is away: queued for it
        for t in tokens:
            await pub(table, f"{base}/settlements", b"settlement " + t)
    for clean in (True, False):  # wipe it (Clean Start), take it (resume it)
        async with connected(client(broker, f"signage-{T1}", identifier="floor-2", persistent=True,
                                    clean=clean)) as signage:
            await signage.subscribe(f"{base}/round", qos=1)
            async with connected(client(broker, f"table-{T1}")) as table:
                await pub(table, f"{base}/round", b"sentinel")
            got = await read_until(signage, is_payload(b"sentinel"))
            assert not any(m.payload.startswith(b"settlement") for m in got)  # type: ignore[union-attr]
    async with connected(client(broker, "floor-2", persistent=True, clean=False)) as floor:
        got = await read_until(floor, is_payload(b"settlement " + tokens[-1]))  # no new subscription
    assert [m.payload for m in got] == [b"settlement " + t for t in tokens]


async def test_replay_is_for_the_floor_and_health_for_signage_too(broker: Broker) -> None:
    """``replay/`` carries floor records with every card: floor processes read it, signage and
    surveillance never do; ``health`` is public; a table reads its own ``status`` (duplicate instance)
    and nobody else's."""
    base = f"tablesense/{T1}"
    token = uuid.uuid4().hex.encode()
    async with connected(client(broker, f"signage-{T1}")) as signage, \
            connected(client(broker, "surveillance")) as surv, \
            connected(client(broker, "floor-2")) as floor, \
            connected(client(broker, f"table-{T2}")) as other, \
            connected(client(broker, f"table-{T1}")) as table:
        for c in (signage, surv, floor):
            await c.subscribe("tablesense/#", qos=1)
        await table.subscribe(f"{base}/status", qos=1)
        await other.subscribe(f"{base}/status", qos=1)
        await other.subscribe(f"tablesense/{T2}/status", qos=1)
        await pub(table, f"{base}/replay/floor/rounds", b"replayed record " + token)
        await pub(table, f"{base}/replay/settlements", b"replayed settlement " + token)
        await pub(table, f"{base}/health", b"health " + token)
        await pub(table, f"{base}/status", b"status " + token)
        got_floor = await read_until(floor, is_payload(b"status " + token))
        got_signage = await read_until(signage, is_payload(b"status " + token))
        got_surv = await read_until(surv, is_payload(b"status " + token))
        got_table = await read_until(table, is_payload(b"status " + token))
        await pub(other, f"tablesense/{T2}/status", b"sentinel " + token)  # after table's status was acked
        got_other = await read_until(other, is_payload(b"sentinel " + token))
    assert topics(got_floor)[-4:] == [f"{base}/replay/floor/rounds", f"{base}/replay/settlements",
                                      f"{base}/health", f"{base}/status"]
    assert f"{base}/health" in topics(got_signage) and f"{base}/health" in topics(got_surv)
    for seen in (topics(got_signage), topics(got_surv)):
        assert not any("/replay/" in t for t in seen), seen
    assert topics(got_table)[-1] == f"{base}/status"
    assert f"{base}/status" not in topics(got_other)


# ------------------------------------------------------------------------------------ shared subscriptions

def _floor_filters() -> list[str]:
    from tablesense.daemon.floor.consumer import FloorSettings, subscriptions

    return subscriptions(FloorSettings("127.0.0.1", 1), True)


async def test_only_the_floor_may_join_its_shared_subscription(broker: Broker) -> None:
    """Mosquitto 2.0's acl_file does not check SUBSCRIBE: with it alone, signage joined the floor's group
    ``$share/floor/...`` and was handed its share of the floor's messages (those of its own table taken
    from the floor, the others dropped by the broker). The shipped config refuses ``$share/`` to every
    user but the floor's (the dynamic security plugin, deploy/mosquitto/dynsec.json): SUBACK 0x87; the
    two floor processes share every message between them, none lost."""
    shared = [f for f in _floor_filters() if f.startswith("$share/")]
    assert "$share/floor/tablesense/+/settlements" in shared
    others = (f"signage-{T1}", "surveillance", f"table-{T1}", f"table-{T2}")
    async with connected(client(broker, "floor-1")) as f1, connected(client(broker, "floor-2")) as f2, \
            connected(client(broker, f"signage-{T1}")) as signage, \
            connected(client(broker, "surveillance")) as surv, \
            connected(client(broker, f"table-{T1}")) as t1, connected(client(broker, f"table-{T2}")) as t2:
        for user, c in zip(others, (signage, surv, t1, t2), strict=True):
            for flt in [*shared, "$share/floor/tablesense/#", "$share/x/tablesense/+/settlements"]:
                assert sub_codes(await c.subscribe(flt, qos=1)) == [0x87], (user, flt)
        for c in (f1, f2):
            for flt in shared:
                assert sub_codes(await c.subscribe(flt, qos=1)) == [1], flt
            await c.subscribe("tablesense/+/status", qos=1)  # each floor's own: the sentinels
        # signage still reads its own table's public topics the ordinary way
        assert sub_codes(await signage.subscribe(f"tablesense/{T1}/settlements", qos=1)) == [1]
        tokens = [uuid.uuid4().hex.encode() for _ in range(20)]
        for i, tok in enumerate(tokens):
            table, name = (t1, T1) if i % 2 else (t2, T2)
            await pub(table, f"tablesense/{name}/settlements", b"settlement " + tok)
        await pub(t1, f"tablesense/{T1}/status", b"sentinel")
        got1 = await read_until(f1, is_payload(b"sentinel"))
        got2 = await read_until(f2, is_payload(b"sentinel"))
        got_signage = await read_until(signage, is_payload(b"settlement " + tokens[-1]))  # a T1 one
    floor_got = sorted(m.payload for m in got1 + got2 if str(m.topic).endswith("/settlements"))
    assert floor_got == sorted(b"settlement " + t for t in tokens)  # every one, once
    assert got1 and got2
    # signage saw its own table's settlements on its own subscription, nothing of the other table
    assert all(str(m.topic) == f"tablesense/{T1}/settlements" for m in got_signage)


def test_every_user_but_the_floors_is_kept_out_of_shared_subscriptions() -> None:
    """deploy/mosquitto/acl and dynsec.json agree: each ``user`` of the ACL that is not a floor process
    (``floor-N``) is in dynsec.json with the role refusing ``$share/#`` (a user missing there could join
    the floor's group: the plugin leaves unknown users to acl_file, which allows every SUBSCRIBE), and
    no floor user is (the floor shares its load that way)."""
    import json

    acl_users = re.findall(r"^user (\S+)$", (DEPLOY / "acl").read_text(), flags=re.MULTILINE)
    conf = json.loads((DEPLOY / "dynsec.json").read_text())
    [role] = [r for r in conf["roles"] if r["rolename"] == "no-shared-subscriptions"]
    assert role["acls"] == [{"acltype": "subscribePattern", "topic": "$share/#", "priority": 0,
                             "allow": False}]
    kept_out = {c["username"] for c in conf["clients"]
                if {"rolename": "no-shared-subscriptions"} in c.get("roles", [])}
    assert not any("password" in c for c in conf["clients"])  # passwords stay in the password file
    floors = {u for u in acl_users if re.fullmatch(r"floor-\d+", u)}
    assert floors and set(acl_users) - floors == kept_out
    assert all(v is False for v in conf["defaultACLAccess"].values())  # everything else: acl_file
