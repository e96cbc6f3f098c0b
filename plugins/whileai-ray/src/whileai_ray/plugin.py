"""Registers the Ray executor through the same entry point a third party would use."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register


def _executor(address: str | None = None, **options: object) -> object:
    # Ray is imported when a run asks for it, not when the registry loads the plugin.
    from whileai_ray.executor import make_executor

    return make_executor(address, **options)  # type: ignore[arg-type]


@hookimpl
def whileai_register_executors(register: Register) -> None:
    register(
        "ray",
        _executor,
        description="rollouts on Ray actors: 'ray' (this machine's cluster, else a local one), "
        "'ray:auto', 'ray://host:10001'",
    )
