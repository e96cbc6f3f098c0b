"""Vectorised statistics the measurement suite shares: bootstrap intervals over tasks, the paired
bootstrap, and the t-based noise band.

Every interval here is over tasks (one value per task), never over rows (Miller 2024,
arXiv:2411.00640). The bootstrap is the percentile method, the same interval
``scipy.stats.bootstrap(..., method="percentile")`` gives, computed much faster:

- When the values take few distinct values (a pass rate of a k-sample group takes at most k + 1),
  resampling n tasks with replacement is the same, in distribution, as drawing how many times each
  distinct value is picked from Multinomial(n, share of each value). That draw costs one number
  per distinct value per resample instead of one per task, so 100,000 tasks x 10,000 resamples
  runs in milliseconds and is exact, not an approximation.
- Otherwise indices are drawn in chunks, so memory stays bounded whatever the task count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import special

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
# Fewer tasks than this and a bootstrap interval describes the handful drawn, not the population.
MIN_TASKS_FOR_INTERVAL = 3
# Upper bound on the elements one chunk of resampled indices holds (about 32 MB of int64).
_CHUNK_ELEMENTS = 1 << 22

Seed = int | np.random.Generator | None
Interval = tuple[float, float]


def _rng(seed: Seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def _check_settings(n_resamples: int, confidence: float) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def _as_columns(values: npt.ArrayLike, what: str) -> npt.NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{what} must be one value per task (1-D) or one row per task (2-D)")
    if array.shape[0] == 0:
        raise ValueError(f"{what} is empty: a bootstrap needs at least one task")
    if not np.isfinite(array).all():
        raise ValueError(f"{what} holds NaN or infinite values; drop or fix those tasks first")
    return array


def _frequency_table(
    columns: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]] | None:
    """The distinct task rows and how many tasks share each, or None when there are too many
    distinct rows for counting to beat drawing indices (a binomial draw costs a few index
    draws, so counts win while distinct rows are under an eighth of the tasks)."""
    n, width = columns.shape
    limit = n // 8
    # One sort per column and one over the combined codes: far cheaper than np.unique(axis=0).
    codes = np.zeros(n, dtype=np.int64)
    size = 1
    for j in range(width):
        levels, inverse = np.unique(columns[:, j], return_inverse=True)
        size *= len(levels)
        if len(levels) > limit or size >= 2**62:
            return None
        codes = codes * len(levels) + inverse.reshape(-1)
    _, first, counts = np.unique(codes, return_index=True, return_counts=True)
    if len(first) > limit:
        return None
    return columns[first], counts.astype(np.int64)


def bootstrap_means(
    values: npt.ArrayLike, n_resamples: int = DEFAULT_RESAMPLES, seed: Seed = 0
) -> npt.NDArray[np.float64]:
    """Means of ``n_resamples`` bootstrap resamples of the tasks, shape (n_resamples, columns).

    ``values`` is one value per task, or one row per task with several columns; the columns of a
    row are resampled together (the same tasks drawn for each), so intervals from one call are
    joint. The resampling is exact either way (see the module docstring for how).
    """
    _check_settings(n_resamples, DEFAULT_CONFIDENCE)
    columns = _as_columns(values, "values")
    n = columns.shape[0]
    rng = _rng(seed)
    out = np.empty((n_resamples, columns.shape[1]), dtype=np.float64)
    table = _frequency_table(columns)
    if table is not None:
        distinct, counts = table
        m = distinct.shape[0]
        shares = counts / n
        step = max(1, _CHUNK_ELEMENTS // max(m, 1))
        for start in range(0, n_resamples, step):
            stop = min(n_resamples, start + step)
            picked = rng.multinomial(n, shares, size=stop - start)
            out[start:stop] = (picked @ distinct) / n
        return out
    step = max(1, _CHUNK_ELEMENTS // n)
    index_type = np.int32 if n < 2**31 else np.int64
    for start in range(0, n_resamples, step):
        stop = min(n_resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n), dtype=index_type)
        for j in range(columns.shape[1]):
            out[start:stop, j] = columns[idx, j].mean(axis=1)
    return out


def percentile_interval(
    resampled: npt.ArrayLike, confidence: float = DEFAULT_CONFIDENCE
) -> list[Interval]:
    """The percentile interval of each column of bootstrap statistics (linear interpolation,
    as scipy's percentile method)."""
    _check_settings(1, confidence)
    array = np.asarray(resampled, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    alpha = 1 - confidence
    qs = np.quantile(array, [alpha / 2, 1 - alpha / 2], axis=0)
    return [(float(lo), float(hi)) for lo, hi in qs.T]


def bootstrap_ci(
    values: npt.ArrayLike,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval:
    """Percentile bootstrap interval of the mean of ``values`` (one value per task).

    Matches ``scipy.stats.bootstrap((values,), np.mean, method="percentile")`` within Monte
    Carlo error. Callers decide whether there are enough tasks to print it
    (:data:`MIN_TASKS_FOR_INTERVAL`).
    """
    _check_settings(n_resamples, confidence)
    array = _as_columns(values, "values")
    if array.shape[1] != 1:
        raise ValueError("bootstrap_ci takes one value per task; use bootstrap_cis for columns")
    return percentile_interval(bootstrap_means(array, n_resamples, seed), confidence)[0]


def bootstrap_cis(
    columns: npt.ArrayLike,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[Interval]:
    """One percentile interval per column, the tasks (rows) resampled jointly."""
    _check_settings(n_resamples, confidence)
    return percentile_interval(bootstrap_means(columns, n_resamples, seed), confidence)


def paired_bootstrap_ci(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, Interval]:
    """Mean of ``b - a`` over paired tasks and its percentile bootstrap interval.

    ``a[i]`` and ``b[i]`` are the same task under the two arms; resampling the per-task
    differences keeps the pairing, so the shared difficulty of a task cancels.
    """
    first = np.asarray(a, dtype=np.float64)
    second = np.asarray(b, dtype=np.float64)
    if first.shape != second.shape or first.ndim != 1:
        raise ValueError(
            f"a and b must be 1-D and paired task by task; got shapes {first.shape} and "
            f"{second.shape}"
        )
    diff = second - first
    interval = bootstrap_ci(diff, n_resamples, seed, confidence)
    return float(diff.mean()), interval


def t_quantile(df: float, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The two-sided Student t critical value for ``df`` degrees of freedom."""
    _check_settings(1, confidence)
    if not df > 0:
        raise ValueError(f"df must be positive (runs - 1), got {df!r}")
    return float(special.stdtrit(df, 1 - (1 - confidence) / 2))


def normal_quantile(p: float) -> float:
    """The standard normal quantile at ``p``."""
    if not 0 < p < 1:
        raise ValueError(f"a quantile needs p strictly between 0 and 1, got {p!r}")
    return float(special.ndtri(p))


def t_band(run_std: float, df: float, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """Half-width of the noise band: how far two single runs of the same model can differ on
    their own, at ``confidence``.

    A run's mean moves by ``run_std`` between re-runs, so the difference of two independent runs
    has standard deviation ``sqrt(2) * run_std``; ``run_std`` itself is estimated from
    ``df + 1`` runs, hence the t quantile rather than the normal one. A delta between two arms
    inside ``[-band, band]`` is what re-running the eval does by itself.
    """
    if isinstance(run_std, bool) or not isinstance(run_std, int | float):
        raise ValueError(f"run_std must be a number, got {run_std!r}")
    if not math.isfinite(run_std) or run_std < 0:
        raise ValueError(f"run_std must be a finite number >= 0, got {run_std!r}")
    return t_quantile(df, confidence) * math.sqrt(2.0) * float(run_std)


def sample_std(values: Sequence[float] | npt.ArrayLike) -> float:
    """Sample standard deviation (ddof=1); NaN below two values."""
    array = np.asarray(values, dtype=np.float64)
    if array.size < 2:
        return math.nan
    return float(array.std(ddof=1))
