"""Benchmark: the advantage-play watch after every round (it must stay cheap: it works from the shoe
composition).

Run: ``.venv/bin/python benchmarks/bench_advantage.py [--shoes N] [--seed S]``. Deals N shuffled 8-deck
shoes round by round (6 cards per round to the cut card at 80 %), and after every round times one
``advantage_report`` for a baccarat table offering Perfect Pairs on both hands and House Money. Prints
p50, p99 and the maximum in milliseconds, and how many rounds had a wager above 0. Not a test: nothing
here asserts a time.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from tablesense.daemon.rules.advantage import advantage_report, favourable, offered_pair_wagers
from tablesense.daemon.rules.baccarat import BaccaratRules
from tablesense.daemon.rules.cards import ALL_CARDS, ShoeComposition


def main() -> None:
    """Parse the options, run the shoes, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shoes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    wagers = offered_pair_wagers(BaccaratRules.from_names("baccarat", 8), ["perfect_pairs", "house_money"])
    times: list[float] = []
    positive = rounds = 0
    for _ in range(args.shoes):
        cards = list(ALL_CARDS) * 8
        rng.shuffle(cards)
        shoe = ShoeComposition(8)
        cut = int(len(cards) * 0.8)
        for i in range(0, cut, 6):
            for c in cards[i:i + 6]:
                shoe.take(c)
            start = time.perf_counter()
            report = advantage_report(shoe, wagers)
            times.append(time.perf_counter() - start)
            rounds += 1
            positive += bool(favourable(report))
    times.sort()
    ms = [t * 1000 for t in times]
    print(f"{rounds} reports: p50 {statistics.median(ms):.3f} ms, p99 {ms[int(len(ms) * 0.99) - 1]:.3f} ms, "
          f"max {ms[-1]:.3f} ms; rounds with a favourable pair wager: {positive}")


if __name__ == "__main__":
    main()
