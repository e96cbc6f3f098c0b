"""What a run spends in money: each row's ``usage.cost_usd``, ``report()["cost"]`` by role,
and what ``budget_usd`` is checked against.

A row's cost is what its own model calls cost: the agent's and the simulated user's tokens at
their models' prices. The situation writer's and a judge's calls are not one row's, so they
are counted on their backends (tokens since the run started, at the backend's model's
price). A model the price table does not hold makes the cost None, never 0, and is named in
one warning; your own agent function makes no model call of the run's, so it costs nothing
here (whatever it spends itself is its own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from whileai.backend_use import RunBackend
from whileai.pricing import Price, PriceTable


@attrs.define
class RunCosts:
    """Prices a run's rows and backends."""

    table: PriceTable
    agent_label: str
    user_label: str
    agent_is_function: bool
    #: models the table holds no price for, in the order met
    unpriced: list[str] = attrs.field(factory=list)
    agent_usd: float = 0.0
    user_usd: float = 0.0
    #: a row's agent or user cost was unknown
    rows_unknown: bool = False

    #: prices found by the names asked for: a run asks for its few models on every row
    _found: dict[tuple[Any, ...], Price | None] = attrs.field(factory=dict, init=False, repr=False)

    def _price(self, *names: Any) -> Price | None:
        try:
            return self._found[names]
        except KeyError:
            found = self._lookup(names)
            if len(self._found) < 1024:
                self._found[names] = found
            return found
        except TypeError:  # a model name a backend reported as something unhashable
            return self._lookup(names)

    def _lookup(self, names: tuple[Any, ...]) -> Price | None:
        for name in names:
            if isinstance(name, str) and name:
                found = self.table.lookup(name)
                if found is not None:
                    return found
        shown = next((n for n in names if isinstance(n, str) and n), None)
        if shown is not None and shown not in self.unpriced:
            self.unpriced.append(shown)
        return None

    def price_row(self, row: dict[str, Any]) -> float | None:
        """Write ``usage.cost_usd`` on ``row`` (None when a model it called is unpriced)."""
        usage = row.get("usage")
        if not isinstance(usage, dict):
            return None
        total: float | None = 0.0
        agent_tokens = (
            int(usage.get("input_tokens") or 0),
            int(usage.get("output_tokens") or 0),
            int(usage.get("cached_input_tokens") or 0),
        )
        if not self.agent_is_function and any(agent_tokens):
            price = self._price(row.get("model_version"), self.agent_label)
            if price is None:
                total = None
            else:
                cost = price.cost(*agent_tokens)
                self.agent_usd += cost
                total = cost
        user_tokens = (
            int(usage.get("user_input_tokens") or 0),
            int(usage.get("user_output_tokens") or 0),
            int(usage.get("user_cached_input_tokens") or 0),
        )
        if any(user_tokens):
            price = self._price(self.user_label)
            if price is None:
                total = None
            else:
                cost = price.cost(*user_tokens)
                self.user_usd += cost
                total = None if total is None else total + cost
        if total is None:
            self.rows_unknown = True
        usage["cost_usd"] = None if total is None else round(total, 8)
        return total

    def backend_usd(self, entry: RunBackend, before: Mapping[int, Any]) -> float | None:
        """What ``entry``'s calls since the run started cost (None: tokens at no price, or a
        backend that does not count its tokens)."""
        stats = getattr(entry.backend, "stats", None)
        if stats is None:
            # a backend that keeps no token counters: what it spent is unknown, never 0
            return None
        old = before.get(id(entry.backend)) or {}
        tokens = tuple(
            int(getattr(stats, name, 0) or 0) - int(old.get(name) or 0)
            for name in ("input_tokens", "output_tokens", "cached_input_tokens")
        )
        if not any(tokens):
            return 0.0
        price = self._price(entry.label, getattr(entry.backend, "model", None))
        return None if price is None else price.cost(*tokens)

    def spent(self, backends: Sequence[RunBackend], before: Mapping[int, Any]) -> float | None:
        """Every model call of the run so far, all roles (None when one is unpriced)."""
        total = 0.0
        for entry in backends:
            cost = self.backend_usd(entry, before)
            if cost is None:
                return None
            total += cost
        return total

    def report(self, backends: Sequence[RunBackend], before: Mapping[int, Any]) -> dict[str, Any]:
        """``report()["cost"]``: USD by role, the total, what had no price, the table's date."""
        roles: dict[str, float | None] = {
            "agent": None if self.rows_unknown and self.agent_usd == 0 else self.agent_usd,
            "user": None if self.rows_unknown and self.user_usd == 0 else self.user_usd,
        }
        others: dict[str, float | None] = {}
        for entry in backends:
            rest = [r for r in entry.roles if r not in ("agent", "user")]
            if not rest:
                continue
            cost = self.backend_usd(entry, before)
            if cost is not None:
                # what this backend spent beyond the rows' own calls on it
                if "agent" in entry.roles:
                    cost -= self.agent_usd
                if "user" in entry.roles:
                    cost -= self.user_usd
                cost = max(cost, 0.0)
            key = "+".join("writer" if r == "simulator" else r for r in rest)
            have = others.get(key, 0.0)
            others[key] = None if cost is None or have is None else have + cost
        roles.update(others)
        roles.setdefault("writer", 0.0)
        roles.setdefault("judge", 0.0)
        known = list(roles.values())
        total = None if any(v is None for v in known) else sum(v for v in known if v is not None)
        return {
            "usd_by_role": {k: (None if v is None else round(v, 6)) for k, v in roles.items()},
            "total_usd": None if total is None else round(total, 6),
            "unpriced": list(self.unpriced),
            "prices_date": self.table.date,
        }
