"""Plots as inline SVG: estimates with their intervals, pass@k over k, stacked counts.

Each plot is a standalone ``<svg>`` with its own size, namespace and fonts (no page CSS reaches
it), so the page's script can draw it onto a canvas and save it as a PNG. Every text is
escaped; nothing is fetched.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import attrs

from whileai.schema.report import fmt

FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"
INK, MUTED, GRID = "#1f2933", "#6b7280", "#e5e7eb"
#: the series colours, in order (colour-blind safe: Okabe and Ito)
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9")
LABEL_W, PLOT_W, VALUE_W, ROW_H, TOP, BOTTOM = 200, 360, 250, 24, 30, 34


@attrs.frozen
class Estimate:
    """One line of an interval plot: a label, a value and its interval (None: a point)."""

    label: str
    value: float | None
    interval: tuple[float, float] | None = None
    #: what the value column prints instead of the default ``value [lo, hi]``
    text: str | None = None


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    step = (high - low) / (count - 1)
    return [low + i * step for i in range(count)]


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='{_esc(title)}' {FONT} "
        f"font-size='12'><rect width='{width}' height='{height}' fill='#ffffff'/>"
        f"<title>{_esc(title)}</title>{''.join(body)}</svg>"
    )


def _range(
    items: Sequence[Estimate], floor: float | None, ceiling: float | None
) -> tuple[float, float]:
    values = [v for e in items for v in (e.value, *(e.interval or ())) if v is not None]
    low = min([*values, *([floor] if floor is not None else [])], default=0.0)
    high = max([*values, *([ceiling] if ceiling is not None else [])], default=1.0)
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    return low, high


def interval_plot(
    title: str,
    items: Sequence[Estimate],
    *,
    low: float | None = None,
    high: float | None = None,
    zero: bool = False,
    band: float | None = None,
    band_row: int | None = None,
    axis: str = "",
) -> str:
    """A dot per estimate with its interval as a whisker, one row each (a forest plot when
    ``zero`` draws the line of no difference and ``band`` shades the noise band around it, on
    the row ``band_row`` only: a run-to-run std belongs to one metric).
    ``low``/``high`` fix the axis (``0, 1`` for rates); otherwise it spans the data."""
    if zero:
        spread = max(
            [abs(v) for e in items for v in (e.value, *(e.interval or ())) if v is not None]
            + [band or 0.0, 0.05]
        )
        lo, hi = -spread * 1.1, spread * 1.1
    else:
        lo, hi = _range(items, low, high)
        lo = float(low) if low is not None else lo
        hi = float(high) if high is not None else hi
    width = LABEL_W + PLOT_W + VALUE_W
    height = TOP + ROW_H * max(1, len(items)) + BOTTOM

    def x(value: float) -> float:
        return float(LABEL_W + (value - lo) / (hi - lo) * PLOT_W)

    body = [f"<text x='8' y='18' font-weight='bold' fill='{INK}'>{_esc(title)}</text>"]
    bottom = TOP + ROW_H * max(1, len(items))
    if band is not None and band > 0 and band_row is not None:
        body.append(
            f"<rect x='{x(-band):.1f}' y='{TOP + ROW_H * band_row}' "
            f"width='{x(band) - x(-band):.1f}' height='{ROW_H}' fill='#fde68a' fill-opacity='0.8'>"
            f"<title>noise band +/-{band:.3f}</title></rect>"
        )
    for tick in _ticks(lo, hi):
        body.append(
            f"<line x1='{x(tick):.1f}' x2='{x(tick):.1f}' y1='{TOP}' y2='{bottom}' "
            f"stroke='{GRID}'/><text x='{x(tick):.1f}' y='{bottom + 14}' text-anchor='middle' "
            f"fill='{MUTED}'>{fmt(tick, 2)}</text>"
        )
    if zero:
        body.append(
            f"<line x1='{x(0):.1f}' x2='{x(0):.1f}' y1='{TOP}' y2='{bottom}' stroke='{INK}' "
            "stroke-dasharray='4 3'/>"
        )
    if axis:
        body.append(
            f"<text x='{LABEL_W + PLOT_W / 2:.0f}' y='{bottom + 29}' text-anchor='middle' "
            f"fill='{MUTED}'>{_esc(axis)}</text>"
        )
    if not items:
        body.append(f"<text x='{LABEL_W}' y='{TOP + 16}' fill='{MUTED}'>nothing to plot</text>")
    for i, item in enumerate(items):
        y = TOP + ROW_H * i + ROW_H / 2
        body.append(
            f"<text x='{LABEL_W - 8}' y='{y + 4:.1f}' text-anchor='end' fill='{INK}'>"
            f"{_esc(item.label[:32])}</text>"
        )
        if item.interval is not None:
            a, b = (x(v) for v in item.interval)
            body.append(
                f"<line x1='{a:.1f}' x2='{b:.1f}' y1='{y:.1f}' y2='{y:.1f}' "
                f"stroke='{PALETTE[0]}' stroke-width='2'/>"
                f"<line x1='{a:.1f}' x2='{a:.1f}' y1='{y - 5:.1f}' y2='{y + 5:.1f}' "
                f"stroke='{PALETTE[0]}' stroke-width='2'/>"
                f"<line x1='{b:.1f}' x2='{b:.1f}' y1='{y - 5:.1f}' y2='{y + 5:.1f}' "
                f"stroke='{PALETTE[0]}' stroke-width='2'/>"
            )
        if item.value is not None:
            body.append(
                f"<circle cx='{x(item.value):.1f}' cy='{y:.1f}' r='4.5' fill='{PALETTE[1]}'/>"
            )
        text = item.text
        if text is None:
            ci = (
                "no interval"
                if item.interval is None
                else (f"[{fmt(item.interval[0])}, {fmt(item.interval[1])}]")
            )
            text = f"{fmt(item.value)} {ci}"
        body.append(
            f"<text x='{LABEL_W + PLOT_W + 8}' y='{y + 4:.1f}' fill='{INK}'>{_esc(text)}</text>"
        )
    return _svg(width, height, title, body)


@attrs.frozen
class Series:
    """One curve of a k plot: its name and, per k, the estimate and its interval."""

    name: str
    points: Sequence[tuple[int, float | None, tuple[float, float] | None]]


def k_plot(title: str, series: Sequence[Series], *, axis: str = "k (attempts per task)") -> str:
    """Each series over k on a 0-1 axis: its interval as a shaded band (whiskers where a lone
    point has one) and its estimates joined by a line."""
    ks = sorted({k for s in series for k, _, _ in s.points}) or [1]
    width, height = LABEL_W + PLOT_W + VALUE_W, 280
    left, right, top, bottom = 60, 60 + PLOT_W + 120, 34, 230
    k_lo, k_hi = ks[0], ks[-1]

    def x(k: float) -> float:
        return left + ((k - k_lo) / (k_hi - k_lo) if k_hi > k_lo else 0.5) * (right - left)

    def y(v: float) -> float:
        return bottom - v * (bottom - top)

    body = [f"<text x='8' y='18' font-weight='bold' fill='{INK}'>{_esc(title)}</text>"]
    for tick in _ticks(0.0, 1.0):
        body.append(
            f"<line x1='{left}' x2='{right}' y1='{y(tick):.1f}' y2='{y(tick):.1f}' "
            f"stroke='{GRID}'/><text x='{left - 8}' y='{y(tick) + 4:.1f}' text-anchor='end' "
            f"fill='{MUTED}'>{tick:.2f}</text>"
        )
    for k in ks:
        body.append(
            f"<text x='{x(k):.1f}' y='{bottom + 16}' text-anchor='middle' fill='{MUTED}'>{k}</text>"
        )
    body.append(
        f"<text x='{(left + right) / 2:.0f}' y='{bottom + 34}' text-anchor='middle' "
        f"fill='{MUTED}'>{_esc(axis)}</text>"
    )
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        with_ci = [(k, ci) for k, v, ci in s.points if ci is not None]
        if len(with_ci) >= 2:
            upper = " ".join(f"{x(k):.1f},{y(ci[1]):.1f}" for k, ci in with_ci)
            lower = " ".join(f"{x(k):.1f},{y(ci[0]):.1f}" for k, ci in reversed(with_ci))
            body.append(
                f"<polygon points='{upper} {lower}' fill='{colour}' fill-opacity='0.18' "
                "stroke='none'/>"
            )
        for k, ci in with_ci:
            body.append(
                f"<line x1='{x(k):.1f}' x2='{x(k):.1f}' y1='{y(ci[0]):.1f}' y2='{y(ci[1]):.1f}' "
                f"stroke='{colour}' stroke-opacity='0.7'/>"
            )
        known = [(k, v) for k, v, _ in s.points if v is not None]
        if len(known) >= 2:
            line = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in known)
            body.append(
                f"<polyline points='{line}' fill='none' stroke='{colour}' stroke-width='2'/>"
            )
        for k, v in known:
            body.append(
                f"<circle cx='{x(k):.1f}' cy='{y(v):.1f}' r='3.5' fill='{colour}'>"
                f"<title>{_esc(s.name)} k={k}: {fmt(v)}</title></circle>"
            )
        body.append(
            f"<rect x='{right + 16}' y='{top + 18 * i}' width='12' height='12' fill='{colour}'/>"
            f"<text x='{right + 32}' y='{top + 18 * i + 10}' fill='{INK}'>{_esc(s.name)}</text>"
        )
    if not any(v is not None for s in series for _, v, _ in s.points):
        body.append(f"<text x='{left + 10}' y='{top + 20}' fill='{MUTED}'>nothing to plot</text>")
    return _svg(width, height, title, body)


def count_bars(
    title: str, items: Sequence[tuple[str, int, int]], *, labels: tuple[str, str]
) -> str:
    """One stacked bar per line: the first count (passed) then the second (failed)."""
    width = LABEL_W + PLOT_W + VALUE_W
    height = TOP + ROW_H * max(1, len(items)) + BOTTOM
    most = max([a + b for _, a, b in items], default=1) or 1
    body = [f"<text x='8' y='18' font-weight='bold' fill='{INK}'>{_esc(title)}</text>"]
    for i, (label, first, second) in enumerate(items):
        y = TOP + ROW_H * i + 4
        w1 = first / most * PLOT_W
        w2 = second / most * PLOT_W
        body.append(
            f"<text x='{LABEL_W - 8}' y='{y + 12}' text-anchor='end' fill='{INK}'>"
            f"{_esc(label[:32])}</text>"
            f"<rect x='{LABEL_W}' y='{y}' width='{w1:.1f}' height='{ROW_H - 8}' "
            f"fill='{PALETTE[2]}'/>"
            f"<rect x='{LABEL_W + w1:.1f}' y='{y}' width='{w2:.1f}' height='{ROW_H - 8}' "
            f"fill='{PALETTE[1]}'/>"
            f"<text x='{LABEL_W + PLOT_W + 8}' y='{y + 12}' fill='{INK}'>"
            f"{first} {labels[0]}, {second} {labels[1]}</text>"
        )
    if not items:
        body.append(f"<text x='{LABEL_W}' y='{TOP + 16}' fill='{MUTED}'>nothing to plot</text>")
    bottom = TOP + ROW_H * max(1, len(items))
    for j, (name, colour) in enumerate(zip(labels, (PALETTE[2], PALETTE[1]), strict=True)):
        body.append(
            f"<rect x='{LABEL_W + 120 * j}' y='{bottom + 8}' width='12' height='12' "
            f"fill='{colour}'/><text x='{LABEL_W + 120 * j + 16}' y='{bottom + 18}' "
            f"fill='{INK}'>{_esc(name)}</text>"
        )
    return _svg(width, height, title, body)
