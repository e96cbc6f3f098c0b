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
import itertools
import os
from array import array
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import attrs

from whileai.backend_use import RunBackend, close_backends
from whileai.backends import EMBEDDED_SPEC, default_spec
from whileai.graders import (
    DEFAULT_CONCURRENCY,
    LLM_GRADE_JUDGE,
    Grader,
    check_concurrency,
    counted_grading,
    grade_each,
    graded_in_order,
    grading_progress,
    resolve_grader,
)
from whileai.judging.partial import (
    Kept,
    finished,
    judge_identity,
    kept_rows,
    not_resumed,
    partial_path,
    start,
)
from whileai.judging.scored import GradeCounts, ScoredData
from whileai.registry import Registry, UnknownPluginError, get_registry
from whileai.response_cache import CachingBackends, caching
from whileai.schema.export import export_line
from whileai.schema.files import (
    OutputLock,
    RowWriter,
    file_error,
    sidecar_path,
    user_path,
    write_sidecar,
)
from whileai.schema.provenance import self_judged
from whileai.schema.source import RowSource, row_source
from whileai.schema.stored import StoredRows
from whileai.schema.wording import agreeing, counted
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
    """Graded copies of ``rows`` by ``judge`` (:func:`whileai.graders.grade_each`, which
    counts them on stderr)."""
    return await grade_each(rows, judge.grader, concurrency, meta_override=judge.meta_override)


@attrs.define
class GradedTally:
    """What the result says of the graded rows, counted as each row is graded (a graded rows
    file is not read again for it): rows whose judge's model wrote them, the judge's model,
    and the rows another judge had labelled before."""

    rows: int = 0
    n_self_judged: int = 0
    #: one self-judged (judge model, row model) pair, for the warning
    pair: tuple[str, str] | None = None
    #: the first judge_meta.model a graded row names
    judge_model: Any = None
    #: (judge name, its old version, the new one) -> rows relabelled
    replaced: dict[tuple[str, str, str], int] = attrs.field(factory=dict)
    #: the report's counts of the rows as written (by :func:`grade_into`, which writes them)
    written: GradeCounts = attrs.field(factory=GradeCounts)

    @classmethod
    def of(
        cls, before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]]
    ) -> GradedTally:
        tally = cls()
        for old, new in zip(before, after, strict=True):
            tally.add(old, new)
        return tally

    def add(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        """Count ``after``, the graded copy of ``before``."""
        self.rows += 1
        if self_judged(after):
            self.n_self_judged += 1
            self.pair = (str(after["judge_meta"].get("model")), str(after.get("model_version")))
        if self.judge_model is None:
            self.judge_model = _meta(after).get("model") or None
        if before.get("judge_status") != "ok":
            return
        old_id = str(_meta(before).get("version") or before.get("judge_name"))
        new_id = str(_meta(after).get("version") or after.get("judge_name"))
        if old_id != new_id:
            key = (str(before.get("judge_name")), old_id, new_id)
            self.replaced[key] = self.replaced.get(key, 0) + 1

    def warnings(self) -> list[str]:
        if not self.n_self_judged or self.pair is None:
            return []
        judge_model, row_model = self.pair
        return [
            f"The judge's model {judge_model} is the model that wrote {self.n_self_judged} of "
            f"{counted(self.rows, 'row')} (model_version {row_model}), so it grades its own "
            "model's writing, which a judge tends to prefer; set WHILEAI_JUDGE or pass judge= to "
            "grade with a different model."
        ]

    def notes(self) -> list[str]:
        """Say when the rows carried another judge's labels: a new version is a new judge."""
        return [
            f"{counted(n, 'row')} {agreeing(n, 'was', 'were')} graded before by {name} ({old}); "
            f"{agreeing(n, 'its', 'their')} reward is now this judge's "
            f"({new}), a different judge"
            for (name, old, new), n in self.replaced.items()
        ]


def _meta(row: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = row.get("judge_meta")
    return meta if isinstance(meta, Mapping) else {}


def scored_from(
    source: RowSource,
    graded: Sequence[dict[str, Any]],
    judge: Judge,
    *,
    tally: GradedTally | None = None,
    extra_warnings: Sequence[str] = (),
    extra_notes: Sequence[str] = (),
    extra_metadata: Mapping[str, Any] | None = None,
    agent: str | None = None,
    repeats: int | None = None,
) -> ScoredData:
    """The ScoredData for rows ``graded`` by ``judge`` from ``source``'s rows, with its
    warnings and metadata (``tally``: what was counted as they were graded, else counted
    here)."""
    if tally is None:
        tally = GradedTally.of(source.rows, graded)
    scorer = judge.grader.scorer
    warnings = [*judge.warnings, *extra_warnings, *tally.warnings()]
    metadata = {
        **source.metadata,
        **(extra_metadata or {}),
        "grader": scorer.name,
        "judge": scorer.name,
        "judge_model": tally.judge_model or judge.model_spec,
        "judge_version": (judge.meta_override or {}).get("version")
        or getattr(judge.grader.scorer, "meta", {}).get("version"),
        "label_source": scorer.label_source,
        "n_self_judged": tally.n_self_judged,
    }
    notes = [*source.notes, *tally.notes(), *extra_notes]
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
        # rows graded into a file are read back as written: exported already, and counted
        # as they were written
        rows=graded if isinstance(graded, StoredRows) else None,
        counts=tally.written if isinstance(graded, StoredRows) else None,
    )


async def run_grading(
    source: RowSource,
    judge: Judge,
    concurrency: int,
    output: Path | None = None,
    *,
    resume: bool = False,
) -> ScoredData:
    """Grade, close what was opened for the judge, and build the result; with ``output``,
    the graded rows go to that file as they are graded (:func:`grade_into`) and the result
    reads them from there."""
    notes: list[str] = []
    try:
        if output is None:
            graded: Sequence[dict[str, Any]] = await grade_rows(source.rows, judge, concurrency)
            tally = None
        else:
            graded, tally, kept = await grade_into(
                output, source.rows, judge, concurrency, resume=resume
            )
            if kept.dropped is not None:
                notes.append(kept.dropped)
            if kept.n:
                notes.append(
                    f"went on after the {counted(kept.n, 'row')} a stopped pass graded with this "
                    "judge: the judge was asked for the rest only"
                )
    finally:
        problems = await judge.close()
    return scored_from(
        source, graded, judge, tally=tally, extra_warnings=problems, extra_notes=notes
    )


def with_sidecar(result: ScoredData, output: Path | None) -> ScoredData:
    """Write the sidecar beside a graded rows file (once the result says all it will)."""
    if output is not None:
        write_sidecar(sidecar_path(output), result.sidecar())
    return result


async def grade_into(
    output: Path,
    rows: Sequence[Mapping[str, Any]],
    judge: Judge,
    concurrency: int,
    *,
    resume: bool = False,
) -> tuple[StoredRows, GradedTally, Kept]:
    """``rows`` graded by ``judge`` and written to ``output`` in order as each is graded
    (exported, as a run writes), holding a bounded number of rows at any time, counted on
    stderr. The rows are written beside ``output`` (:mod:`whileai.judging.partial`) and put
    in its place once every row is: a grading stopped part way leaves ``output`` as it was,
    so ``output`` may be the rows' own file, and grading the same rows into it with the same
    judge and ``resume=True`` goes on after the rows it graded. Returns the rows as written,
    read back from ``output``, their tally, and what became of rows a stopped pass kept."""
    lock = OutputLock.take(output)
    try:
        partial = partial_path(output)
        s = judge.grader.scorer
        identity = judge_identity(s.name, s.label_source, s.meta, judge.meta_override)
        tally = GradedTally()

        def count_kept(given: Mapping[str, Any], row: dict[str, Any]) -> None:
            tally.add(given, row)
            tally.written.add(row)

        kept = (
            kept_rows(partial, identity, rows, count_kept)
            if resume
            else not_resumed(partial, output)
        )
        if kept.dropped is not None:
            tally = GradedTally()
        if not kept.n:
            start(partial, identity)
        # the kept rows' offsets, and this pass's after them (kept.n stays the rows kept)
        offsets = array("q", kept.offsets)
        # this pass's own rows: the rate and time left are of the judging it does
        progress = grading_progress(len(rows) - kept.n)
        rest = itertools.islice(rows, kept.n, None)
        graded = counted_grading(
            graded_in_order(
                rest,
                judge.grader,
                concurrency,
                meta_override=judge.meta_override,
                start=kept.n,
            ),
            progress,
        )

        written = kept.n

        def stopped() -> str:
            if not written:
                return f"output={str(output)!r} is left as it was; no row was graded yet"
            return (
                f"output={str(output)!r} is left as it was; the {counted(written, 'graded row')} "
                f"{agreeing(written, 'is', 'are')} kept in {str(partial)!r}: grading the same "
                "rows into the same output with the same judge and resume=True (whileai grade "
                f"--resume) goes on after {agreeing(written, 'it', 'them')}"
            )

        with progress.shown(stopped), RowWriter(partial) as writer:
            async with aclosing(graded):
                async for given, row in graded:
                    tally.add(given, row)
                    exported, line = export_line(row)
                    tally.written.add(exported)
                    try:
                        offsets.append(writer.write_line(line))
                    except OSError as exc:
                        # a full disk, a file size limit: said of the output, with what is kept
                        raise file_error(exc, output, f"row {written + 1}: {stopped()}") from exc
                    written += 1
            writer.sync()
        partial.replace(output)
        finished(partial)
    finally:
        lock.release()
    return StoredRows(output, offsets), tally, kept


def grade(
    rows: Any,
    judge: Any = None,
    *,
    concurrency: int | None = None,
    registry: Registry | None = None,
    cache: Any = None,
    output: str | os.PathLike[str] | None = None,
    resume: bool = False,
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
        output: a JSONL file the graded rows are written to as they are graded, with its
            ``.meta.json`` sidecar, so rows of any number are graded in bounded memory (a
            rows file is read as it is graded). The file takes the place of any file there
            once every row is graded (a grading stopped part way leaves it as it was), so it
            may be the rows' own file. The result reads its rows back from it. A stopped
            pass keeps the rows it graded beside it.
        resume: go on after the rows a stopped pass kept for ``output``, when the same judge
            graded them and each is the graded copy of the row at its place (else they are
            dropped, and the result says why); False (the default) grades every row afresh.
            A kept grade is used only when asked for: it is a file beside the output, which
            anyone who can write there could have written (docs/judging.md).

    Returns:
        A :class:`ScoredData`: ``trajectories`` (graded, privileged kept in memory), ``rows``
        (exported), ``pass_at``, ``agreement()``, ``report()``, ``self_judged``, ``warnings``.
        A judge that fails on a row leaves it with ``judge_status: "error"`` and the reason.
    """
    limit = check_concurrency(concurrency)
    target = output_path(output)
    check_resume(resume, target)
    source = graded_source(rows, held=target is None)
    reg, wrapper = cached_registry(get_registry(registry), cache)
    resolved = resolve_judge(judge, reg)
    result: ScoredData = run_sync(run_grading(source, resolved, limit, target, resume=resume))
    if wrapper is not None:
        result.metadata["cache"] = wrapper.report()
    return with_sidecar(result, target)


def cached_registry(registry: Registry, cache: Any) -> tuple[Registry, CachingBackends | None]:
    """``registry`` with the response cache ``cache=`` asks for over its backends."""
    wrapper = caching(cache)
    return (registry.with_backend_wrapper(wrapper) if wrapper else registry), wrapper


def graded_source(rows: Any, *, held: bool = True) -> RowSource:
    """What a judge reads: the rows of ``rows`` (in-memory trajectories for a run, so the
    privileged block is there), each checked before any judge is called: copied into a
    list, or with ``held=False`` (grading into a file) checked where they are and read
    again as they are graded."""
    source = row_source(rows, "rows=", privileged=True)
    if not held:
        source.check("rows")
        return source
    return attrs.evolve(source, rows=source.checked("rows"))


def check_resume(resume: Any, output: Path | None) -> None:
    """``resume=`` must be a bool, and True only with an ``output=`` to go on in."""
    if not isinstance(resume, bool):
        raise TypeError(f"resume= must be True or False, got {resume!r}")
    if resume and output is None:
        raise ValueError(
            "resume=True goes on after the rows a stopped pass graded into output=: pass "
            "output= too (a pass in memory keeps nothing to go on from)"
        )


def output_path(output: Any) -> Path | None:
    """``output=`` as a path, or None; anything else is a TypeError naming it."""
    if output is None:
        return None
    if isinstance(output, str | os.PathLike) and str(output):
        return user_path(output)
    raise TypeError(f"output= must be a file path (str or PathLike) or None, got {output!r}")


def run_judge(
    rows: Any,
    judge: Callable[..., Any] | Callable[..., Awaitable[Any]],
    *,
    version: str,
    name: str | None = None,
    registry: Registry | None = None,
    output: str | os.PathLike[str] | None = None,
    resume: bool = False,
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
    judge resolves nothing through it. ``output`` and ``resume``: as :func:`grade`'s, the
    graded rows written to a file as they are graded, and a stopped pass gone on from.
    """
    del registry
    resolved = own_judge(judge, version, name)
    target = output_path(output)
    check_resume(resume, target)
    source = graded_source(rows, held=target is None)
    result: ScoredData = run_sync(
        run_grading(source, resolved, DEFAULT_CONCURRENCY, target, resume=resume)
    )
    return with_sidecar(result, target)
