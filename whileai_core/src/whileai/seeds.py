"""Stable seeds derived from a run's seed, so a plan is the same in every process, and the
generator an episode draws from."""

from __future__ import annotations

import random
import threading
from hashlib import sha256
from typing import Any


def derive_seed(seed: int, *parts: Any) -> int:
    """A stable 32-bit seed from the run seed and a path of names (no Python hash salt)."""
    text = "|".join(map(str, (seed, *parts)))
    # the digest's first four bytes, big-endian: its first eight hex digits read as a number
    return int.from_bytes(sha256(text.encode()).digest()[:4], "big")


class SeededOnFirstDraw(random.Random):
    """``random.Random(seed)`` that seeds itself when it is first read, not when it is made.

    Seeding a Mersenne Twister fills its 624 words of state, about 4 us: an engine makes one
    generator per rollout for its episode, and the episodes of most worlds never draw from it
    (a verifier's task, a world run without faults). Every draw gives what
    ``random.Random(seed)`` would: the first call that reads or sets the state seeds it and
    turns the object into a plain ``random.Random``, so later draws run at its own speed."""

    def __init__(self, seed: int) -> None:
        # (random.Random.__init__ would seed now; the C state stays unread until it is seeded)
        self._pending_seed = seed
        self.gauss_next = None

    def random(self) -> float:
        _seed_now(self)
        return random.Random.random(self)

    def getrandbits(self, k: int) -> int:
        _seed_now(self)
        return random.Random.getrandbits(self, k)

    def getstate(self) -> Any:
        _seed_now(self)
        return random.Random.getstate(self)

    def setstate(self, state: Any) -> None:
        _seed_now(self)
        random.Random.setstate(self, state)

    def seed(self, *args: Any, **kwargs: Any) -> None:
        _seed_now(self)
        random.Random.seed(self, *args, **kwargs)

    def __reduce__(self) -> Any:
        _seed_now(self)
        return random.Random.__reduce__(self)


def _seed_now(rng: random.Random) -> None:
    """Seed ``rng`` if it is still waiting for its first draw. A module function, not a
    method: a method bound before the first draw (``shuffle`` keeps ``getrandbits``) is
    called on the plain generator the object has become since."""
    if type(rng) is not SeededOnFirstDraw:
        return
    with _FIRST_DRAW:
        # another thread may have seeded it while this one waited
        if type(rng) is SeededOnFirstDraw:
            random.Random.seed(rng, rng.__dict__.pop("_pending_seed"))
            rng.__class__ = random.Random  # type: ignore[assignment]


#: held only while a generator seeds itself (once per generator, at its first draw)
_FIRST_DRAW = threading.Lock()
