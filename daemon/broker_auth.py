"""Broker TLS and credentials for the read-only subscribers (``tablesense signage``, ``tablesense monitor``).

The production broker (deploy/mosquitto/tablesense-tls.conf) accepts only TLS clients that log in: a
user name and password (listener 8883) or a client certificate whose Common Name is the user name
(listener 8884); docs/security.md. The flags added here are the command-line form of the daemon's
``[mqtt] credentials_file`` and ``[mqtt.tls] ca_file/cert_file/key_file`` and are checked by the
daemon's own functions (:func:`daemon.mqtt.load_credentials`: same file format, 64 KiB bound, refused
when readable or writable by other users; :func:`daemon.mqtt.tls_context`: broker certificate and host
name verified), so a subscriber is held to the same rules as ``tablesense run``.

    --tls                      TLS, broker verified against the system trust store
    --ca-file FILE             TLS, broker verified against FILE (the casino's CA; implies --tls)
    --cert-file FILE           client certificate (PEM; implies --tls)
    --key-file FILE            its private key (unless it is in the --cert-file PEM)
    --credentials-file FILE    user name and password (TOML ``username``/``password`` or two lines)
"""

from __future__ import annotations

import argparse
import ssl
from dataclasses import dataclass, field
from typing import Any

from tablesense.daemon.mqtt import CredentialsError, load_credentials, tls_context

__all__ = ["DEFAULT_TLS_PORT", "BrokerAuth", "add_auth_arguments", "auth_from_args", "uses_tls"]

DEFAULT_TLS_PORT = 8883
"""MQTT over TLS (IANA); the port of the shipped broker's password listener."""


@dataclass(frozen=True, slots=True)
class BrokerAuth:
    """How a subscriber logs in to the broker: ``tls`` (``None``: plain TCP), ``username``/``password``
    (``None``: anonymous, or the client certificate's CN on a ``use_identity_as_username`` listener)."""

    tls: ssl.SSLContext | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``aiomqtt.Client`` (``tls_context``, ``username``, ``password``)."""
        return {"tls_context": self.tls, "username": self.username, "password": self.password}


def add_auth_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--tls``, ``--ca-file``, ``--cert-file``, ``--key-file`` and ``--credentials-file``."""
    g = parser.add_argument_group("broker security (docs/security.md)")
    g.add_argument("--tls", action="store_true",
                   help="connect over TLS, verifying the broker against the system's trust store "
                        f"(a --broker without a port then means port {DEFAULT_TLS_PORT})")
    g.add_argument("--ca-file", metavar="FILE",
                   help="connect over TLS, verifying the broker's certificate and host name against this CA "
                        "(PEM; implies --tls)")
    g.add_argument("--cert-file", metavar="FILE",
                   help="client certificate (PEM) for a broker listener that requires one; implies --tls")
    g.add_argument("--key-file", metavar="FILE",
                   help="private key of --cert-file (omit when the key is in the same PEM)")
    g.add_argument("--credentials-file", metavar="FILE",
                   help="user name and password: TOML username/password or two plain lines; must not be "
                        "readable or writable by other users (chmod 0600), as for tablesense run")


def uses_tls(args: argparse.Namespace) -> bool:
    """Whether the flags ask for TLS (``--tls``, ``--ca-file`` or ``--cert-file``)."""
    return bool(args.tls or args.ca_file or args.cert_file)


def auth_from_args(args: argparse.Namespace) -> BrokerAuth:
    """The :class:`BrokerAuth` the flags of :func:`add_auth_arguments` describe.

    Loads the credentials file and the TLS files now, so a bad file is reported before anything runs.

    Raises:
        CredentialsError: one line naming the file and what is wrong: missing or unreadable, accessible
            by other users (with the ``chmod`` to run), no username/password, a CA or client certificate
            or key that cannot be loaded, or ``--key-file`` without ``--cert-file``.
    """
    if args.key_file and not args.cert_file:
        raise CredentialsError(f"--key-file {args.key_file} needs --cert-file (the client certificate)")
    if args.key_file:  # tls_context's error would name only the certificate
        try:
            with open(args.key_file, "rb"):
                pass
        except OSError as exc:
            raise CredentialsError(f"TLS key file {args.key_file}: {exc.strerror or exc}") from None
    tls = tls_context(args.ca_file, args.cert_file, args.key_file) if uses_tls(args) else None
    username = password = None
    if args.credentials_file:
        username, password = load_credentials(args.credentials_file)
    return BrokerAuth(tls, username, password)
