"""Stable seeds derived from a run's seed, so a plan is the same in every process."""

from __future__ import annotations

import hashlib
from typing import Any


def derive_seed(seed: int, *parts: Any) -> int:
    """A stable 32-bit seed from the run seed and a path of names (no Python hash salt)."""
    text = "|".join([str(seed), *map(str, parts)])
    # the digest's first four bytes, big-endian: its first eight hex digits read as a number
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big")
