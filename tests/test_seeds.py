"""Seeds derived from a run's seed, and the generator an episode draws from: it draws what
``random.Random(seed)`` draws, however it is read, and is seeded only when it is."""

from __future__ import annotations

import copy
import pickle
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from whileai.seeds import SeededOnFirstDraw, derive_seed

SEEDS = [0, 1, 7, 2**31 - 1, 2**32 - 1, derive_seed(3, "rollout", "shop-001-p0-abcd", 0)]

#: what worlds do with their generator, each from a fresh one
DRAWS: dict[str, Callable[[random.Random], Any]] = {
    "random": lambda r: [r.random() for _ in range(5)],
    "randint": lambda r: [r.randint(1, 220) for _ in range(5)],
    "randrange": lambda r: [r.randrange(10**9, 10**10) for _ in range(5)],
    "choice": lambda r: [r.choice("abcdefg") for _ in range(5)],
    "shuffle": lambda r: r.shuffle(items := list(range(20))) or items,
    "sample": lambda r: r.sample(range(100), 10),
    "gauss": lambda r: [r.gauss(0, 1) for _ in range(5)],
    "uniform": lambda r: r.uniform(2, 3),
    "getrandbits": lambda r: r.getrandbits(70),
    "randbytes": lambda r: r.randbytes(9),
    "choices": lambda r: r.choices("abc", weights=[1, 2, 3], k=6),
    "getstate": lambda r: r.getstate(),
}


@pytest.mark.parametrize("draw", sorted(DRAWS))
def test_an_episode_generator_draws_what_random_random_of_its_seed_draws(draw: str) -> None:
    for seed in SEEDS:
        lazy = SeededOnFirstDraw(seed)
        assert DRAWS[draw](lazy) == DRAWS[draw](random.Random(seed))
        # and goes on as the plain one does
        plain = random.Random(seed)
        DRAWS[draw](plain)
        assert [lazy.random() for _ in range(3)] == [plain.random() for _ in range(3)]


def test_it_is_seeded_at_its_first_draw_and_is_then_a_plain_generator() -> None:
    rng = SeededOnFirstDraw(42)
    assert isinstance(rng, random.Random)
    assert type(rng) is SeededOnFirstDraw  # nothing drawn: nothing seeded
    first = rng.random()
    assert type(rng) is random.Random
    assert first == random.Random(42).random()


def test_its_state_can_be_set_reseeded_copied_and_pickled_before_any_draw() -> None:
    other = random.Random(9)
    other.random()
    rng = SeededOnFirstDraw(1)
    rng.setstate(other.getstate())
    assert rng.random() == other.random()

    rng = SeededOnFirstDraw(1)
    rng.seed(5)
    assert rng.random() == random.Random(5).random()

    for clone in (
        copy.copy(SeededOnFirstDraw(8)),
        copy.deepcopy(SeededOnFirstDraw(8)),
        pickle.loads(pickle.dumps(SeededOnFirstDraw(8))),
    ):
        assert clone.random() == random.Random(8).random()


def test_threads_that_draw_first_at_once_share_one_sequence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # one generator seeded twice would hand two threads the same first number: seeding is
    # slowed so that every thread arrives while the first is still at it
    expected = {}
    for n in range(5):
        plain = random.Random(n)
        expected[n] = sorted(plain.random() for _ in range(4))
    seed = random.Random.seed

    def slow_seed(self: random.Random, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.02)
        seed(self, *args, **kwargs)

    monkeypatch.setattr(random.Random, "seed", slow_seed)
    for n in range(5):
        rng = SeededOnFirstDraw(n)
        start = threading.Barrier(4)
        drawn: list[float] = []

        def draw(
            rng: random.Random = rng, start: threading.Barrier = start, drawn: list[float] = drawn
        ) -> None:
            start.wait()
            drawn.append(rng.random())

        threads = [threading.Thread(target=draw) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(drawn) == expected[n]


def test_a_derived_seed_is_the_first_four_bytes_of_its_sha256() -> None:
    import hashlib

    digest = hashlib.sha256(b"3|rollout|x|0").digest()
    assert derive_seed(3, "rollout", "x", 0) == int.from_bytes(digest[:4], "big")
