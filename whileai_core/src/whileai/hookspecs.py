"""The plugin contract: every hook a whileai plugin can implement.

A plugin is any module or object with functions decorated by ``whileai.hookimpl`` and named
after one of the specs below. Built-in plugins and third-party ones are loaded the same way,
from the entry-point group ``whileai``::

    [project.entry-points.whileai]
    my_verifiers = "my_package.plugin"

Registration hooks receive a ``register`` callback instead of returning lists, so that every
registered item is recorded with the plugin and distribution that provided it (each hook
implementation is called on its own). Lifecycle hooks are observers: an exception raised in one
is recorded in the run's warnings and never stops the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import pluggy

PROJECT_NAME = "whileai"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class Register(Protocol):
    """The callback every registration hook receives.

    ``name`` is what users write (``"MathEqual"``, ``"openai"``); ``factory`` builds the thing
    (for a provider of ``prefix:argument`` specs it receives the argument first), or is its
    import path ``"package.module:attribute"``, imported only when the entry is first built
    (so a factory that needs a heavy library costs nothing to a process that never builds it:
    every process that loads the registry imports every plugin's registering module); ``aliases``
    are other names that resolve to the same factory; ``description`` is one line shown by
    ``whileai plugins``.
    """

    def __call__(
        self,
        name: str,
        factory: Callable[..., Any] | str,
        aliases: Sequence[str] = (),
        description: str = "",
    ) -> None: ...


@hookspec
def whileai_register_backends(register: Register) -> None:
    """Register model backends.

    A backend factory is called as ``factory(argument, **options)`` where ``argument`` is the
    part of the spec after ``prefix:`` (``"gpt-4o"`` for ``"openai:gpt-4o"``), the whole URL for
    the provider registered as ``"url"``, or ``None`` for a bare name. It returns an object with
    an async ``complete(messages, tools=None, sampling=None, logprobs=False,
    response_format=None)`` returning a ``whileai.backends.Completion``.
    """


@hookspec
def whileai_register_verifiers(register: Register) -> None:
    """Register verifiers: programmatic graders such as ``MathEqual`` or ``CodeExec``.

    A verifier factory takes keyword options and returns an object with a ``name``, a
    ``version`` and ``verify(completion, reference, prompt=None) -> whileai.scoring.Verdict``.
    ``wai.verify.<Name>(**options)`` calls the factory.
    """


@hookspec
def whileai_register_judges(register: Register) -> None:
    """Register judges: graders that read a whole row (an LLM rubric judge, a world's checks).

    A judge factory returns a callable ``judge(row) -> Verdict`` (sync or async) with a
    ``name`` and a ``version`` attribute.
    """


@hookspec
def whileai_register_markers(register: Register) -> None:
    """Register markers: behaviour measurements taken on every finished rollout.

    A marker factory returns a callable ``marker(row) -> float | int | bool | None``; the
    value lands in ``row["markers"][name]`` (``None`` means "does not apply" and is omitted).

    The callable may declare ``bounds = (low, high)``, the range its values lie in (either end
    None when open): ``(0, 1)`` for a flag or a share, ``(0, None)`` for a count. A run records
    the declared bounds in its metadata (``marker_bounds``), a value outside them is the
    marker's error (reported, not recorded), and the measurements read them: a marker bounded
    in [0, 1] takes the bounded interval, a count takes Student's t, and every interval stops
    at the bounds (a count's mean is never below 0). Without a declaration, a marker any row of
    which lies outside [0, 1] is a count.
    """


@hookspec
def whileai_register_strategies(register: Register) -> None:
    """Register situation-search strategies (which situations ``simulate`` plays).

    A strategy factory returns an object with ``ask(dimensions, n, rng, arm_weights, *,
    hard_share=None)`` returning at most ``n`` situation specs (mappings of dimension name to
    value, plus ``arm`` and ``selection_reason``), and optionally ``tell(rows)``, called with
    the graded rows of each batch (reward, markers, ``behavior_signature``, ``vector`` in
    memory) before the next ``ask``, and ``admit(spec, situation, vector)``, which may turn a
    written situation away (``False`` or ``(False, reason)``). A strategy with only
    ``choose(...)`` (same arguments, exactly ``n`` specs) draws the whole run up front.
    ``hard_share`` is the fraction of specs to draw from the hard value of the difficulty
    dimension, passed only to a strategy that takes it (otherwise the engine applies it); a
    strategy that cannot honour it raises ValueError. See ``whileai.simulations.search``.
    """


@hookspec
def whileai_register_worlds(register: Register) -> None:
    """Register mock worlds: the tools an agent may call and the state they act on.

    A world factory returns a world whose ``tools()`` lists OpenAI-format tool schemas, whose
    ``new_episode(situation, rng)`` gives a fresh per-rollout state, and whose episodes answer
    ``call(name, arguments)``; see ``whileai.worlds`` for the full protocol. A world may carry
    the defaults of its domain (``system_prompt``, ``user_prompt``, ``writer_prompt``,
    ``difficulty_dimension``, ``hard_value``; ``whileai.worlds.WorldDefaults``), which a run
    takes where the caller gave none.
    """


@hookspec
def whileai_register_executors(register: Register) -> None:
    """Register executors: where rollouts run (in this process, or across a Ray cluster).

    ``simulate(executor="name")`` or ``"name:argument"`` calls ``factory()`` or
    ``factory(argument)`` and gets an object with:

    - ``run(jobs, concurrency, run)``: an async iterator yielding each job's graded row as it
      finishes, privileged block kept. ``jobs`` are ``whileai.Job`` (one planned rollout
      each: key, situation, seed), ``concurrency`` the rollouts to keep in flight at most,
      ``run`` a picklable ``whileai.RunSpec`` from which a worker rebuilds the world,
      backends, judges and markers (``await whileai.JobRunner.open(run)``, then
      ``await runner.run(job)`` per job). A job whose worker failed comes back as
      ``whileai.error_row(run, job, reason)``, never dropped. The contract, with a worked
      executor, is ``whileai.executors`` and docs/plugins.md.
    - ``name``: what the run's report says ran it; optionally ``warnings`` (a list the run
      adds to its own) and ``close()`` (called after the run when it was built from a name).

    The driver streams the rows to disk, keeps the resume keys, the progress line and the
    lifecycle hooks, so resume and kill-safety do not depend on the executor.
    """


@hookspec
def whileai_run_started(run_id: str, knobs: Mapping[str, Any], total: int) -> None:
    """Observe a run starting: its id, its resolved knobs and how many rollouts it plans."""


@hookspec
def whileai_rollout_finished(run_id: str, row: Mapping[str, Any], done: int, total: int) -> None:
    """Observe one finished rollout (the exported row, privileged fields already removed)."""


@hookspec
def whileai_run_finished(run_id: str, report: Mapping[str, Any]) -> None:
    """Observe a run finishing, with the run's report as ``data.report()`` returns it."""


#: The registration hook for each kind of registered thing.
REGISTRATION_HOOKS: dict[str, str] = {
    "backend": "whileai_register_backends",
    "verifier": "whileai_register_verifiers",
    "judge": "whileai_register_judges",
    "marker": "whileai_register_markers",
    "strategy": "whileai_register_strategies",
    "world": "whileai_register_worlds",
    "executor": "whileai_register_executors",
}

#: Hooks that observe a run; a failure in one is a warning, never an error.
LIFECYCLE_HOOKS: tuple[str, ...] = (
    "whileai_run_started",
    "whileai_rollout_finished",
    "whileai_run_finished",
)
