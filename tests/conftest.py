"""Project-wide pytest options.

``--device-url URL`` points the hardware-in-the-loop suite (``tests/hil``, marker ``hil``) at a real
device (or a separately started simulator); the environment variable ``TABLESENSE_HIL_URL`` does the
same. Without either, the HIL tests are skipped with a reason saying so.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--device-url", action="store", default=None, metavar="URL",
                     help="device for the hil tests: a serial path, socket://, rfc2217:// or usb:// URL "
                          "(or set TABLESENSE_HIL_URL)")
