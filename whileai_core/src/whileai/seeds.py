"""Stable seeds derived from a run's seed, so a plan is the same in every process."""

from __future__ import annotations

from hashlib import sha256
from typing import Any


def derive_seed(seed: int, *parts: Any) -> int:
    """A stable 32-bit seed from the run seed and a path of names (no Python hash salt)."""
    text = "|".join(map(str, (seed, *parts)))
    # the digest's first four bytes, big-endian: its first eight hex digits read as a number
    return int.from_bytes(sha256(text.encode()).digest()[:4], "big")
