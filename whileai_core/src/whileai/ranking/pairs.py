"""Which pairs of a group the judge is asked about.

Every pair while the group is small (``n (n - 1) / 2 <= max_pairs``). A larger group would
cost a quadratic number of judge calls, so it gets a seeded random subset instead: a random
ring through all rows first (so the comparison graph is connected and every row sits on one
Bradley-Terry scale), then more pairs for any row still in fewer than ``min_pairs_per_row``,
then random pairs up to ``max_pairs``. The minimum per row wins over ``max_pairs`` when the
two conflict.
"""

from __future__ import annotations

import random
from itertools import combinations

#: all pairs of a group of up to 10 rows (45 pairs, 90 judge calls with both orders)
DEFAULT_MAX_PAIRS = 45
#: a row met by fewer judge verdicts than this gets a strength mostly made of the prior
DEFAULT_MIN_PAIRS_PER_ROW = 4


def schedule_pairs(
    n: int,
    *,
    max_pairs: int = DEFAULT_MAX_PAIRS,
    min_pairs_per_row: int = DEFAULT_MIN_PAIRS_PER_ROW,
    rng: random.Random,
) -> tuple[list[tuple[int, int]], bool]:
    """``(pairs, subsampled)``: index pairs ``(i, j)`` with ``i < j``, in a stable order."""
    every = list(combinations(range(n), 2))
    if len(every) <= max_pairs:
        return every, False
    need = min(min_pairs_per_row, n - 1)
    chosen: set[tuple[int, int]] = set()
    degree = [0] * n

    def add(a: int, b: int) -> None:
        pair = (min(a, b), max(a, b))
        if pair not in chosen:
            chosen.add(pair)
            degree[a] += 1
            degree[b] += 1

    ring = list(range(n))
    rng.shuffle(ring)
    for k in range(n):
        add(ring[k], ring[(k + 1) % n])
    order = list(range(n))
    rng.shuffle(order)
    for i in order:
        while degree[i] < need:
            options = [j for j in range(n) if j != i and (min(i, j), max(i, j)) not in chosen]
            rng.shuffle(options)
            # the least-compared partner first, so topping up one row helps another
            add(i, min(options, key=lambda j: degree[j]))
    rest = [pair for pair in every if pair not in chosen]
    rng.shuffle(rest)
    for pair in rest[: max(0, max_pairs - len(chosen))]:
        add(*pair)
    return sorted(chosen), True
