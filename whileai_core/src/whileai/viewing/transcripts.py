"""Browsable transcripts: each rollout's steps, tool calls and results, faults, and verdict.

Rows reach here exported (``export_row``), so no privileged block, reference or hidden state
is on the page; the page shows what the rows file holds, no more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.schema.wording import counted
from whileai.viewing.page import Section, esc

Row = Mapping[str, Any]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=1, sort_keys=True, default=str)


def _outcome(row: Row) -> str:
    reward = row.get("reward")
    if reward is None:
        return "unscored"
    return "pass" if reward == 1 else "fail"


def _step(step: Mapping[str, Any], faults: list[Mapping[str, Any]]) -> str:
    role = str(step.get("role") or "?")
    parts = [f"<div class='step {esc(role)}'><span class='role'>{esc(role)}</span>"]
    if role == "tool" and step.get("name"):
        parts.append(f" <span class='muted'>{esc(step['name'])}</span>")
    if step.get("user_status") not in (None, "continue"):
        parts.append(f" <span class='muted'>({esc(step['user_status'])})</span>")
    for fault in faults:
        parts.append(f" <span class='fault'>fault: {esc(fault.get('kind'))}</span>")
    content = step.get("content")
    if content not in (None, ""):
        parts.append(f"<pre>{esc(_text(content))}</pre>")
    for call in step.get("tool_calls") or []:
        if isinstance(call, Mapping):
            arguments = _text(call.get("arguments"))
            parts.append(f"<pre>call {esc(call.get('name'))}({esc(arguments)})</pre>")
    parts.append("</div>")
    return "".join(parts)


def _rollout(index: int, row: Row) -> str:
    lineage = row.get("lineage") if isinstance(row.get("lineage"), Mapping) else {}
    assert isinstance(lineage, Mapping)
    faults = [f for f in row.get("faults") or [] if isinstance(f, Mapping)]
    by_step: dict[int, list[Mapping[str, Any]]] = {}
    for fault in faults:
        if isinstance(fault.get("step"), int):
            by_step.setdefault(fault["step"], []).append(fault)
    reward = row.get("reward")
    head = [
        f"#{index}",
        str(row.get("task_id")),
        *([f"repeat {lineage['repeat']}"] if lineage.get("repeat") is not None else []),
        "reward -" if reward is None else f"reward {reward:g}",
        *([str(row["stop_reason"])] if row.get("stop_reason") else []),
        *([counted(len(faults), "fault")] if faults else []),
        *(["error"] if row.get("error") else []),
    ]
    body = [f"<pre>{esc(_text(row.get('prompt')))}</pre>"]
    steps = row.get("steps") or []
    # a fault's ``step`` is the index of the tool result it shaped
    for i, step in enumerate(steps):
        if isinstance(step, Mapping):
            body.append(_step(step, by_step.get(i, [])))
    unplaced = [
        f for f in faults if not (isinstance(f.get("step"), int) and 0 <= f["step"] < len(steps))
    ]
    for fault in unplaced:
        body.append(f"<div class='fault'>fault: {esc(_text(dict(fault)))}</div>")
    verdict = [
        f"<b>verdict</b>: reward {'-' if reward is None else f'{reward:g}'}",
        f" by {esc(row.get('judge_name') or '-')} ({esc(row.get('judge_status') or '-')})",
    ]
    if row.get("reason"):
        verdict.append(f"<pre>{esc(_text(row['reason']))}</pre>")
    owner = row.get("failure_owner")
    if isinstance(owner, Mapping):
        verdict.append(
            f"<div>failure owner: <b>{esc(owner.get('owner'))}</b> "
            f"<span class='muted'>{esc(owner.get('reason') or '')}</span></div>"
        )
    if row.get("markers"):
        verdict.append(f"<div class='muted'>markers: {esc(_text(row['markers']))}</div>")
    if row.get("error"):
        verdict.append(f"<pre class='fault'>{esc(_text(row['error']))}</pre>")
    body.append(f"<div class='verdict'>{''.join(verdict)}</div>")
    return (
        f"<details class='rollout {_outcome(row)}'><summary>{esc(' · '.join(head))}</summary>"
        f"{''.join(body)}</details>"
    )


def transcripts_section(shown: Sequence[Row], total: int, limit: int) -> Section:
    """The transcripts of ``shown``, the first ``limit`` of the run's ``total`` rows."""
    controls = (
        "<p><input id='transcript-filter' type='search' placeholder='filter: task, tool, reason'"
        " size='40'> <label><input id='transcript-failed' type='checkbox'> not passed only"
        f"</label> <span id='transcript-count' class='muted'>{len(shown)} shown</span></p>"
    )
    items = "".join(_rollout(i, row) for i, row in enumerate(shown))
    more = ""
    if total > len(shown):
        more = (
            f"<p class='note'>{total - len(shown)} more rollouts are not shown here "
            f"(max_transcripts={limit}); every number above counts them.</p>"
        )
    return Section("transcripts", "Transcripts", controls + more + items)
