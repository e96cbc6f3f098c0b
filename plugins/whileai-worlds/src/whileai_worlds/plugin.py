"""Registers the built-in worlds through the same entry point a third party would use."""

from __future__ import annotations

from typing import Any

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai_worlds.shop import ShopWorld


def make_shop(argument: str | None = None, **options: Any) -> ShopWorld:
    """``"shop"`` or ``"shop:<kinds>"``: the argument is the world's own fault plan, a
    comma-separated list of fault kinds (``"shop:timeout,rate_limit"``) or ``all``."""
    if argument is not None:
        if "fault_plan" in options:
            raise ValueError(
                f"world spec 'shop:{argument}' names a fault plan and fault_plan= is given too; "
                "pass one"
            )
        options["fault_plan"] = argument
    return ShopWorld(**options)


@hookimpl
def whileai_register_worlds(register: Register) -> None:
    register(
        "shop",
        make_shop,
        aliases=("shop_world",),
        description="orders, refunds and accounts per rollout, with injected faults",
    )
