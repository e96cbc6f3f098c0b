"""Which pairs a group is compared on: all of them when small, a seeded connected subset when
large."""

from __future__ import annotations

import random
from itertools import combinations

from whileai.ranking.pairs import schedule_pairs


def _connected(n: int, pairs: list[tuple[int, int]]) -> bool:
    reach, frontier = {0}, [0]
    while frontier:
        node = frontier.pop()
        for a, b in pairs:
            for x, y in ((a, b), (b, a)):
                if x == node and y not in reach:
                    reach.add(y)
                    frontier.append(y)
    return len(reach) == n


def test_a_small_group_is_compared_on_every_pair() -> None:
    pairs, cut = schedule_pairs(5, max_pairs=10, rng=random.Random(0))
    assert pairs == list(combinations(range(5), 2)) and not cut


def test_a_large_group_gets_a_seeded_connected_subset_with_every_row_in_enough_pairs() -> None:
    pairs, cut = schedule_pairs(30, max_pairs=60, min_pairs_per_row=3, rng=random.Random("0:t"))
    assert cut and len(pairs) == 60 and len(set(pairs)) == 60
    assert all(a < b for a, b in pairs)
    degree = [sum(1 for p in pairs if i in p) for i in range(30)]
    assert min(degree) >= 3
    assert _connected(30, pairs)
    again, _ = schedule_pairs(30, max_pairs=60, min_pairs_per_row=3, rng=random.Random("0:t"))
    other, _ = schedule_pairs(30, max_pairs=60, min_pairs_per_row=3, rng=random.Random("1:t"))
    assert again == pairs and other != pairs


def test_the_minimum_per_row_wins_over_max_pairs() -> None:
    pairs, cut = schedule_pairs(20, max_pairs=5, min_pairs_per_row=4, rng=random.Random(1))
    assert cut and len(pairs) >= 40  # 20 rows in at least 4 pairs each
    assert min(sum(1 for p in pairs if i in p) for i in range(20)) >= 4
