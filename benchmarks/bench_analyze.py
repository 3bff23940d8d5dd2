"""Benchmark: the full exact analysis of every baccarat wager for an 8-deck shoe (speed goal:
standard + EZ together under 2 s on 2 cores).

Run: ``.venv/bin/python benchmarks/bench_analyze.py [--runs N] [--decks D]``. Each run starts cold: the
memoised enumeration is cleared first, so every run pays for the whole enumeration. Prints the median
and the spread of the measured seconds. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import time

from tablesense.daemon.rules import baccarat_analysis
from tablesense.daemon.rules.baccarat import BaccaratRules
from tablesense.daemon.rules.baccarat_analysis import analyze_baccarat


def _cold() -> None:
    baccarat_analysis._enumerate.cache_clear()
    baccarat_analysis._coups.cache_clear()


def measure(variant: str, decks: int) -> float:
    """Seconds for one cold analyze_baccarat of ``variant`` (wall clock, time.perf_counter)."""
    _cold()
    rules = BaccaratRules.from_names(variant, decks)
    start = time.perf_counter()
    analyze_baccarat(rules)
    return time.perf_counter() - start


def measure_both(decks: int) -> float:
    """Seconds for standard then EZ, cold, as one job (the EZ run reuses the standard enumeration)."""
    _cold()
    start = time.perf_counter()
    for variant in ("baccarat", "ez-baccarat"):
        analyze_baccarat(BaccaratRules.from_names(variant, decks))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--decks", type=int, default=8)
    args = parser.parse_args()
    rows = [
        ("baccarat (cold)", lambda: measure("baccarat", args.decks)),
        ("ez-baccarat (cold)", lambda: measure("ez-baccarat", args.decks)),
        ("baccarat + ez-baccarat (cold start)", lambda: measure_both(args.decks)),
    ]
    print(f"analyze_baccarat, {args.decks} decks, {args.runs} runs each")
    for label, fn in rows:
        times = [fn() for _ in range(args.runs)]
        print(f"  {label:38s} median {statistics.median(times):.3f} s  "
              f"(min {min(times):.3f}, max {max(times):.3f})")


if __name__ == "__main__":
    main()
