"""drivers/backoff.py: exponential backoff with full jitter, shared by every reconnecting link."""

from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablesense.drivers.backoff import Backoff, full_jitter_delay


def test_ceilings_double_from_initial_and_stop_at_maximum() -> None:
    b = Backoff(0.2, 5.0, rng=random.Random(1))
    ceilings = []
    for _ in range(8):
        ceilings.append(b.ceiling)
        assert 0.0 <= b.next_delay() <= ceilings[-1]
    assert ceilings == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    assert b.failures == 8
    b.reset()
    assert b.failures == 0 and b.ceiling == 0.2


def test_jitter_is_full_not_equal() -> None:
    """Full jitter draws from the whole window [0, ceiling]: about half the delays fall below half the
    ceiling and some come close to 0. Equal jitter ([c/2, c], what drivers/link.py did while its
    docstring said otherwise) never goes below c/2, so this fails for it."""
    rng = random.Random(7)
    draws = [full_jitter_delay(6, 0.2, 5.0, rng=rng) for _ in range(4000)]
    assert all(0.0 <= d <= 5.0 for d in draws)
    below_half = sum(d < 2.5 for d in draws) / len(draws)
    assert 0.45 < below_half < 0.55
    assert min(draws) < 0.05
    assert statistics.fmean(draws) == pytest.approx(2.5, abs=0.15)


def test_an_outage_never_grows_the_delay_past_maximum() -> None:
    """However long the outage (10,000 failed attempts), the attempt after the link returns is at most
    ``maximum`` away: the relay's promise that a returning network is used within a few seconds."""
    b = Backoff(0.2, 5.0, rng=random.Random(3))
    delays = [b.next_delay() for _ in range(10_000)]
    assert max(delays) <= 5.0
    assert b.ceiling == 5.0


def test_floor_keeps_a_minimum_delay() -> None:
    b = Backoff(2.0, 30.0, floor=1.0, rng=random.Random(5))
    first = [Backoff(2.0, 30.0, floor=1.0, rng=random.Random(i)).next_delay() for i in range(200)]
    assert all(1.0 <= d <= 2.0 for d in first)
    assert all(1.0 <= b.next_delay() <= 30.0 for _ in range(50))
    # a floor above the first ceiling makes the window [floor, floor] until the ceiling passes it
    assert full_jitter_delay(1, 0.5, 10.0, floor=3.0, rng=random.Random(0)) == 3.0


def test_attempt_below_one_counts_as_the_first() -> None:
    assert full_jitter_delay(0, 1.0, 8.0, rng=random.Random(0)) <= 1.0
    assert full_jitter_delay(-5, 1.0, 8.0, rng=random.Random(0)) <= 1.0
    assert full_jitter_delay(10**9, 1.0, 8.0, rng=random.Random(0)) <= 8.0  # no overflow


@pytest.mark.parametrize(("initial", "maximum", "floor"), [(0, 1, 0), (-1, 1, 0), (2, 1, 0), (1, 2, 3),
                                                           (1, 2, -0.5)])
def test_invalid_bounds_are_refused(initial: float, maximum: float, floor: float) -> None:
    with pytest.raises(ValueError, match="backoff needs"):
        Backoff(initial, maximum, floor=floor)
    with pytest.raises(ValueError, match="backoff needs"):
        full_jitter_delay(1, initial, maximum, floor=floor)


@settings(max_examples=300, deadline=None)
@given(attempt=st.integers(min_value=-3, max_value=200),
       initial=st.floats(min_value=1e-3, max_value=10.0),
       spread=st.floats(min_value=1.0, max_value=100.0),
       floor_share=st.floats(min_value=0.0, max_value=1.0),
       seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_every_delay_lies_in_its_full_jitter_window(attempt: int, initial: float, spread: float,
                                                    floor_share: float, seed: int) -> None:
    """Distribution bounds for any parameters: floor <= delay <= max(floor, min(maximum, initial *
    2 ** (n - 1))), never above maximum; the Backoff object draws the same window as the function."""
    maximum = initial * spread
    floor = maximum * floor_share
    n = max(attempt, 1)
    ceiling = max(floor, min(maximum, initial * 2.0 ** min(n - 1, 62)))
    d = full_jitter_delay(attempt, initial, maximum, floor=floor, rng=random.Random(seed))
    assert floor <= d <= ceiling <= maximum
    b = Backoff(initial, maximum, floor=floor, rng=random.Random(seed))
    for _ in range(min(n, 70) - 1):
        b.next_delay()
    assert b.ceiling == ceiling
    assert floor <= b.next_delay() <= ceiling


def test_every_reconnect_loop_uses_the_one_backoff() -> None:
    """The MQTT relay, the device links, the signage feed and the floor consumer all wait
    :class:`drivers.backoff.Backoff` between attempts: no module outside drivers/backoff.py draws its own
    reconnect delay (the floor consumer had an equal-jitter copy, ``random.uniform(backoff / 2,
    backoff)``)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    own_delay = re.compile(r"random\.uniform\(|backoff\s*\*\s*2|delay\s*\*\s*2")
    users = []
    for folder in ("daemon", "drivers"):
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if path.name != "backoff.py":
                assert not own_delay.search(text), f"{path.relative_to(root)} draws its own reconnect delay"
            if "Backoff(" in text and path.name != "backoff.py":
                users.append(path.relative_to(root).as_posix())
    expected = {"daemon/mqtt.py", "drivers/link.py", "daemon/signage/server.py", "daemon/floor/consumer.py"}
    assert expected <= set(users)
