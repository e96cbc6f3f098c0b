"""``wai.evaluate``: answer a fixed prompt set (a public benchmark) ``repeats`` times with an
agent, build the rows the way ``wai.rows`` does, and grade them the way ``wai.grade`` does.

Each answer is sampled under its own seed, derived from ``seed``, the task and the repeat, so a
run with the embedded model at a fixed seed is reproducible and no two answers share a random
stream. A completion that fails is a row with ``error`` that the judge never sees
(``judge_status: "skipped"``, reward None), never a silent 0.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from whileai.backend_use import RunBackend, close_backends
from whileai.backends import Backend, BackendError, Completion, Sampling, resolve_backend
from whileai.build_rows import build_rows
from whileai.graders import check_concurrency
from whileai.judging.grade import (
    Judge,
    cached_registry,
    grade_rows,
    resolve_judge,
    scored_from,
)
from whileai.judging.scored import ScoredData
from whileai.progress import RunProgress, asking_again
from whileai.registry import Registry, get_registry
from whileai.schema.records import RowError, prompt_hash
from whileai.schema.source import RowSource
from whileai.schema.wording import agreeing, counted
from whileai.seeds import derive_seed
from whileai.signatures import accepted
from whileai.sync import run_sync

#: Characters of the system prompt a row carries in lineage (the whole text is in the
#: result's system_prompts once), as simulate() rows do.
SYSTEM_PROMPT_HEAD = 120


@attrs.frozen
class Answer:
    """One answer to one prompt, or why there is none."""

    completion: Completion | None
    seed: int
    error: str | None = None


class CallableAgent:
    """Your own agent function: ``fn(prompt)`` gets the prompt as you gave it (a string, or
    the message list when it is one or when ``system_prompt=`` is set) and returns the reply
    text or a :class:`~whileai.backends.Completion`, sync or async. It is also handed
    ``seed=`` and ``sampling=`` when its signature takes them."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = "callable:" + (getattr(fn, "__qualname__", None) or type(fn).__name__)

    async def answer(
        self, prompt: Any, seed: int, sampling: Mapping[str, Any] | None
    ) -> Completion:
        raw = self.fn(prompt, **accepted(self.fn, {"seed": seed, "sampling": sampling}))
        if inspect.isawaitable(raw):
            raw = await raw
        if isinstance(raw, Completion):
            return raw
        if isinstance(raw, str):
            return Completion(text=raw, model=self.name, sampling=dict(sampling or {}))
        raise TypeError(
            f"agent {self.name} returned {type(raw).__name__}; an agent callable returns the "
            "reply text or a whileai.backends.Completion"
        )


@attrs.define
class Agent:
    """The agent as resolved: a backend, or your callable, and whether it is ours to close."""

    label: str
    backend: Backend | None = None
    function: CallableAgent | None = None
    owned: bool = False

    async def answer(
        self, prompt: Any, messages: list[dict[str, Any]], seed: int, sampling: Sampling
    ) -> Answer:
        try:
            if self.function is not None:
                given = {k: v for k, v in attrs.asdict(sampling).items() if v is not None}
                given.pop("seed", None)
                completion = await self.function.answer(prompt, seed, given or None)
            else:
                assert self.backend is not None
                completion = await self.backend.complete(
                    messages, sampling=attrs.evolve(sampling, seed=seed)
                )
        except BackendError as exc:
            return Answer(None, seed, f"{self.label} failed ({exc.kind}): {exc}")
        except Exception as exc:
            return Answer(None, seed, f"{self.label} failed: {type(exc).__name__}: {exc}")
        return Answer(completion, seed)

    async def close(self) -> list[str]:
        if not self.owned or self.backend is None:
            return []
        return await close_backends([RunBackend(self.label, self.backend, ["agent"], True)])


def resolve_agent(agent: Any, registry: Registry, concurrency: int) -> Agent:
    """A spec (resolved through the backend registry, its pool sized to ``concurrency``), a
    backend object (the caller's to close), or a callable."""
    if isinstance(agent, str):
        backend = resolve_backend(
            agent, role="agent", registry=registry, offer={"concurrency": concurrency}
        )
        return Agent(agent, backend=backend, owned=True)
    if isinstance(agent, Backend):
        # yours to close; a registry that wraps backends (the response cache) wraps it too
        backend = resolve_backend(agent, role="agent", registry=registry)
        return Agent(str(getattr(agent, "name", type(agent).__name__)), backend=backend)
    if callable(agent):
        function = CallableAgent(agent)
        return Agent(function.name, function=function)
    raise TypeError(
        "agent= must be a backend spec ('local:smollm2', 'openai:<model>', a URL), a backend, "
        f"or a callable (prompt) -> str; got {type(agent).__name__}"
    )


def _check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}= must be an int >= {low}, got {value!r}")
    return value


def _with_system(prompts: Sequence[Any], system_prompt: str | None) -> list[Any]:
    """The prompts as the agent gets them: with ``system_prompt`` first when it is given."""
    if system_prompt is None:
        return list(prompts)
    if not isinstance(system_prompt, str) or not system_prompt.strip():
        raise ValueError(f"system_prompt= must be a non-empty string, got {system_prompt!r}")
    out = []
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            out.append(
                [{"role": "system", "content": system_prompt}, {"role": "user", "content": prompt}]
            )
            continue
        messages = list(prompt)
        if any(isinstance(m, Mapping) and m.get("role") == "system" for m in messages):
            raise ValueError(
                f"prompts[{i}] has a system message and system_prompt= is given too; pass one"
            )
        out.append([{"role": "system", "content": system_prompt}, *messages])
    return out


def _messages_of(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat before the completion, from a row built with an empty completion."""
    return [dict(m) for m in (template.get("messages") or [])[:-1]]


def _fill(
    row: dict[str, Any],
    answer: Answer,
    agent: Agent,
    repeat: int,
    lineage: Mapping[str, Any],
    declared: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """What a rollout row says about how it was sampled, by whom, and what it cost."""
    completion = answer.completion
    model = (completion.model if completion is not None else None) or agent.label
    if agent.function is not None:
        sampling = dict(declared) if declared else None
    elif completion is not None:
        sampling = {**completion.sampling, "seed": answer.seed}
    else:
        sampling = {**(declared or {}), "seed": answer.seed}
    row["sampling"] = sampling
    row["model_version"] = model
    row["policy_version"] = f"{model}@{lineage['system_prompt_sha']}"
    row["lineage"] = {**lineage, "repeat": repeat, "seed": answer.seed}
    row["run_id"] = lineage["run_id"]
    if completion is None:
        row["error"] = answer.error
        row["steps"] = []
        row["messages"] = row["messages"][:-1]
        return row
    if completion.input_tokens is not None or completion.output_tokens is not None:
        row["usage"] = {
            "input_tokens": completion.input_tokens,
            "output_tokens": completion.output_tokens,
            "retries": completion.retries,
            "waited_s": round(completion.waited_s, 3),
        }
    if completion.truncated:
        row["truncated"] = True
    return row


async def _run(
    agent: Agent,
    judge: Judge,
    prompts: list[Any],
    references: Sequence[Any] | None,
    templates: list[dict[str, Any]],
    *,
    repeats: int,
    sampling: Sampling,
    seed: int,
    concurrency: int,
    system_prompt: str,
) -> ScoredData:
    run_id = uuid.uuid4().hex[:12]
    sha = prompt_hash(system_prompt)
    lineage = {
        "run_id": run_id,
        "system_prompt_sha": sha,
        "system_prompt_head": system_prompt[:SYSTEM_PROMPT_HEAD],
        "system_prompt_chars": len(system_prompt),
    }
    declared = {k: v for k, v in attrs.asdict(sampling).items() if v is not None} or None
    task_ids = [str(row["task_id"]) for row in templates]
    try:
        gate = asyncio.Semaphore(concurrency)

        progress = RunProgress(len(prompts) * repeats, label="answers")

        async def one(i: int, r: int) -> Answer:
            answer_seed = derive_seed(seed, "evaluate", task_ids[i], r)
            async with gate:
                answer = await agent.answer(
                    prompts[i], _messages_of(templates[i]), answer_seed, sampling
                )
            done = answer.completion
            if done is None:
                progress.advance(error=True)
            else:
                progress.advance(
                    retries=done.retries,
                    tokens=(done.input_tokens or 0) + (done.output_tokens or 0),
                    waited_s=done.waited_s,
                )
            return answer

        lost = "the answers were held in memory and are gone; "
        with progress.shown(lost + asking_again("evaluating", "agent")):
            answers = await asyncio.gather(
                *(one(i, r) for i in range(len(prompts)) for r in range(repeats))
            )
        texts = [
            [
                (a.completion.text if a.completion is not None else "")
                for a in answers[i * repeats : (i + 1) * repeats]
            ]
            for i in range(len(prompts))
        ]
        built = build_rows(prompts, texts, None, references, task_ids)
        rows = [
            _fill(row, answer, agent, index % repeats, lineage, declared)
            for index, (row, answer) in enumerate(zip(built, answers, strict=True))
        ]
        graded = await grade_rows(rows, judge, concurrency)
    finally:
        problems = await judge.close()
        problems += await agent.close()
    failed = sum(1 for row in graded if row.get("error"))
    notes = []
    if failed:
        notes.append(
            f"{failed} of {counted(len(graded), 'completion')} failed; "
            + agreeing(
                failed,
                "its row carries error and no reward, and pass_at leaves it out",
                "those rows carry error and no reward, and pass_at leaves them out",
            )
        )
    source = RowSource(
        rows,
        f"{counted(len(prompts), 'prompt')} x {counted(repeats, 'answer')}",
        system_prompts={sha: system_prompt},
    )
    return scored_from(
        source,
        graded,
        judge,
        extra_warnings=problems,
        extra_notes=notes,
        extra_metadata={
            "run_id": run_id,
            "agent": agent.label,
            "repeats": repeats,
            "seed": seed,
            "sampling": declared,
            "n_prompts": len(prompts),
            "system_prompt_sha": sha,
        },
        agent=agent.label,
        repeats=repeats,
    )


def evaluate(
    agent: Any,
    prompts: Sequence[Any],
    *,
    references: Sequence[Any] | None = None,
    judge: Any = None,
    repeats: int = 4,
    sampling: Sampling | Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    task_ids: Sequence[Any] | None = None,
    concurrency: int | None = None,
    seed: int = 0,
    registry: Registry | None = None,
    cache: Any = None,
) -> ScoredData:
    """Answer every prompt ``repeats`` times with ``agent`` and grade the answers.

    Args:
        agent: a backend spec (``"local:smollm2"``, ``"openai:<model>"``, a URL), a backend
            object (yours to close), or a callable ``(prompt) -> str``, sync or async (it gets
            the prompt as given, or the message list under ``system_prompt=``; ``seed=`` and
            ``sampling=`` too when it takes them).
        prompts: one per task: a string, or a list of chat messages.
        references: the gold answer per prompt (``privileged.reference``, where a verifier and
            the rubric judge read it and no export carries it).
        judge: what grades the answers: a verifier (``wai.verify.MathEqual()``), a judge or
            verifier name or spec, a callable; None is the rubric judge on the judge role's
            model, as in :func:`whileai.judging.grade.grade`.
        repeats: answers per prompt (pass^k and pass@k need at least 4).
        sampling: ``temperature``, ``max_tokens``, ``top_p``, ``stop`` for every call; the seed
            comes from ``seed``.
        system_prompt: sent before every prompt; rows name it (``lineage.system_prompt_sha``).
        task_ids: a name per prompt (default: a hash of the prompt text).
        concurrency: calls in flight at once, answers and judging alike (default 16).
        seed: the seed every answer's own seed is derived from (with its task and repeat).
        registry: where specs resolve (default: the installed plugins).
        cache: a directory where the agent's and the judge's answers are cached, so the same
            call again costs no tokens and gives the same rows (``False``: none; None:
            ``WHILEAI_CACHE``'s directory, else none); ``report()["cache"]`` counts it.

    Returns:
        A :class:`ScoredData` whose rows carry ``task_id``, ``prompt``, ``final_text``,
        ``sampling``, ``model_version``, ``usage`` (when the backend reports it),
        ``lineage.repeat`` and ``lineage.seed``; ``report()`` names the agent and the judge.
    """
    repeats = _check_int(repeats, "repeats", 1)
    seed = _check_int(seed, "seed", 0)
    limit = check_concurrency(concurrency)
    chosen = Sampling.coerce(sampling)
    if chosen.seed is not None:
        raise ValueError(
            "sampling= has a seed; evaluate() seeds every answer from seed= (with its task and "
            "repeat), so pass seed= instead"
        )
    if isinstance(prompts, str | bytes | Mapping) or not isinstance(prompts, Sequence):
        raise RowError(
            "prompts must be a list of prompts (strings or message lists), got "
            f"{type(prompts).__name__}"
        )
    if not prompts:
        raise ValueError("prompts is empty: there is nothing to evaluate")
    inputs = _with_system(prompts, system_prompt)
    # the rows are checked before any model is called, so a bad prompt costs nothing
    templates = build_rows(inputs, [""] * len(inputs), None, references, task_ids)
    reg, wrapper = cached_registry(get_registry(registry), cache)
    resolved_judge = resolve_judge(judge, reg)
    try:
        resolved_agent = resolve_agent(agent, reg, limit)
    except BaseException:
        run_sync(resolved_judge.close())
        raise
    result: ScoredData = run_sync(
        _run(
            resolved_agent,
            resolved_judge,
            inputs,
            references,
            templates,
            repeats=repeats,
            sampling=chosen,
            seed=seed,
            concurrency=limit,
            system_prompt=system_prompt or "",
        )
    )
    if wrapper is not None:
        result.metadata["cache"] = wrapper.report()
    return result
