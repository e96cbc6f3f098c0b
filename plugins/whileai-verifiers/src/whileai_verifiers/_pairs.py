"""The ``(completion, reference[, prompt])`` pairs a verifier's ``verify_many`` takes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def batch_pairs(pairs: Iterable[Sequence[Any]]) -> list[tuple[Any, Any]]:
    """Each pair's completion and reference, every pair checked before any is used, so a
    malformed one fails the whole call at once, naming its index."""
    out: list[tuple[Any, Any]] = []
    for index, pair in enumerate(pairs):
        if (
            isinstance(pair, str | bytes)
            or not isinstance(pair, Sequence)
            or len(pair) not in (2, 3)
        ):
            raise ValueError(
                f"pairs[{index}] must be (completion, reference) or (completion, reference, "
                f"prompt), got {type(pair).__name__}"
            )
        out.append((pair[0], pair[1]))
    return out
