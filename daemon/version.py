"""The software version of tablesense, from the installed package's metadata (one source: pyproject.toml).

:func:`software_version` is what ``tablesense --version`` prints and what the retained status message
carries in ``software``.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

__all__ = ["DISTRIBUTION", "software_version"]

DISTRIBUTION = "tablesense"
"""The distribution name (``pip install tablesense``)."""


@cache
def software_version() -> str:
    """The installed distribution's version string, e.g. ``"0.1.0"`` (PEP 440).

    ``"0+unknown"`` when the code runs without installed metadata (a bare copy of the sources), so a
    status message is never refused for want of a version.
    """
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"
