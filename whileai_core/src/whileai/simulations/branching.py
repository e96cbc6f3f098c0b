"""``wai.branch``: replay a saved trajectory exactly up to one decision, then let a policy
decide again from there, ``repeats`` times.

The world is rebuilt from the situation's seed and spec (or the in-memory row's privileged
block), its episode draws from the seed the recorded rollout's world drew from, and every
recorded tool call is sent to it again in order: the same state and the same faults, each
answer checked against the recording (a world that answers otherwise fails the branch's row
with the step that diverged, never a silent approximation). The recorded agent and user turns
are kept as written. From step ``at`` on, the new policy (another model, prompt, sampling or
seed) acts and the simulated user answers it; the rows are graded like any other, so
``wai.compare`` between two branch runs measures the effect of that one decision.

What a branch inherits from the run it branches (read from the run in memory, or from the
rows file's sidecar): the world and its options, the fault plan, the system prompt, the turn
and tool limits. Anything given to ``branch`` wins.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from whileai.schema.files import read_jsonl, sidecar_path, user_path
from whileai.simulations.params import RunParams
from whileai.simulations.plan import PlannedSituation, plan_from_tasks
from whileai.worlds import World

#: What a branch takes from the run it branches, by the run's resume-plan key.
_INHERITED_PARAMS = ("fault_rate", "max_turns", "max_tool_calls", "sampling")
#: The models a branch keeps unless told otherwise, when the run named them by spec (your own
#: agent function cannot be named in a file: pass it again).
_INHERITED_MODELS = ("agent_model", "user_model")
_INHERITED_KNOBS = ("world", "world_options", "fault_kinds", "max_tool_rounds")


@attrs.frozen
class Branch:
    """The rows to branch and where: every row is replayed up to step ``at``."""

    rows: tuple[Mapping[str, Any], ...]
    at: int


@attrs.frozen
class Source:
    """What was given to branch, read: its rows, and what their run was run with."""

    rows: list[dict[str, Any]]
    plan: Mapping[str, Any]
    system_prompts: Mapping[str, str]


def read_source(source: Any) -> Source:
    """Rows from a run in memory, a rows file (with its sidecar, when there is one), a list
    of rows, or one row."""
    if isinstance(source, str | os.PathLike):
        source = user_path(source)
        rows = read_jsonl(source, what="branch source").rows
        side = sidecar_path(source)
        plan: Mapping[str, Any] = {}
        prompts: Mapping[str, str] = {}
        if side.exists():
            import json

            meta = json.loads(Path(side).read_text(encoding="utf-8"))
            plan = dict(meta.get("metadata", {}).get("resume_plan") or {})
            prompts = dict(meta.get("system_prompts") or {})
        return Source(rows, plan, prompts)
    trajectories = getattr(source, "trajectories", None)
    if trajectories is not None:
        metadata = getattr(source, "metadata", {}) or {}
        return Source(
            [dict(t) for t in trajectories],
            dict(metadata.get("resume_plan") or {}),
            dict(getattr(source, "system_prompts", {}) or {}),
        )
    if isinstance(source, Mapping):
        return Source([dict(source)], {}, {})
    if isinstance(source, Sequence) and all(isinstance(r, Mapping) for r in source):
        return Source([dict(r) for r in source], {}, {})
    raise TypeError(
        "branch() takes a run (what simulate() returned), a rows file path, a list of rows or "
        f"one row; got {type(source).__name__}"
    )


def inherited(
    source: Source, given: Mapping[str, Any], advanced: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The simulate() parameters and advanced knobs of the branch: the source run's, where
    the caller did not give their own."""
    params = dict(given)
    for name in _INHERITED_PARAMS:
        if params.get(name) is None and source.plan.get(name) is not None:
            params[name] = source.plan[name]
    for name in _INHERITED_MODELS:
        spec = source.plan.get(name)
        if params.get(name) is None and isinstance(spec, str) and not spec.startswith("callable:"):
            params[name] = spec
    knobs = dict(advanced)
    for name in _INHERITED_KNOBS:
        value = source.plan.get(f"advanced.{name}", source.plan.get(name))
        if name not in knobs and value not in (None, {}, []):
            knobs[name] = value
    worlds = {str(r["world"]) for r in source.rows if r.get("world")}
    if len(worlds) > 1:
        raise ValueError(
            f"branch(): the rows come from several worlds {sorted(worlds)}; branch one"
        )
    if worlds and "world" not in knobs:
        knobs["world"] = worlds.pop()
    elif worlds and knobs["world"].split(":", 1)[0] != next(iter(worlds)).split(":", 1)[0]:
        raise ValueError(
            f"branch(): the rows were recorded in world {next(iter(worlds))!r}, and "
            f"advanced['world'] is {knobs['world']!r}: a branch replays in the world it recorded"
        )
    if params.get("system_prompt") is None:
        shas = {str((r.get("lineage") or {}).get("system_prompt_sha")) for r in source.rows}
        prompts = [source.system_prompts[s] for s in shas if s in source.system_prompts]
        if len(prompts) == 1 and len(shas) == 1:
            params["system_prompt"] = prompts[0]
    return params, knobs


def check_rows(rows: Sequence[Mapping[str, Any]], at: int) -> None:
    """Every row can be branched at ``at``: a ValueError naming the row and why not."""
    if isinstance(at, bool) or not isinstance(at, int) or at < 0:
        raise ValueError(f"branch(at=) is a step index (0 or more), got {at!r}")
    if not rows:
        raise ValueError("branch(): no rows to branch")
    for i, row in enumerate(rows):
        steps = row.get("steps")
        if not isinstance(steps, list):
            raise ValueError(f"branch(): row {i} has no steps to replay")
        lineage = row.get("lineage") or {}
        if not isinstance(lineage.get("rollout_seed"), int):
            raise ValueError(
                f"branch(): row {i} carries no lineage.rollout_seed, so its world's faults "
                "cannot be drawn again; branch rows simulate() wrote"
            )
        if at >= len(steps) or steps[at].get("role") != "assistant":
            where = [j for j, s in enumerate(steps) if s.get("role") == "assistant"]
            found = "past its last step" if at >= len(steps) else f"a {steps[at].get('role')} step"
            raise ValueError(
                f"branch(): row {i} ({lineage.get('rollout_key')}) has {found} at {at}; a "
                f"branch redoes one of the agent's decisions, at steps {where}"
            )


def _branch_id(key: str, at: int) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{key}-at{at}")


def plan_from_branch(params: RunParams, world: World, branch: Branch) -> list[PlannedSituation]:
    """One situation per branched row: the row's situation rebuilt as ``tasks=`` rebuilds it,
    its first ``at`` steps to replay, the seed its world drew from."""
    plans = []
    for i, row in enumerate(branch.rows):
        (rebuilt,) = plan_from_tasks(params, world, [row])
        lineage = row["lineage"]
        key = str(lineage["rollout_key"])
        branch_id = _branch_id(key, branch.at)
        situation = attrs.evolve(rebuilt.situation, situation_id=branch_id)
        plans.append(
            attrs.evolve(
                rebuilt,
                index=i,
                scenario_id=branch_id,
                situation=situation,
                replayed=True,
                prefix=tuple(dict(s) for s in row["steps"][: branch.at]),
                branched_from=key,
                episode_seed=int(lineage["rollout_seed"]),
            )
        )
    return plans
