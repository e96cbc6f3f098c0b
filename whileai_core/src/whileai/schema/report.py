"""The base every measurement report shares: attributes for code, ``report["key"]`` too, and a
compact table for a person, its caveats (``notes``) printed under it.

A report is an attrs class that subclasses :class:`Report` and implements ``_lines()``; its
fields are its keys. Notes say what a reader must know to trust the numbers: a floor not met,
groups left out, a point estimate given without an interval.
"""

from __future__ import annotations

import html
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import attrs


class Report(Mapping[str, Any]):
    """Mixin for attrs report classes: Mapping access over the fields, and ``__str__``."""

    title: str = "report"

    def __getitem__(self, key: str) -> Any:
        if key in self._keys():
            return getattr(self, key)
        raise KeyError(f"{type(self).__name__} has no key {key!r}; keys: {', '.join(self._keys())}")

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def _keys(self) -> tuple[str, ...]:
        fields = attrs.fields(type(self))  # type: ignore[arg-type]  # subclasses are attrs classes
        return tuple(f.name for f in fields if not f.name.startswith("_"))

    def to_dict(self, without: Collection[str] = ()) -> dict[str, Any]:
        """A plain-data copy (nested reports become dicts too), for JSON or logs; ``without``
        names fields to leave out (never read)."""
        return {k: _plain(getattr(self, k)) for k in self._keys() if k not in without}

    def _lines(self) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} must say how it prints")

    def __str__(self) -> str:
        lines = [self.title, *self._lines()]
        notes = getattr(self, "notes", None) or []
        lines.extend(f"note: {n}" for n in notes)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(str(self))

    def _repr_html_(self) -> str:
        """A notebook shows the same table, in a monospace block, escaped."""
        body = html.escape(str(self))
        return (
            f'<div class="whileai-report" title="{html.escape(self.title)}">'
            f'<pre style="font-family: monospace; white-space: pre;">{body}</pre></div>'
        )


_SCALARS = frozenset((str, int, float, bool))


def _plain(value: Any) -> Any:
    # plain data by exact type first: a run's report holds a table of every group, and the
    # checks below go through the ABCs
    kind = type(value)
    if kind is dict:
        # its scalars without a call each: a table of every group is thousands of them
        return {k: v if v is None or type(v) in _SCALARS else _plain(v) for k, v in value.items()}
    if value is None or kind in _SCALARS:
        return value
    if isinstance(value, Report):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [v if v is None or type(v) in _SCALARS else _plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return value.item()
    if isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray):
        # rows still in their file (a StoredRows a report holds), read for the copy
        return [_plain(v) for v in value]
    return value


def json_default(value: Any) -> Any:
    """``default=`` for a json encoder handed reports as they are: one level of what
    :func:`_plain` makes (a report as its fields, another mapping as a dict, a numpy scalar as
    its Python number), for the encoder to walk on in C; anything else by its ``str()``."""
    if isinstance(value, Report):
        return {k: getattr(value, k) for k in value}
    if isinstance(value, Mapping):
        return dict(value)
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    return str(value)


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a table; None prints as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{value:.{digits}f}"


def fmt_ci(ci: Sequence[float] | None, digits: int = 3) -> str:
    """``[lo, hi]``, or ``no interval`` when there is none."""
    if ci is None:
        return "no interval"
    return f"[{fmt(ci[0], digits)}, {fmt(ci[1], digits)}]"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    """Left-aligned columns, first column as given, the rest right-aligned."""
    cells = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r: list[str]) -> str:
        parts = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        return (indent + "  ".join(parts)).rstrip()

    return [line(cells[0]), *[line(r) for r in cells[1:]]]
