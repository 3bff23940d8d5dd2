"""``tablesense check-config FILE [--template]``: validate a table configuration without starting anything.

Reports every problem in one run, one line each, naming the file, the line where it is known and the
key::

    tablesense: /etc/tablesense/bac-01.toml:3:11: invalid TOML: Expected newline or end of document ...
    tablesense: /etc/tablesense/bac-01.toml:14: spots.7: mapped twice (also spots.3)
    tablesense: /etc/tablesense/bac-01.toml:31: wagers.tie.max: 10 is below min 500
    tablesense: /etc/tablesense/bac-01.toml:40: mqtt.credentials_file: credentials file /x: No such file ...
    tablesense: /etc/tablesense/bac-01.toml:52: devices.shoe.url: /dev/ttyUSB0 does not exist (...)

(TOML syntax errors name line and column; each line at fault is set aside and the rest still read,
:func:`daemon.config.inspect_config`), and exits 2; or prints ``ok: <table> (<game>, N decks, M spots)``
and exits 0. Syntax and decoding (type) errors come first; the checks of the values run once the whole
file decodes; the file checks below run on whatever decoded, so they are listed with every other
problem.

Without ``--template`` it also makes the checks ``tablesense run`` makes before starting
(:func:`daemon.app.broker_settings`: the MQTT credentials file exists and other users cannot read or write
it, the TLS CA, client key and client certificate load; :func:`daemon.app.journal_key`: the journal's
sealing key is readable, long enough and private), so a config ``check-config`` accepts is not refused by
``run`` for them; and each device given as a path (``/dev/ttyUSB0``, a udev symlink) must exist, be a
character device and be readable and writable here (``run`` would wait for it, retrying). A ``*_file`` key
that names ``${CREDENTIALS_DIRECTORY}`` (the secrets systemd hands the service, docs/install.md) can only
be checked where that variable is set: under the unit, or by hand with ``CREDENTIALS_DIRECTORY=DIR``.
``--template`` skips the file checks, for a config written for another machine (e.g. the examples in
``deploy/examples/``).
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path
from typing import Any

import msgspec

from tablesense.daemon.config import (
    CREDENTIALS_VARIABLE,
    ConfigError,
    TableConfig,
    control_problem,
    inspect_config_file,
)
from tablesense.daemon.config_issues import ConfigIssue

__all__ = ["file_issues", "register", "run", "unresolved_credentials"]


def register(subparsers: Any) -> None:
    """Add the ``check-config`` sub-command."""
    parser = subparsers.add_parser(
        "check-config", help="validate a table config file",
        description="Validate a table configuration (TOML): syntax, keys, paytables for the deck count, "
                    "wagers the game offers, the spot map, the credentials, key and TLS files it names "
                    "(as `tablesense run` checks them) and the device paths. Exit 0 when usable; else "
                    "every problem, one line each (file, line, key), and exit 2.")
    parser.add_argument("file", metavar="FILE", help="the table config (TOML)")
    parser.add_argument("--template", action="store_true",
                        help="skip the credentials, key, TLS and device file checks (a config for another "
                             "machine)")
    parser.set_defaults(func=run)


def unresolved_credentials(cfg: TableConfig) -> list[str]:
    """Dotted keys of the ``*_file`` values still naming ``${CREDENTIALS_DIRECTORY}`` (the variable is not
    set here), e.g. ``["mqtt.credentials_file"]``."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(value, str):
                    if str(key).endswith("_file") and CREDENTIALS_VARIABLE in value:
                        found.append(where)
                else:
                    walk(value, where)

    walk(msgspec.to_builtins(cfg), "")
    return found


def file_issues(cfg: TableConfig) -> list[ConfigIssue]:
    """The problems ``tablesense run`` would refuse to start for, and the device paths, one per key:
    ``${CREDENTIALS_DIRECTORY}`` not set, the MQTT credentials file, the TLS CA file, client key and
    certificate, the journal key (the same checks as :func:`daemon.app.broker_settings` and
    :func:`daemon.app.journal_key`), each device path. ``cfg`` may be a config decoded with bad values set
    aside (:func:`daemon.config.inspect_config_file`). Lines are not filled in."""
    from tablesense.daemon.journal.key import JournalKeyError, load_key
    from tablesense.daemon.mqtt import CredentialsError, load_credentials, tls_context

    out: list[ConfigIssue] = []

    def problem(key: str, text: str) -> None:
        text = " ".join(text.split()).removeprefix(f"{key} ")  # "journal.key_file 'x' names ...": once
        out.append(ConfigIssue(f"{key}: {text}", key=key))

    unset = unresolved_credentials(cfg)
    for key in unset:
        problem(key, f"names {CREDENTIALS_VARIABLE}, which is not set: systemd sets it for the service "
                     "(LoadCredential=, docs/install.md); check with CREDENTIALS_DIRECTORY=DIR, under the "
                     "unit, or with --template")
    m = cfg.mqtt
    if m.credentials_file and "mqtt.credentials_file" not in unset and _usable(m.credentials_file):
        try:
            load_credentials(m.credentials_file)
        except CredentialsError as exc:
            problem("mqtt.credentials_file", str(exc))
    tls = m.tls
    if tls is not None:
        if tls.ca_file and "mqtt.tls.ca_file" not in unset and _usable(tls.ca_file):
            try:
                tls_context(tls.ca_file)
            except CredentialsError as exc:
                problem("mqtt.tls.ca_file", str(exc))
        key_ok = True
        if tls.key_file and "mqtt.tls.key_file" not in unset and _usable(tls.key_file):
            try:
                with open(tls.key_file, "rb"):
                    pass
            except OSError as exc:
                key_ok = False
                problem("mqtt.tls.key_file", f"TLS client key {tls.key_file}: {exc.strerror or exc}")
        if (tls.cert_file and key_ok and not {"mqtt.tls.cert_file", "mqtt.tls.key_file"} & set(unset)
                and _usable(tls.cert_file) and _usable(tls.key_file or "")):
            try:
                tls_context(None, tls.cert_file, tls.key_file)
            except CredentialsError as exc:
                problem("mqtt.tls.cert_file", str(exc))
    if "journal.key_file" not in unset and _usable(cfg.journal.key_file):
        try:
            load_key(cfg.journal.key_file)
        except JournalKeyError as exc:
            problem("journal.key_file", str(exc))
    for name, device in cfg.devices.items():
        why = _device_path_problem(device.url)
        if why is not None:
            problem(f"devices.{name}.url", why)
    return out


def _usable(path: str) -> bool:
    """A path the operating system can be asked about: one with a control character (a NUL makes Python
    raise ``ValueError``) is reported by the config's own checks (:func:`daemon.config.control_problem`)."""
    return control_problem(path) is None


def _device_path_problem(url: str) -> str | None:
    """Why the device path ``url`` cannot be opened here, else ``None`` (also for URLs that are not paths:
    ``socket://``, ``rfc2217://``, ``usb://``)."""
    if "://" in url or not url.strip() or not _usable(url):
        return None
    try:
        mode = os.stat(url).st_mode
    except FileNotFoundError:
        return f"{url} does not exist (the device is not plugged in, or the path is wrong)"
    except OSError as exc:
        return f"{url}: {exc.strerror or exc}"
    if not stat.S_ISCHR(mode):
        return f"{url} is not a serial device (not a character device)"
    if not os.access(url, os.R_OK | os.W_OK):
        return (f"{url}: no read and write permission for this user (the service's user needs both, "
                "e.g. through the group dialout)")
    return None


def run(args: argparse.Namespace) -> int:
    """Check ``args.file``; print the summary line and return 0, or every problem (one line each, on
    stderr) and return 2."""
    cfg, error, text = inspect_config_file(args.file)
    if cfg is None:
        assert error is not None
        for line in error.lines():
            print(f"tablesense: {line}", file=sys.stderr)
        return 2
    issues = list(error.issues) if error is not None else []
    if not getattr(args, "template", False):
        found = file_issues(cfg)
        if found:
            issues += ConfigError(found).located(text).issues
    if issues:
        for line in ConfigError(issues, file=str(Path(args.file))).lines():
            print(f"tablesense: {line}", file=sys.stderr)
        return 2
    decks = cfg.shoe_decks
    print(f"ok: {cfg.table} ({cfg.game}, {decks} deck{'s' if decks != 1 else ''}, {len(cfg.spots)} spots)")
    return 0
