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
        traj = result.get("traj") or []
        out.append(
            row(
                prompt=first(traj, "user"),
                final_text=last(traj, "assistant"),
                reward=reward_of(result.get("reward"), where),
                task_id=f"tau_bench:{result.get('task_id')}",
                repeat=int(result.get("trial") or 0),
                tool="tau_bench",
                source=provenance("tau_bench", "EnvRunResult", path),
                messages=[m for m in traj if isinstance(m, dict)],
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
        messages = sim.get("messages") or []
        reward_info = sim.get("reward_info") or {}
        out.append(
            row(
                prompt=first(messages, "user"),
                final_text=last(messages, "assistant"),
                reward=reward_of(reward_info.get("reward"), where),
                task_id=f"{domain}:{sim.get('task_id')}",
                repeat=int(sim.get("trial") or 0),
                tool="tau2_bench",
                source=provenance(
                    "tau2_bench",
                    str(info.get("git_commit") or "results.json"),
                    path,
                    domain=domain,
                    termination_reason=sim.get("termination_reason"),
                ),
                model=str(agent) if agent else None,
                messages=[m for m in messages if isinstance(m, dict)],
            )
        )
    return out
