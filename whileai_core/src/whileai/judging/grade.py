"""``wai.grade`` and ``wai.run_judge``: a judge over rows you already have, through the one
grading path (:mod:`whileai.scoring`, by way of the run's :class:`Grader`).

The default judge is the rubric judge on the judge role's model (``WHILEAI_JUDGE``, else
hosted Phi-4 on ``WHILEAI_BASE_URL``, else the embedded model), the same judge
``simulate(llm_grade=True)`` builds, because a judge grading its own model's writing prefers
it. When the judge's model is the rows' model anyway, the result says so (``self_judged`` and a
warning). Every graded row carries ``judge_name``, ``judge_status`` and ``judge_meta``
(``model``, ``prompt_sha``, ``temperature``, ``version``); a judge that fails on a row leaves
that row with ``judge_status: "error"`` and the reason, never a 0, and the others are graded.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from whileai.backend_use import RunBackend, close_backends
from whileai.backends import EMBEDDED_SPEC, default_spec
from whileai.graders import (
    DEFAULT_CONCURRENCY,
    LLM_GRADE_JUDGE,
    Grader,
    check_concurrency,
    grade_each,
    resolve_grader,
)
from whileai.judging.scored import ScoredData
from whileai.registry import Registry, UnknownPluginError, get_registry
from whileai.response_cache import CachingBackends, caching
from whileai.schema.provenance import self_judged
from whileai.schema.source import RowSource, row_source
from whileai.scoring import Scorer, as_scorer
from whileai.sync import run_sync


@attrs.define
class Judge:
    """A resolved judge: the grader, what built it, and what the result must say about it."""

    grader: Grader
    #: the judge's backend was built here from a spec, so it is closed here
    owns_backend: bool = False
    #: the judge model's spec, when a judge named without one took the role's default
    model_spec: str | None = None
    warnings: list[str] = attrs.field(factory=list)
    #: judge_meta keys that override what the judge itself reports (run_judge's version=)
    meta_override: dict[str, Any] = attrs.field(factory=dict)

    async def close(self) -> list[str]:
        if not self.owns_backend or self.grader.backend is None:
            return []
        return await close_backends(
            [RunBackend(self.grader.name, self.grader.backend, ["judge"], opened=True)]
        )


def resolve_judge(judge: Any, registry: Registry) -> Judge:
    """``judge=`` as a :class:`Judge`: None is the rubric judge on the judge role's default
    model; a string is a judge or verifier name/spec, or a model spec (``"openai:gpt-4o"``,
    ``"vllm:<model>@<url>"``, a URL) for the rubric judge to run on; otherwise a verifier or a
    callable."""
    if judge is None:
        spec, why = default_spec("judge")
        warnings = []
        if spec == EMBEDDED_SPEC:
            warnings.append(
                f"The judge is the embedded model {EMBEDDED_SPEC} ({why}); its verdicts are "
                "weak, so these rewards say little: set WHILEAI_JUDGE or WHILEAI_BASE_URL, or "
                "pass judge=."
            )
        grader = resolve_grader(LLM_GRADE_JUDGE, registry, judge_model=spec)
        return Judge(grader, owns_backend=True, model_spec=spec, warnings=warnings)
    if isinstance(judge, str):
        try:
            grader = resolve_grader(judge, registry)
        except UnknownPluginError as not_a_judge:
            if not _is_model_spec(judge, registry):
                raise not_a_judge from None
            # a model spec: the rubric judge on that model, as WHILEAI_JUDGE would give
            grader = resolve_grader(LLM_GRADE_JUDGE, registry, judge_model=judge)
            return Judge(grader, owns_backend=True, model_spec=judge)
        return Judge(grader, owns_backend=True)
    return Judge(resolve_grader(judge, registry))


def _is_model_spec(spec: str, registry: Registry) -> bool:
    try:
        registry.lookup("backend", spec)
    except UnknownPluginError:
        return False
    return True


def own_judge(judge: Any, version: Any, name: str | None) -> Judge:
    """Your own judge for ``run_judge``: the callable, under ``name`` and ``version``."""
    if not isinstance(version, str) or not version.strip():
        raise ValueError(
            f"version= must be a non-empty string naming this judge (a prompt or model "
            f"revision, '<model>@<prompt sha>'), got {version!r}; a new version is a new judge"
        )
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name= must be a non-empty string or None, got {name!r}")
    if isinstance(judge, str) or not callable(judge):
        raise TypeError(
            "run_judge takes your own judge as a callable: (row) -> number / bool / Verdict / "
            "mapping, sync or async, or (prompt, completion[, reference]); got "
            f"{type(judge).__name__}. For a registered judge or a verifier use wai.grade(rows, "
            "judge=...)"
        )
    base = as_scorer(judge)
    label = name or base.name
    meta: dict[str, Any] = {"name": label, "version": version}
    for key in ("model", "prompt_sha", "temperature"):
        meta[key] = getattr(judge, key, None)
    scorer = Scorer(label, base.label_source, meta, base.score)
    # a blocking judge (a model call over HTTP, say) runs in a worker thread so many rows are
    # judged at once; a coroutine judge runs on the loop
    offload = not (
        inspect.iscoroutinefunction(judge) or inspect.iscoroutinefunction(type(judge).__call__)
    )
    return Judge(Grader(scorer, offload=offload), meta_override={"name": label, "version": version})


async def grade_rows(
    rows: Sequence[Mapping[str, Any]], judge: Judge, concurrency: int
) -> list[dict[str, Any]]:
    """Graded copies of ``rows`` by ``judge`` (:func:`whileai.graders.grade_each`)."""
    return await grade_each(rows, judge.grader, concurrency, meta_override=judge.meta_override)


def self_judged_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[int, str | None, str | None]:
    """How many rows the judge's model also wrote (judge_meta.model or .served_model equal to
    the row's model_version, or its model part before ``@``), and one such pair."""
    count = 0
    pair: tuple[str | None, str | None] = (None, None)
    for row in rows:
        if self_judged(row):
            count += 1
            pair = (str(row["judge_meta"].get("model")), str(row.get("model_version")))
    return count, pair[0], pair[1]


def _self_judged_warning(count: int, total: int, judge_model: str, row_model: str) -> str:
    return (
        f"The judge's model {judge_model} is the model that wrote {count} of {total} rows "
        f"(model_version {row_model}), so it grades its own model's writing, which a judge "
        "tends to prefer; set WHILEAI_JUDGE or pass judge= to grade with a different model."
    )


def _meta(row: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = row.get("judge_meta")
    return meta if isinstance(meta, Mapping) else {}


def _replaced_notes(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Say when the rows carried another judge's labels: a new version is a new judge."""
    replaced: dict[tuple[str, str, str], int] = {}
    for old, new in zip(before, after, strict=True):
        if old.get("judge_status") != "ok":
            continue
        old_meta = _meta(old)
        new_meta = _meta(new)
        old_id = str(old_meta.get("version") or old.get("judge_name"))
        new_id = str(new_meta.get("version") or new.get("judge_name"))
        if old_id != new_id:
            key = (str(old.get("judge_name")), old_id, new_id)
            replaced[key] = replaced.get(key, 0) + 1
    return [
        f"{n} rows were graded before by {name} ({old}); their reward is now this judge's "
        f"({new}), a different judge"
        for (name, old, new), n in replaced.items()
    ]


def scored_from(
    source: RowSource,
    graded: list[dict[str, Any]],
    judge: Judge,
    *,
    extra_warnings: Sequence[str] = (),
    extra_notes: Sequence[str] = (),
    extra_metadata: Mapping[str, Any] | None = None,
    agent: str | None = None,
    repeats: int | None = None,
) -> ScoredData:
    """The ScoredData for rows ``graded`` by ``judge``, with its warnings and metadata."""
    scorer = judge.grader.scorer
    warnings = list(judge.warnings)
    warnings.extend(extra_warnings)
    count, judge_model, row_model = self_judged_rows(graded)
    if count:
        warnings.append(_self_judged_warning(count, len(graded), str(judge_model), str(row_model)))
    models = [_meta(t).get("model") for t in graded]
    judge_model_name = next((m for m in models if m), None) or judge.model_spec
    metadata = {
        **source.metadata,
        **(extra_metadata or {}),
        "grader": scorer.name,
        "judge": scorer.name,
        "judge_model": judge_model_name,
        "judge_version": (judge.meta_override or {}).get("version")
        or getattr(judge.grader.scorer, "meta", {}).get("version"),
        "label_source": scorer.label_source,
        "n_self_judged": count,
    }
    notes = [*source.notes, *_replaced_notes(source.rows, graded), *extra_notes]
    return ScoredData(
        trajectories=graded,
        metadata=metadata,
        warnings=warnings,
        system_prompts=source.system_prompts,
        notes=notes,
        source=source.label,
        repeat_policy=source.repeat_policy,
        agent=agent,
        repeats=repeats,
    )


async def run_grading(source: RowSource, judge: Judge, concurrency: int) -> ScoredData:
    """Grade, close what was opened for the judge, and build the result."""
    try:
        graded = await grade_rows(source.rows, judge, concurrency)
    finally:
        problems = await judge.close()
    return scored_from(source, graded, judge, extra_warnings=problems)


def grade(
    rows: Any,
    judge: Any = None,
    *,
    concurrency: int | None = None,
    registry: Registry | None = None,
    cache: Any = None,
) -> ScoredData:
    """Grade rows with a judge; every row says who graded it and how that went.

    Args:
        rows: a list of row dicts, a run (``simulate()``'s result or a ScoredData: its
            trajectories, so the judge reads the privileged reference and rubric), or the path
            of a JSONL file written by ``simulate(output=)`` or ``save()``.
        judge: None for the rubric judge on the judge role's model (``WHILEAI_JUDGE``, else
            hosted Phi-4 on ``WHILEAI_BASE_URL``, else the embedded model); a judge or verifier
            name or spec (``"rubric"``, ``"rubric:openai:gpt-4o"``, ``"MathEqual"``); a model
            spec or URL for the rubric judge to run on; a verifier object; or a callable
            ``(row)`` / ``(prompt, completion[, reference])``, sync or async.
        concurrency: rows judged at once (default: simulate()'s max_concurrency, 16).
        registry: where names resolve (default: the installed plugins).
        cache: a directory where the judge model's answers are cached, so grading the same
            rows again costs no tokens (``False``: none; None: ``WHILEAI_CACHE``'s directory,
            else none); ``report()["cache"]`` counts hits, misses and tokens saved.

    Returns:
        A :class:`ScoredData`: ``trajectories`` (graded, privileged kept in memory), ``rows``
        (exported), ``pass_at``, ``agreement()``, ``report()``, ``self_judged``, ``warnings``.
        A judge that fails on a row leaves it with ``judge_status: "error"`` and the reason.
    """
    limit = check_concurrency(concurrency)
    source = graded_source(rows)
    reg, wrapper = cached_registry(get_registry(registry), cache)
    resolved = resolve_judge(judge, reg)
    result: ScoredData = run_sync(run_grading(source, resolved, limit))
    if wrapper is not None:
        result.metadata["cache"] = wrapper.report()
    return result


def cached_registry(registry: Registry, cache: Any) -> tuple[Registry, CachingBackends | None]:
    """``registry`` with the response cache ``cache=`` asks for over its backends."""
    wrapper = caching(cache)
    return (registry.with_backend_wrapper(wrapper) if wrapper else registry), wrapper


def graded_source(rows: Any) -> RowSource:
    """What a judge reads: the rows of ``rows`` (in-memory trajectories for a run, so the
    privileged block is there), each checked before any judge is called."""
    source = row_source(rows, "rows=", privileged=True)
    return attrs.evolve(source, rows=source.checked("rows"))


def run_judge(
    rows: Any,
    judge: Callable[..., Any] | Callable[..., Awaitable[Any]],
    *,
    version: str,
    name: str | None = None,
    registry: Registry | None = None,
) -> ScoredData:
    """Grade rows with your own judge, recording its ``version`` on every row.

    ``judge`` is a callable ``(row)`` returning a number in [0, 1], a bool, a
    :class:`~whileai.scoring.Verdict` or a mapping with ``reward``, sync or async, or
    ``(prompt, completion[, reference])``. Each row gets ``judge_name`` (``name``, else the
    callable's name), ``judge_status`` and ``judge_meta`` with ``version`` (required: bump it
    when the prompt or model behind the judge changes, since a new version is a new judge),
    and ``model``, ``prompt_sha``, ``temperature`` taken from the callable's attributes of
    those names (None when it has none) or from the meta its verdicts carry. ``rows`` is what
    :func:`grade` takes. ``registry`` is accepted for symmetry with :func:`grade`; a callable
    judge resolves nothing through it.
    """
    del registry
    resolved = own_judge(judge, version, name)
    source = graded_source(rows)
    result: ScoredData = run_sync(run_grading(source, resolved, DEFAULT_CONCURRENCY))
    return result
