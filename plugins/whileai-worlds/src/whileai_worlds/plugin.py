"""Registers the built-in worlds through the same entry point a third party would use."""

from __future__ import annotations

from typing import Any

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai_worlds.bank import BankWorld
from whileai_worlds.shop import ShopWorld


def _plan_options(world: str, argument: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """A spec's argument is the world's own fault plan: a comma-separated list of fault kinds
    (``"shop:timeout,rate_limit"``) or ``all``."""
    if argument is not None:
        if "fault_plan" in options:
            raise ValueError(
                f"world spec '{world}:{argument}' names a fault plan and fault_plan= is given "
                "too; pass one"
            )
        options["fault_plan"] = argument
    return options


def make_shop(argument: str | None = None, **options: Any) -> ShopWorld:
    """``"shop"`` or ``"shop:<kinds>"``."""
    return ShopWorld(**_plan_options("shop", argument, options))


def make_bank(argument: str | None = None, **options: Any) -> BankWorld:
    """``"bank"`` or ``"bank:<kinds>"``."""
    return BankWorld(**_plan_options("bank", argument, options))


@hookimpl
def whileai_register_worlds(register: Register) -> None:
    register(
        "shop",
        make_shop,
        aliases=("shop_world",),
        description="orders, refunds and accounts per rollout, with injected faults",
    )
    register(
        "bank",
        make_bank,
        description="accounts, transfers under a daily limit, cards and an identity check "
        "per rollout, with injected faults",
    )
