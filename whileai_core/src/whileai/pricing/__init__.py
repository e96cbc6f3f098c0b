"""What a model call costs in money: a dated price table, shipped as data, that a user may
replace or extend, and the cost of a call from its token counts.

The shipped table (``prices.json`` beside this module) holds list prices in US dollars per
million tokens (input, cached input where a provider discounts it, output) and the date they
were read. A model is found by its exact name, else by the longest table name it starts with
(``gpt-4o-2024-08-06`` is priced as ``gpt-4o``, ``gpt-4o-mini-2024-07-18`` as
``gpt-4o-mini``), with a provider prefix (``openai:``, ``openai/``) set aside. A model the
table does not hold has no price: its cost is None, never 0.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import math
import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

#: Prices are per this many tokens.
PER_TOKENS = 1_000_000


@attrs.frozen
class Price:
    """One model's prices, US dollars per million tokens."""

    input: float
    output: float
    #: input tokens the server served from its prompt cache, where it discounts them
    cached_input: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        cached = min(max(cached_input_tokens, 0), input_tokens)
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        total = (
            (input_tokens - cached) * self.input
            + cached * cached_rate
            + output_tokens * self.output
        )
        return total / PER_TOKENS


@attrs.frozen
class PriceTable:
    """Prices by model name, and the date they were read."""

    prices: Mapping[str, Price]
    date: str | None = None
    source: str = ""

    def lookup(self, model: str | None) -> Price | None:
        """The price of ``model``: by its name, else the longest table name it starts with,
        its provider prefix set aside; None when the table has none."""
        if not model:
            return None
        for name in _candidates(model):
            if name in self.prices:
                return self.prices[name]
            starts = [k for k in self.prices if name.startswith(k)]
            if starts:
                return self.prices[max(starts, key=len)]
        return None

    def merged(self, override: Mapping[str, Any]) -> PriceTable:
        """This table with ``override``'s models added or replaced."""
        return PriceTable({**self.prices, **_prices(override, "prices")}, self.date, self.source)


def _candidates(model: str) -> list[str]:
    out = [model]
    for separator in (":", "/"):
        if separator in model:
            out.append(model.split(separator, 1)[1])
    # a local path to a model file is named by the file
    if "/" in model:
        out.append(Path(model).name.removesuffix(".gguf"))
    return out


@functools.cache
def shipped_table() -> PriceTable:
    """The table the package ships, read once a process (a training loop that calls
    ``simulate()`` every step read and checked it again on every call: a quarter of a
    millisecond each). Its prices are read-only, so the one table is shared safely."""
    text = importlib.resources.files(__package__).joinpath("prices.json").read_text("utf-8")
    table = table_from(json.loads(text), "the shipped price table")
    return attrs.evolve(table, prices=types.MappingProxyType(table.prices))


def table_from(data: Mapping[str, Any], what: str) -> PriceTable:
    if not isinstance(data, Mapping) or not isinstance(data.get("models"), Mapping):
        raise ValueError(f"{what}: a price table is a mapping with 'models'")
    return PriceTable(
        _prices(data["models"], what), data.get("date"), str(data.get("source") or "")
    )


def _prices(models: Mapping[str, Any], what: str) -> dict[str, Price]:
    out: dict[str, Price] = {}
    for name, entry in models.items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"{what}: the price of {name!r} is a mapping, got {entry!r}")
        values = {}
        for key in ("input", "output", "cached_input"):
            value = entry.get(key)
            if value is None and key == "cached_input":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(
                    f"{what}: {name!r} {key} must be a price >= 0 in USD per million tokens, "
                    f"got {value!r}"
                )
            values[key] = float(value)
        out[str(name)] = Price(**values)
    return out


def price_table(prices: Any = None) -> PriceTable:
    """The table a run prices with: the shipped one, extended by ``prices`` (a mapping of
    model to ``{"input", "output"[, "cached_input"]}``, or the path of a JSON file holding a
    whole table or such a mapping)."""
    table = shipped_table()
    if prices is None:
        return table
    if isinstance(prices, str | os.PathLike):
        path = Path(prices)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"prices={str(prices)!r}: {exc}") from None
        if isinstance(data, Mapping) and "models" in data:
            own = table_from(data, f"prices file {path}")
            return PriceTable({**table.prices, **own.prices}, own.date or table.date, own.source)
        prices = data
    if not isinstance(prices, Mapping):
        raise ValueError(
            f"prices must be a mapping of model to prices, or a JSON file's path; got {prices!r}"
        )
    return table.merged(prices)
