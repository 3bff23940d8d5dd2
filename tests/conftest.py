"""Project-wide pytest options.

``--device-url URL`` points the hardware-in-the-loop suite (``tests/hil``, marker ``hil``) at a real
device (or a separately started simulator); the environment variable ``TABLESENSE_HIL_URL`` does the
same. Without either, the HIL tests are skipped with a reason saying so.

Every test runs with ``$CREDENTIALS_DIRECTORY`` set to a directory holding a journal key (``_journal_key``).

``rigs`` starts a fault scenario's world (:mod:`faults.harness`: a Mosquitto the test owns, optionally a
cuttable loopback proxy, a persistent-session subscriber, the simulated table on ptys and ``tablesense run``)
and tears every one down after the test, whatever happened; the fault suite and the adversarial tests use it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from faults.harness import Rig


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--device-url", action="store", default=None, metavar="URL",
                     help="device for the hil tests: a serial path, socket://, rfc2217:// or usb:// URL "
                          "(or set TABLESENSE_HIL_URL)")


@pytest.fixture(autouse=True, scope="session")
def _journal_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every journal is sealed with its table's key (docs/journal.md "The key"). The tests run as a
    systemd service would: ``$CREDENTIALS_DIRECTORY`` holds the credential ``journal-key``, the default
    ``[journal] key_file``, so configs and journals without an explicit key use it, in this process and
    in the daemons and commands it starts."""
    from tablesense.daemon.journal.key import CREDENTIALS_ENV, DEFAULT_KEY_FILE, write_new_key

    directory = tmp_path_factory.mktemp("credentials")
    write_new_key(directory / DEFAULT_KEY_FILE)
    saved = os.environ.get(CREDENTIALS_ENV)
    os.environ[CREDENTIALS_ENV] = str(directory)
    yield directory / DEFAULT_KEY_FILE
    if saved is None:
        os.environ.pop(CREDENTIALS_ENV, None)
    else:
        os.environ[CREDENTIALS_ENV] = saved


@pytest.fixture(params=["postgresql", "sqlite"])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh floor database URL, once on PostgreSQL (``floor_support.pg_url``: a throwaway database) and
    once on SQLite (a file in ``tmp_path``). A test module may define its own ``db_url``."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'floor.sqlite'}"
        return
    from floor_support import pg_url

    async with pg_url() as url:
        yield url


@pytest.fixture
async def rigs(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Rig]]]:
    """A factory of fault-scenario worlds (:func:`faults.harness.make_rig` keyword arguments), each closed
    (:func:`faults.harness.close_rig`) after the test."""
    from faults.harness import close_rig, make_rig

    made: list[Rig] = []

    async def factory(**kwargs: Any) -> Rig:
        rig = await make_rig(tmp_path / f"rig{len(made)}", **kwargs)
        made.append(rig)
        return rig

    yield factory
    for rig in made:
        await close_rig(rig)
