"""The range a marker's values lie in, as the marker declares it (``bounds = (low, high)``, see
``whileai_register_markers``) and as a run records it (``metadata["marker_bounds"]``).

A marker's bounds tell the measurements what its mean can be: a flag's or a share's lies in
[0, 1] and takes the bounded interval, a count's lies at or above 0, so its interval stops
there rather than reaching below 0 at a handful of tasks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: (low, high), either None when that end is open
Bounds = tuple[float | None, float | None]


def checked_bounds(value: Any, what: str) -> Bounds:
    """``value`` as bounds: a pair of finite numbers or None, low <= high; a ValueError naming
    ``what`` otherwise."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise ValueError(f"{what} must be (low, high), either None when open; got {value!r}")
    ends: list[float | None] = []
    for end in value:
        if end is None:
            ends.append(None)
            continue
        if isinstance(end, bool) or not isinstance(end, int | float) or not math.isfinite(end):
            raise ValueError(f"{what} must be (low, high) of finite numbers or None; got {value!r}")
        ends.append(float(end))
    low, high = ends
    if low is not None and high is not None and low > high:
        raise ValueError(f"{what} has its low end above its high end: {value!r}")
    return low, high


def within(value: float, bounds: Bounds) -> bool:
    low, high = bounds
    return (low is None or value >= low) and (high is None or value <= high)


def bounds_text(bounds: Bounds) -> str:
    """``[0, inf]``: bounds as a person reads them."""
    low, high = bounds
    return f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}]"


def unit_bounded(bounds: Bounds | None) -> bool:
    """Whether ``bounds`` hold every value in [0, 1] (a flag, a share, a score)."""
    if bounds is None:
        return False
    low, high = bounds
    return low is not None and high is not None and low >= 0 and high <= 1


def recorded_bounds(metadata: Mapping[str, Any] | None) -> dict[str, Bounds]:
    """The bounds a run recorded for its markers (``metadata["marker_bounds"]``); none for
    rows that came with no run's metadata. An entry the metadata holds in another shape (a
    sidecar edited by hand) is a ValueError naming it: a wrong bound would cut an interval."""
    found = (metadata or {}).get("marker_bounds")
    if found is None:
        return {}
    if not isinstance(found, Mapping):
        raise ValueError(f"metadata marker_bounds must map marker names to bounds; got {found!r}")
    return {
        str(name): checked_bounds(value, f"metadata marker_bounds[{name!r}]")
        for name, value in found.items()
    }
