"""Intervals on shares and agreement between two raters.

``wilson_interval`` is the Wilson score interval (Wilson 1927; Brown, Cai & DasGupta 2001
recommend it over the Wald interval, which collapses to a point at 0 and n successes and
under-covers for small n). ``cohen_kappa`` is Cohen's (1960) chance-corrected agreement.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

# the normal and Student quantiles from scipy.special, which scipy.stats' norm.ppf and t.ppf
# call (equal to the last bit): importing scipy.stats would add about 10,000 objects and a
# tenth of a second or more to the first report of every process
from scipy import special

from whileai.measure.intervals import variance_df

Interval = tuple[float, float]


def _z(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    return float(special.ndtri(1 - (1 - confidence) / 2))


@overload
def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval: ...


@overload
def wilson_interval(
    successes: npt.ArrayLike, n: npt.ArrayLike, confidence: float = 0.95
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...


def wilson_interval(successes: Any, n: Any, confidence: float = 0.95) -> Any:
    """Wilson score interval for ``successes`` out of ``n``.

    Scalars in, ``(low, high)`` floats out; arrays in (broadcast together), a ``(low, high)``
    pair of arrays out. ``n == 0`` gives ``(nan, nan)``: no trials say nothing about the share.

    With p = successes / n and z the normal quantile::

        centre = (p + z^2 / 2n) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)
    """
    z = _z(confidence)
    s = np.asarray(successes, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    if not (np.isfinite(s).all() and np.isfinite(m).all()):
        raise ValueError("successes and n must be finite numbers")
    if (m < 0).any() or (m != np.round(m)).any():
        raise ValueError(f"n must be a whole number >= 0, got {n!r}")
    if (s < 0).any() or (s > m).any():
        raise ValueError(
            f"successes must lie between 0 and n, got successes={successes!r}, n={n!r}"
        )
    return _wilson(s / np.where(m > 0, m, 1), m, z)


def effective_wilson_interval(share: float, n: float, confidence: float = 0.95) -> Interval:
    """The Wilson interval of a ``share`` worth ``n`` independent trials, ``n`` not whole: a
    share of rows clustered in tasks, at the effective count their design effect leaves
    (Kish 1965; the Wilson interval at the effective sample size, as survey statistics
    takes it for a clustered proportion)."""
    if not (math.isfinite(share) and 0 <= share <= 1) or not (math.isfinite(n) and n > 0):
        raise ValueError(f"share must lie in [0, 1] and n be > 0, got share={share!r}, n={n!r}")
    low, high = _wilson(np.asarray(share), np.asarray(float(n)), _z(confidence))
    return float(low), float(high)


def _wilson(p: Any, m: Any, z: float) -> Any:
    with np.errstate(invalid="ignore", divide="ignore"):
        z2 = z * z
        denom = 1 + z2 / m
        centre = (p + z2 / (2 * m)) / denom
        half = z / denom * np.sqrt(p * (1 - p) / m + z2 / (4 * m * m))
        low = np.where(m > 0, np.clip(centre - half, 0.0, 1.0), np.nan)
        high = np.where(m > 0, np.clip(centre + half, 0.0, 1.0), np.nan)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


def cohen_kappa(
    rater_a: Sequence[Hashable] | npt.ArrayLike, rater_b: Sequence[Hashable] | None = None
) -> float:
    """Cohen's kappa: (p_o - p_e) / (1 - p_e).

    Either two equal-length label sequences (any hashable labels, item i rated by both), or a
    single square contingency table (rows: rater A's label, columns: rater B's). NaN when chance
    agreement is already 1 (both raters gave one and the same label throughout): kappa is
    undefined there, not perfect.
    """
    if rater_b is None:
        table = np.asarray(rater_a, dtype=np.float64)
        if table.ndim != 2 or table.shape[0] != table.shape[1]:
            raise ValueError(
                "cohen_kappa with one argument takes a square contingency table, "
                f"got shape {table.shape}"
            )
        if (table < 0).any() or not np.isfinite(table).all():
            raise ValueError("contingency table counts must be finite and >= 0")
    else:
        a = list(rater_a)  # type: ignore[arg-type]
        b = list(rater_b)
        if len(a) != len(b):
            raise ValueError(
                f"rater_a and rater_b must rate the same items: {len(a)} vs {len(b)} labels"
            )
        labels = sorted({*a, *b}, key=repr)
        where = {label: i for i, label in enumerate(labels)}
        table = np.zeros((len(labels), len(labels)), dtype=np.float64)
        np.add.at(table, ([where[x] for x in a], [where[y] for y in b]), 1)
    total = table.sum()
    if total == 0:
        raise ValueError("cohen_kappa needs at least one rated item")
    observed = np.trace(table) / total
    expected = float((table.sum(axis=1) @ table.sum(axis=0)) / (total * total))
    if math.isclose(expected, 1.0):
        return math.nan
    return float((observed - expected) / (1 - expected))


def clustered_share(
    flags: Sequence[tuple[Hashable, bool]], confidence: float = 0.95
) -> tuple[float, float, float]:
    """The share of true flags, and a Wilson interval on the effective sample size.

    Flags of one cluster (the rollouts of one task) are correlated, so ``n`` is divided by
    the design effect ``1 + (m0 - 1) rho`` (Kish 1965): ``rho`` is the intraclass correlation
    (the ANOVA estimator, clipped to [0, 1]) and ``m0`` the clusters' effective size; the
    quantile is Student's on the clusters' degrees of freedom
    (:func:`~whileai.measure.intervals.variance_df`: ``k - 1``, fewer where a few clusters
    carry every flag). With one flag per cluster this is Wilson's interval. Returns
    ``(share, low, high)``."""
    if not flags:
        raise ValueError("clustered_share needs at least one flag")
    sizes: dict[Hashable, int] = {}
    hits: dict[Hashable, int] = {}
    for key, flag in flags:
        sizes[key] = sizes.get(key, 0) + 1
        hits[key] = hits.get(key, 0) + bool(flag)
    m = np.array(list(sizes.values()), dtype=np.float64)
    y = np.array([hits[k] for k in sizes], dtype=np.float64)
    return clustered_share_of_counts(m, y, confidence)


def clustered_share_of_counts(
    sizes: npt.ArrayLike, hits: npt.ArrayLike, confidence: float = 0.95
) -> tuple[float, float, float]:
    """:func:`clustered_share` from each cluster's flag count and true-flag count (clusters
    in the order their first flag came), for a caller that counted as rows streamed by."""
    m = np.asarray(sizes, dtype=np.float64)
    y = np.asarray(hits, dtype=np.float64)
    if not len(m) or not m.all():
        raise ValueError("clustered_share needs at least one flag in every cluster")
    n, k = float(m.sum()), len(m)
    p = float(y.sum() / n)
    deff = 1.0
    if n > k and k > 1:
        within = float((y - y * y / m).sum() / (n - k))
        between = float((m * (y / m - p) ** 2).sum() / (k - 1))
        m0 = (n - float((m * m).sum()) / n) / (k - 1)
        denom = between + (m0 - 1) * within
        rho = min(max((between - within) / denom, 0.0), 1.0) if denom > 0 else 0.0
        deff = 1.0 + (m0 - 1) * rho
    n_eff = n / deff
    z = _z(confidence)
    if n > k > 1:
        # the correlation was estimated from k clusters: Student's quantile on their degrees
        # of freedom, as a mean of k cluster shares would use (k - 1, fewer where a few
        # clusters carry every flag)
        df = variance_df(y / m)
        z = float(special.stdtrit(df, 1 - (1 - confidence) / 2))
    z2 = z * z
    centre = (p + z2 / (2 * n_eff)) / (1 + z2 / n_eff)
    half = z / (1 + z2 / n_eff) * math.sqrt(p * (1 - p) / n_eff + z2 / (4 * n_eff * n_eff))
    return p, max(0.0, centre - half), min(1.0, centre + half)
