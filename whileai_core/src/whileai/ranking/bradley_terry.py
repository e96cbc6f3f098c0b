"""From pairwise preferences to a quality in [0, 1]: Bradley-Terry, fitted by Newton's method.

Why Bradley-Terry and not the plain win rate: a group larger than ``max_pairs`` allows is
compared on a random subset of its pairs, and there a row's win rate depends on whom it
happened to meet; Bradley-Terry puts every row on one scale from whatever pairs were asked
(Bradley and Terry 1952). On a full round robin the two agree in order.

The model: row ``i`` has strength ``p_i > 0`` and beats ``j`` with probability
``p_i / (p_i + p_j)``. A tie counts as half a win for each side (with both orders asked, a tie
mostly means the judge could not tell the replies apart). The strengths are the maximum of the
likelihood. A row that won every comparison has no finite maximum, so each row also plays
``prior_ties`` virtual ties against a fixed reference of strength 1 (a small prior towards
"average"): every strength stays finite, the scale is pinned (no normalisation step), and the
penalised likelihood is strictly concave in ``log p``, so its maximum is unique and Newton's
method in ``log p`` (with a halving step, which a concave function never needs for long)
reaches it in a handful of steps. Without the prior the plain maximum likelihood is found by
the minorise-maximise iteration of Hunter (2004, Ann. Statist. 32(1), eq. 3)::

    p_i <- W_i / sum_j n_ij / (p_i + p_j)

with ``W_i`` the wins of ``i`` and ``n_ij`` the comparisons of ``i`` with ``j``. (MM took some
270 iterations, 3.5 ms, for a group of four; a ranking fits a group per task.)

The quality of row ``i`` is its expected win rate against the other ranked rows of its group
under the fitted model, ``mean_j p_i / (p_i + p_j)``: a number in (0, 1), 0.5 for everyone
when nothing separates the rows, ordered like the strengths, and readable as "the chance this
reply beats another reply to the same task". It compares rows within a group only; the
qualities of two different tasks are not on one scale.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: virtual ties with a reference of strength 1 that every row plays (see the module doc)
DEFAULT_PRIOR_TIES = 1.0


def fit(
    n_items: int,
    outcomes: Sequence[tuple[int, int, float]],
    *,
    prior_ties: float = DEFAULT_PRIOR_TIES,
    tol: float = 1e-10,
    max_iter: int = 100_000,
) -> np.ndarray:
    """Bradley-Terry strengths of ``n_items`` from ``(i, j, s)`` outcomes (``s`` is what ``i``
    scored against ``j``: 1 a win, 0.5 a tie, 0 a loss).

    With ``prior_ties > 0`` the strengths are relative to the reference (strength 1). With
    ``prior_ties=0`` this is the plain maximum-likelihood fit, scaled to geometric mean 1; it
    exists only when every item has both a win and a loss (else ValueError).
    """
    if n_items < 0:
        raise ValueError(f"n_items must be >= 0, got {n_items}")
    if prior_ties < 0:
        raise ValueError(f"prior_ties must be >= 0, got {prior_ties}")
    wins = np.zeros(n_items)
    counts = np.zeros((n_items, n_items))
    for i, j, s in outcomes:
        if i == j or not (0 <= i < n_items and 0 <= j < n_items):
            raise ValueError(f"outcome ({i}, {j}) does not name two different items of {n_items}")
        if not 0 <= s <= 1:
            raise ValueError(f"outcome ({i}, {j}) scores {s}, outside [0, 1]")
        wins[i] += s
        wins[j] += 1 - s
        counts[i, j] += 1
        counts[j, i] += 1
    if n_items == 0:
        return wins
    if prior_ties == 0:
        losses = counts.sum(axis=1) - wins
        if np.any(wins <= 0) or np.any(losses <= 0):
            raise ValueError(
                "without a prior the fit needs every item to have a win and a loss; "
                "pass prior_ties > 0"
            )
    wins = wins + prior_ties / 2
    if prior_ties > 0:
        return _newton(wins, counts, prior_ties, tol, max_iter)
    p = np.ones(n_items)
    for _ in range(max_iter):
        denominator = (counts / (p[:, None] + p[None, :])).sum(axis=1) + prior_ties / (p + 1)
        new = wins / denominator
        if prior_ties == 0:
            new = new / np.exp(np.mean(np.log(new)))
        step = np.max(np.abs(np.log(new) - np.log(p)))
        p = new
        if step < tol:
            return np.asarray(p)
    raise RuntimeError(f"Bradley-Terry fit did not converge in {max_iter} iterations")


def _newton(
    wins: np.ndarray, counts: np.ndarray, prior_ties: float, tol: float, max_iter: int
) -> np.ndarray:
    """The penalised maximum likelihood in ``theta = log p`` by Newton's method: ``wins``
    holds each row's half of its virtual ties."""
    n = len(wins)
    theta = np.zeros(n)

    def value(t: np.ndarray) -> float:
        pairs = (counts * np.logaddexp(t[:, None], t[None, :])).sum() / 2
        return float(wins @ t - pairs - prior_ties * np.logaddexp(0.0, t).sum())

    current = value(theta)
    for _ in range(max_iter):
        beats = 1 / (1 + np.exp(theta[None, :] - theta[:, None]))  # p_i / (p_i + p_j)
        own = 1 / (1 + np.exp(-theta))  # p_i / (p_i + 1), against the reference
        gradient = wins - (counts * beats).sum(axis=1) - prior_ties * own
        curvature = counts * beats * beats.T
        hessian = curvature - np.diag(curvature.sum(axis=1) + prior_ties * own * (1 - own))
        step = np.linalg.solve(hessian, -gradient)
        scale = 1.0
        while True:
            candidate = theta + scale * step
            reached = value(candidate)
            # a concave function rises along a Newton step from close enough; from afar
            # the step is halved until it does (rounding aside)
            if reached >= current - 1e-12 * (1 + abs(current)) or scale < 1e-6:
                break
            scale /= 2
        moved = float(np.max(np.abs(candidate - theta)))
        theta, current = candidate, reached
        if moved < tol:
            return np.asarray(np.exp(theta))
    raise RuntimeError(f"Bradley-Terry fit did not converge in {max_iter} iterations")


def expected_win_rate(strengths: np.ndarray) -> np.ndarray:
    """Each item's mean chance to beat each other item: ``mean_j p_i / (p_i + p_j)``.

    A single item has nobody to beat: NaN (the caller says why it has no quality).
    """
    p = np.asarray(strengths, dtype=float)
    n = len(p)
    if n < 2:
        return np.full(n, np.nan)
    beats = p[:, None] / (p[:, None] + p[None, :])
    np.fill_diagonal(beats, 0.0)
    return np.asarray(beats.sum(axis=1) / (n - 1))


def win_rate(n_items: int, outcomes: Sequence[tuple[int, int, float]]) -> np.ndarray:
    """The plain win rate, ties as half: the reference a round robin is checked against."""
    scored = np.zeros(n_items)
    played = np.zeros(n_items)
    for i, j, s in outcomes:
        scored[i] += s
        scored[j] += 1 - s
        played[i] += 1
        played[j] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(scored / played)
