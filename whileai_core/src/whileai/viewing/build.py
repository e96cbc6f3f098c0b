"""``wai.html_report``: one run (and, given a baseline, its comparison) as one HTML file."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from whileai.schema.files import beside, read_sidecar, sidecar_path, user_path
from whileai.schema.marker_bounds import recorded_bounds
from whileai.schema.provenance import provenance_text
from whileai.schema.source import row_source
from whileai.viewing import sections
from whileai.viewing.digest import ExportedRows, digest
from whileai.viewing.page import Section, render
from whileai.viewing.transcripts import transcripts_section

#: transcripts laid out on the page; the numbers always count every row
DEFAULT_MAX_TRANSCRIPTS = 500


def _meta(source: Any, origin: Any) -> dict[str, Any]:
    """What a run says of itself: its sidecar (a file) or its own report (in memory)."""
    if isinstance(origin, str | os.PathLike):
        return read_sidecar(sidecar_path(Path(origin))) or {}
    run = source.run
    if run is not None and callable(getattr(run, "sidecar", None)):
        made = run.sidecar(complete=True)
        return made if isinstance(made, dict) else {}
    return {"metadata": dict(source.metadata)} if source.metadata else {}


def _label(origin: Any, source: Any) -> str:
    return str(origin) if isinstance(origin, str | os.PathLike) else str(source.label)


def html_report(
    run: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    baseline: Any = None,
    floor: Sequence[Any] | None = None,
    proxy: str | None = None,
    title: str | None = None,
    max_transcripts: int = DEFAULT_MAX_TRANSCRIPTS,
    # kept for calls written when the intervals were bootstraps: no number depends on it
    seed: int = 0,
) -> Path:
    """Write the run's report as one self-contained HTML file and return its path.

    ``run`` is anything the measurements read: a rows file (its sidecar gives the knobs and
    provenance), ``simulate()``'s result, or a list of rows. The page holds the run's knobs and
    provenance, pass@k and pass^k over k with intervals, reward by arm and by dimension with
    intervals, fault kinds against outcome, markers, judge agreement where rows carry gold, and
    every rollout's transcript (exported rows only: nothing privileged). Given ``baseline``
    (another run), it adds the paired comparison as a forest plot, with the noise band when
    ``floor`` gives three or more re-runs of the baseline; ``proxy`` picks the headline
    (``"marker:tool_errors"``). ``path`` defaults to the page beside a rows file, named after it
    (``runs/x.jsonl`` -> ``runs/x.report.html``), else ``whileai-report.html`` here.
    """
    if isinstance(max_transcripts, bool) or not isinstance(max_transcripts, int):
        raise TypeError(f"max_transcripts must be a whole number, got {max_transcripts!r}")
    if max_transcripts < 0:
        raise ValueError(f"max_transcripts must be 0 or more, got {max_transcripts}")
    if floor is not None and baseline is None:
        raise ValueError("floor= needs baseline=: the noise band is read against a comparison")
    source = row_source(run, "run")
    if not len(source.rows):
        raise ValueError(f"run={_label(run, source)!r} holds no rows: there is nothing to report")
    # every row the page reads is exported first, as on its way to disk; and one walk
    # gathers what every section reads, so the page never holds the run's rows
    rows = ExportedRows(source.rows)
    read = digest(rows, max_transcripts)
    meta = _meta(source, run)
    from whileai.measure.pass_at import pass_at_from_table

    policy = source.repeat_policy if source.repeat_policy in ("rl", "fixed") else None
    pass_report = pass_at_from_table(read.table, repeat_policy=policy)  # type: ignore[arg-type]
    parts: list[Section] = [
        sections.summary_section(read, meta, pass_report),
        sections.knobs_section(meta),
        sections.pass_at_k_section(read, pass_report),
        sections.arms_section(read),
        sections.dimensions_section(read),
        sections.faults_section(read),
        sections.markers_section(read, recorded_bounds(source.metadata)),
        sections.judge_section(read, rows),
    ]
    if baseline is not None:
        parts.append(_compare(baseline, rows, run, source, floor, proxy))
    parts.append(transcripts_section(read.shown, read.rows, max_transcripts))
    metadata: Mapping[str, Any] = meta.get("metadata") or {}
    heading = title or f"whileai report: {_label(run, source)}"
    subtitle = " · ".join(
        str(v)
        for v in (
            metadata.get("run_id") and f"run {metadata['run_id']}",
            metadata.get("world") and f"world {provenance_text('world', metadata['world'])}",
            metadata.get("agent_model") and f"agent {metadata['agent_model']}",
            metadata.get("created"),
        )
        if v
    )
    target = user_path(path) if path is not None else _default_path(run)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = render(heading, subtitle, parts)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)
    return target


def _default_path(run: Any) -> Path:
    if isinstance(run, str | os.PathLike):
        return page_beside(user_path(run))
    output = getattr(run, "output", None)
    if isinstance(output, str) and output:
        return page_beside(Path(output))
    return Path("whileai-report.html")


def page_beside(rows: Path) -> Path:
    """``runs/x.jsonl`` -> ``runs/x.report.html``, named after its rows as their sidecar is
    (``runs/x.meta.json``): two runs in one folder keep a page each, where one ``report.html``
    would be the page of whichever was viewed last."""
    return beside(rows, ".report.html")


def _compare(
    baseline: Any,
    rows: Sequence[Mapping[str, Any]],
    run: Any,
    source: Any,
    floor: Sequence[Any] | None,
    proxy: str | None,
) -> Section:
    from whileai.measure.compare import compare_runs
    from whileai.measure.variance import eval_variance

    base = row_source(baseline, "baseline")
    spread = None
    run_std = runs = None
    if floor is not None:
        if isinstance(floor, str | os.PathLike) or len(floor) < 3:
            raise ValueError(
                "floor= takes three or more re-runs of the baseline (a list): a spread of "
                "fewer is not a std"
            )
        spread = eval_variance(*[row_source(f, "floor").rows for f in floor])
        run_std, runs = spread.run_std, spread.n_runs
    # each arm's rows exported on the way, with its run's metadata beside them
    report = compare_runs(
        attrs.evolve(base, rows=ExportedRows(base.rows)),
        attrs.evolve(source, rows=rows),
        proxy=proxy,
        run_std=run_std,
        run_std_runs=runs,
    )
    return sections.compare_section(
        report, _label(baseline, base), _label(run, source), floor=spread
    )
