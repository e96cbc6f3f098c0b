"""A grading pass's graded rows, kept beside its output until every row is graded, so a pass
stopped part way (Ctrl-C, a kill, a judge that raised) goes on from where it stopped.

A judge model's pass over a long run costs hours and tokens. The rows it has graded are
written, in order, to ``.<output name>.grading`` beside ``output``, with the judge that
graded them in ``.<output name>.grading.json``; the file takes ``output``'s place once every
row is graded. Grading the same rows into the same output with the same judge and
``resume=True`` reads that file back, checks that each of its rows is the graded copy of the
row at its place, and asks the judge only for the rows after them. Another judge, or other
rows, start afresh (the kept rows are dropped, and the result says so): a kept grade is used
only where it is the grade this pass would have asked for. Without ``resume=True`` a pass
that finds kept rows refuses to start, naming them, as ``simulate()`` refuses an output that
holds a run: the grades are not thrown away unasked, and not taken unasked either (the file
is one anyone who can write beside the output could have written).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from whileai.schema.export import export_line
from whileai.schema.files import iter_jsonl
from whileai.schema.jsonline import key_text
from whileai.schema.records import RowError, check_row, rollout_key
from whileai.schema.wording import agreeing, counted

#: what a kept row and the row at its place must agree on to be the same rollout (besides its
#: lineage.rollout_key, where both carry one)
_SAME_ROLLOUT = ("prompt", "final_text", "scenario_id", "task_id", "seed")


def partial_path(output: Path) -> Path:
    """Where a grading pass keeps the rows it has graded: ``runs/.x.jsonl.grading``."""
    return output.with_name(f".{output.name}.grading")


def judge_path(partial: Path) -> Path:
    """Which judge graded the kept rows: ``runs/.x.jsonl.grading.json``."""
    return partial.with_name(partial.name + ".json")


def judge_identity(
    name: str, label_source: str, meta: Mapping[str, Any], override: Mapping[str, Any]
) -> str:
    """The judge as kept rows are matched to it: its name, its kind (``label_source``) and
    everything it reports of itself (version, model, rubric hash), with the overrides the
    pass applies."""
    described = {
        "name": name,
        "label_source": label_source,
        "meta": dict(meta),
        "override": dict(override),
    }
    text = key_text(described)
    if text is None:
        return json.dumps(described, sort_keys=True, default=repr)
    return text if isinstance(text, str) else text.decode()


@attrs.define
class Kept:
    """The graded rows a stopped pass left that this one goes on from."""

    #: each kept row's byte offset in the partial file
    offsets: array[int] = attrs.field(factory=lambda: array("q"))
    #: why kept rows were dropped rather than used (None when none were, or all were used)
    dropped: str | None = None

    @property
    def n(self) -> int:
        """How many rows are kept: the first of the rows to grade."""
        return len(self.offsets)


def kept_rows(
    partial: Path,
    identity: str,
    rows: Iterable[Mapping[str, Any]],
    on_each: Callable[[Mapping[str, Any], dict[str, Any]], None],
) -> Kept:
    """The rows a stopped pass graded into ``partial`` that this pass can use: all of them
    when the same judge graded them and each is the graded copy of the row at its place in
    ``rows`` (``on_each(given, kept)`` is called for each as it is read, so a caller counting
    them starts its count again when ``dropped`` says none are used), else none, the file
    removed and ``dropped`` saying why. A line a kill cut short is cut off the file."""
    if not partial.exists():
        _forget(partial)
        return Kept()
    try:
        saved = json.loads(judge_path(partial).read_text(encoding="utf-8")).get("judge")
    except (OSError, ValueError, AttributeError):
        saved = None
    if saved != identity:
        return _drop(partial, "they were graded by another judge")
    given_rows = iter(rows)
    kept = Kept()
    try:
        for row, _line, offset in iter_jsonl(partial, what="kept grades", tail="cut"):
            given = next(given_rows, None)
            if given is None or not _same_rollout(given, row):
                return _drop(partial, f"row {kept.n} is not the graded copy of the row now there")
            if not _as_written(row):
                return _drop(partial, f"row {kept.n} is not a row as a grading pass writes one")
            kept.offsets.append(offset)
            on_each(given, row)
    except ValueError as exc:  # a line that is not a row: the file is not one this pass wrote
        return _drop(partial, str(exc))
    return kept


def not_resumed(partial: Path, output: Path) -> Kept:
    """A pass not asked to resume: nothing kept, or a refusal naming what a stopped pass
    kept (as ``simulate()`` refuses an output holding a run without ``resume=True``): the
    grades cost a judge's time and tokens, and are dropped only by the person who paid."""
    n = _whole_lines(partial) if partial.exists() else 0
    if not n:
        # nothing graded (a pass stopped before its first row, or cut short inside it)
        _forget(partial)
        return Kept()
    raise FileExistsError(
        f"output={str(output)!r}: a stopped grading pass kept {counted(n, 'graded row')} in "
        f"{str(partial)!r}; pass resume=True (whileai grade --resume) to go on after "
        f"{agreeing(n, 'it', 'them')} with the same judge, or remove that file to grade every "
        "row afresh"
    )


def _as_written(kept: dict[str, Any]) -> bool:
    """Whether ``kept`` is a row as a pass writes one: exported (exporting it again changes
    nothing: no privileged block, no reserved key) with a reward a row may carry. What the
    file says goes into the output as it is, so nothing else in it is taken."""
    try:
        check_row(kept)
    except RowError:
        return False
    return export_line(kept)[0] == kept


def _same_rollout(given: Mapping[str, Any], kept: Mapping[str, Any]) -> bool:
    if rollout_key(given) != rollout_key(kept):
        return False
    return all(given.get(field) == kept.get(field) for field in _SAME_ROLLOUT)


def _whole_lines(partial: Path) -> int:
    """How many rows ``partial`` holds whole (a kill may have cut its last one short)."""
    with partial.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _drop(partial: Path, why: str) -> Kept:
    n = _whole_lines(partial)
    _forget(partial)
    return Kept(
        dropped=f"{counted(n, 'graded row')} a stopped pass kept {agreeing(n, 'was', 'were')} "
        f"dropped: {why}"
    )


def _forget(partial: Path) -> None:
    """Nothing kept any more: the rows and the judge that graded them removed."""
    partial.unlink(missing_ok=True)
    judge_path(partial).unlink(missing_ok=True)


def start(partial: Path, identity: str) -> None:
    """Say which judge the rows written to ``partial`` from now on are graded by."""
    said = judge_path(partial)
    temporary = said.with_name(said.name + ".tmp")
    temporary.write_text(json.dumps({"judge": identity}), encoding="utf-8")
    temporary.replace(said)


def finished(partial: Path) -> None:
    """The kept rows became the output: nothing is kept any more."""
    judge_path(partial).unlink(missing_ok=True)
