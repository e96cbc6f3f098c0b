"""tau-bench results (a list of ``EnvRunResult``: ``task_id``, ``reward``, ``info``, ``traj``,
``trial``) and tau2-bench results (``{"info", "tasks", "simulations": [{"task_id", "trial",
"messages", "reward_info": {"reward"}, "termination_reason"}]}``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from whileai.importers.common import first, last, provenance, reward_of, row


def read(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and "simulations" in data:
        return _tau2(path, data)
    if not isinstance(data, list):
        raise ValueError(f"{path}: neither tau-bench's results list nor tau2-bench's results")
    out = []
    for i, result in enumerate(data):
        where = f"{path}: result {i}"
        if not isinstance(result, dict) or "traj" not in result:
            raise ValueError(f"{where}: not an EnvRunResult (task_id, reward, info, traj, trial)")
        out.append(
            _chat_row(
                result.get("traj") or [],
                reward_of(result.get("reward"), where),
                task_id=f"tau_bench:{result.get('task_id')}",
                trial=result.get("trial"),
                tool="tau_bench",
                source=provenance("tau_bench", "EnvRunResult", path),
            )
        )
    return out


def _tau2(path: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    info = data.get("info") or {}
    domain = ((info.get("environment_info") or {}).get("domain_name")) or "tau2"
    agent = (info.get("agent_info") or {}).get("llm")
    out = []
    for i, sim in enumerate(data["simulations"]):
        where = f"{path}: simulation {i}"
        reward_info = sim.get("reward_info") or {}
        out.append(
            _chat_row(
                sim.get("messages") or [],
                reward_of(reward_info.get("reward"), where),
                task_id=f"{domain}:{sim.get('task_id')}",
                trial=sim.get("trial"),
                tool="tau2_bench",
                source=provenance(
                    "tau2_bench",
                    str(info.get("git_commit") or "results.json"),
                    path,
                    domain=domain,
                    termination_reason=sim.get("termination_reason"),
                ),
                model=str(agent) if agent else None,
            )
        )
    return out


def _chat_row(
    messages: list[Any],
    reward: float | None,
    *,
    task_id: str,
    trial: Any,
    tool: str,
    source: dict[str, Any],
    model: str | None = None,
) -> dict[str, Any]:
    """One trial's chat as a row: the first user turn the prompt, the last agent turn the
    answer, the trial the repeat."""
    return row(
        prompt=first(messages, "user"),
        final_text=last(messages, "assistant"),
        reward=reward,
        task_id=task_id,
        repeat=int(trial or 0),
        tool=tool,
        source=source,
        model=model,
        messages=[m for m in messages if isinstance(m, dict)],
    )
