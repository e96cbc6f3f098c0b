"""What a run does with its model backends: the concurrency it builds them with, the stats it
reports and the warnings it gives when one waited, and closing the ones it opened."""

from __future__ import annotations

from typing import Any

import pytest
import sim_doubles as d

import whileai as wai


def run(*extra_plugins: object, **kwargs: Any) -> Any:
    params = {**d.BASE, **kwargs}
    params["advanced"] = {**d.BASE["advanced"], **(kwargs.get("advanced") or {})}
    return wai.simulate(registry=d.registry(*extra_plugins), **params)


def test_a_run_that_waited_on_rate_limits_says_so_and_closes_its_backends() -> None:
    spies = d.SpyBackends()
    data = run(
        spies,
        agent_model="spy:throttled-agent",
        user_model="spy:user",
        unique=2,
        repeats=2,
        fault_rate=0.0,
        advanced={"max_concurrency": 5},
    )
    agent, user = spies.built
    # each spec was resolved once, sized to the run's concurrency, and closed at the end
    assert agent.concurrency == user.concurrency == 5
    assert agent.closed == user.closed == 1
    backends = data.report()["backends"]
    assert backends["spy:throttled-agent"]["roles"] == ["agent"]
    stats = backends["spy:throttled-agent"]["stats"]
    assert stats["calls"] == agent.calls and stats["retries"] == agent.calls
    assert stats["waited_s"] == pytest.approx(0.5 * agent.calls)
    assert stats["errors"] == {"rate_limited": agent.calls}
    assert backends["spy:user"]["stats"]["retries"] == 0
    (sentence,) = [w for w in data.warnings if "rate limits" in w]
    assert sentence == (
        f"The agent backend spy:throttled-agent waited {0.5 * agent.calls:.1f} s on rate "
        f"limits over {agent.calls} retries (rate_limited {agent.calls})."
    )
    assert "backend spy:throttled-agent" in str(data.report())
    assert sum(r["usage"]["retries"] for r in data.rows) == agent.calls


def test_one_spec_in_two_roles_is_one_backend_and_a_failed_run_still_closes_it(
    tmp_path: Any,
) -> None:
    spies = d.SpyBackends()
    out = tmp_path / "rows.jsonl"
    run(
        spies, agent_model="spy:agent", user_model="spy:agent", unique=1, repeats=1, output=str(out)
    )
    (shared,) = spies.built
    assert shared.closed == 1
    with pytest.raises(FileExistsError):  # the path holds a run and resume was not asked for
        run(spies, agent_model="spy:agent", user_model="spy:user", unique=1, output=str(out))
    assert [b.closed for b in spies.built] == [1, 1, 1]


class PlainUser:
    """A backend object the caller built: no stats, and theirs to close."""

    name = "plain-user"

    def __init__(self) -> None:
        self.inner = d.FakeBackend("user")

    async def complete(
        self, messages: Any, tools: Any = None, sampling: Any = None, **kw: Any
    ) -> Any:
        return await self.inner.complete(messages, tools, sampling, **kw)

    async def aclose(self) -> None:
        raise AssertionError("the engine closed a backend it did not open")


def test_a_backend_you_pass_is_reported_without_counters_and_left_open() -> None:
    data = run(user_model=PlainUser(), unique=1, repeats=2)
    backends = data.report()["backends"]
    assert backends["plain-user"] == {"roles": ["user"], "stats": None}
    assert backends["fake:agent"]["stats"]["calls"] > 0
    assert not any("did not close" in w for w in data.warnings)


def test_a_backend_opened_before_another_role_failed_to_resolve_is_closed() -> None:
    spies = d.SpyBackends()
    with pytest.raises(wai.UnknownPluginError):
        run(spies, agent_model="spy:agent", user_model="nosuch:user", unique=1)
    (agent,) = spies.built
    assert agent.closed == 1
