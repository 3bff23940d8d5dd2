"""Fixtures of the fault-injection suite: ``rigs`` starts a scenario's world (a Mosquitto the test owns
with persistence in the test's temp dir, optionally a cuttable loopback proxy, a persistent-session
subscriber thread, the simulated baccarat table on ptys and ``tablesense run``) and tears every one
down after the test, whatever happened. See :mod:`faults.harness`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from .harness import Rig, close_rig, make_rig


@pytest.fixture
async def rigs(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Rig]]]:
    made: list[Rig] = []

    async def factory(**kwargs: Any) -> Rig:
        rig = await make_rig(tmp_path / f"rig{len(made)}", **kwargs)
        made.append(rig)
        return rig

    yield factory
    for rig in made:
        await close_rig(rig)
