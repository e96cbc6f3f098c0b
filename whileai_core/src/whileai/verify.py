"""``wai.verify.<Name>(**options)``: verifiers resolved by name from the registry.

Nothing is imported from a plugin package: ``wai.verify.MathEqual()`` looks ``MathEqual`` up
among the registered verifiers (entry points of the ``whileai`` group) and calls its factory.
``wai.verify.get("MathEqual", registry=...)`` does the same against a registry you built.
"""

from __future__ import annotations

from typing import Any

from whileai.registry import Registry, UnknownPluginError, get_registry


class UnknownVerifierError(UnknownPluginError, AttributeError):
    """``wai.verify.<Name>`` names no registered verifier."""


def get(name: str, registry: Registry | None = None, **options: Any) -> Any:
    """Build the verifier registered as ``name`` with ``options``."""
    return get_registry(registry).resolve("verifier", name, **options)


def names(registry: Registry | None = None) -> list[str]:
    """The registered verifier names."""
    return get_registry(registry).names("verifier")


class _Factory:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, **options: Any) -> Any:
        return get(self.name, **options)

    def __repr__(self) -> str:
        return f"wai.verify.{self.name}"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    registry = get_registry()
    try:
        registry.lookup("verifier", name)
    except UnknownPluginError as exc:
        raise UnknownVerifierError(str(exc)) from None
    return _Factory(name)


def __dir__() -> list[str]:
    return sorted([*globals(), *names()])
