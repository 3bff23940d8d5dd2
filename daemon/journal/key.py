"""The journal's sealing key: where it comes from and how it is checked (docs/journal.md, "The key").

Every row of the journal is sealed with HMAC-SHA256 (RFC 2104, FIPS 198-1) under one secret key per
table. The key is the whole content of a file, at least :data:`MIN_KEY_BYTES` random bytes, e.g. made
with ``head -c 32 /dev/urandom > bac-01.journal-key`` (or ``systemd-creds encrypt`` for an encrypted
credential). Where the file is (``[journal] key_file``):

* an absolute path is read as it is (``tablesense verify`` and ``recall`` run by an auditor, a table
  run by hand);
* a bare name (the default ``journal-key``) names a systemd credential: the file
  ``$CREDENTIALS_DIRECTORY/<name>``, which systemd creates for the service from
  ``LoadCredential=<name>:/etc/tablesense/bac-01.journal-key`` (systemd.exec(5), "Credentials";
  https://systemd.io/CREDENTIALS/). Outside such a service ``$CREDENTIALS_DIRECTORY`` is unset and a bare
  name is refused with one line saying so.

The key file must not be accessible by other users (like the MQTT credentials file). The key never
leaves this module's callers: it is not logged, and only its *key id* (:func:`key_id`, the first 8 bytes
of an HMAC of a fixed label, in hex) is stored in the journal, so a journal opened with the wrong key is
told apart from a damaged one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from pathlib import Path

from tablesense.daemon.journal.errors import JournalError

__all__ = ["DEFAULT_KEY_FILE", "MAX_KEY_BYTES", "MIN_KEY_BYTES", "JournalKeyError", "key_id", "key_path",
           "load_key", "write_new_key"]

DEFAULT_KEY_FILE = "journal-key"
"""The default ``[journal] key_file``: the systemd credential named ``journal-key``."""
MIN_KEY_BYTES = 32
"""A key shorter than the HMAC-SHA256 output (32 bytes) would be the weakest link (RFC 2104 §3)."""
MAX_KEY_BYTES = 4096
"""A key file larger than this is not a key (bounded read)."""
CREDENTIALS_ENV = "CREDENTIALS_DIRECTORY"
"""Set by systemd for a service with ``LoadCredential=`` (systemd.exec(5))."""

_CREDENTIAL_NAME = re.compile(r"^[A-Za-z0-9_.@:+-]{1,255}$")


class JournalKeyError(JournalError):
    """The journal key cannot be used: missing, unreadable, too short, or readable by other users. The
    message is one line naming the file."""


def key_path(key_file: str, credentials_dir: str | None = None) -> Path:
    """The file ``key_file`` names (see the module doc). ``credentials_dir`` defaults to
    ``$CREDENTIALS_DIRECTORY``. Raises :class:`JournalKeyError` for an empty value, a relative path that
    is not a bare credential name, or a credential name outside a systemd service."""
    text = key_file.strip()
    if not text:
        raise JournalKeyError("journal.key_file is empty (an absolute path, or a systemd credential name)")
    if os.path.isabs(text):
        return Path(text)
    if not _CREDENTIAL_NAME.match(text) or text in (".", ".."):
        raise JournalKeyError(f"journal.key_file {text[:80]!r} must be an absolute path or a bare systemd "
                              "credential name (no '/')")
    directory = os.environ.get(CREDENTIALS_ENV) if credentials_dir is None else credentials_dir
    if not directory:
        raise JournalKeyError(
            f"journal.key_file {text!r} names a systemd credential, but ${CREDENTIALS_ENV} is not set (start "
            f"tablesense from its unit with LoadCredential={text}:/path/to/key, or give an absolute path)")
    return Path(directory) / text


def load_key(key_file: str = DEFAULT_KEY_FILE, credentials_dir: str | None = None) -> bytes:
    """The key bytes from the file :func:`key_path` names (the whole file, as it is).

    Raises :class:`JournalKeyError`: the file is missing or unreadable, is not a regular file, can be read
    or written by other users, or holds fewer than :data:`MIN_KEY_BYTES` or more than
    :data:`MAX_KEY_BYTES` bytes.
    """
    path = key_path(key_file, credentials_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise JournalKeyError(f"journal key file {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise JournalKeyError(f"journal key file {path} is not a regular file")
        if st.st_mode & (stat.S_IROTH | stat.S_IWOTH | stat.S_IXOTH):
            raise JournalKeyError(f"journal key file {path} is accessible by other users (mode "
                                  f"{stat.S_IMODE(st.st_mode):04o}); run: chmod o-rwx {path}")
        data = os.read(fd, MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise JournalKeyError(f"journal key file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_KEY_BYTES:
        raise JournalKeyError(f"journal key file {path} is larger than {MAX_KEY_BYTES} bytes: not a key")
    if len(data) < MIN_KEY_BYTES:
        raise JournalKeyError(f"journal key file {path} holds {len(data)} bytes; a key needs at least "
                              f"{MIN_KEY_BYTES} random bytes (head -c 32 /dev/urandom > {path})")
    return data


def write_new_key(path: Path | str) -> bytes:
    """Create ``path`` (mode 0600, never overwriting) holding 32 fresh random bytes; returns them. For the
    demo and tests; a production key is made once per table by the operator. Raises ``FileExistsError``
    when the file exists, ``OSError`` when it cannot be written."""
    key = secrets.token_bytes(MIN_KEY_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key)
    finally:
        os.close(fd)
    return key


def key_id(key: bytes) -> str:
    """16 hex digits identifying ``key`` without revealing it: HMAC-SHA256(key, label), first 8 bytes."""
    return hmac.digest(key, b"tablesense journal key id", hashlib.sha256)[:8].hex()
