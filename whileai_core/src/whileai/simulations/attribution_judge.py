"""A judge pass for the failures the rules leave to the agent (``advanced["attribution_model"]``).

The rules in ``whileai.simulations.attribution`` name the user or the world only on evidence
they can read off the row; every other failure falls to the agent. A model reading the whole
transcript with what the simulated user was told can catch what no rule does: a user who
broke persona, asked for something its situation never wanted, or wore the agent down. Only
those fall-through rows go to the model, one call each; its answer is recorded with its
provenance (``source: "judge"``, the model, and the rules' verdict it replaced), and an answer
that cannot be read leaves the rules' verdict with the reason why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from whileai.backends import Backend, Sampling
from whileai.worlds import Situation

OWNERS = ("agent", "user", "world")

#: Characters of each step the judge reads: enough for a sentence or a tool answer's head.
STEP_CHARS = 600

INSTRUCTIONS = (
    "You decide whose failure a failed rollout was. An agent talked with a simulated user and "
    "called the tools of a mock world; the rollout failed its checks. Answer 'user' when the "
    "simulated user broke its persona, asked for something its situation does not say, "
    "contradicted what it knows, gave up early or gave away what only the grader holds; "
    "'world' when the tools' faults made success impossible whatever the agent did; "
    "otherwise 'agent'. Reply with JSON only: "
    '{"owner": "agent" | "user" | "world", "reason": "<one sentence>"}'
)

RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "failure_owner",
        "schema": {
            "type": "object",
            "required": ["owner", "reason"],
            "properties": {
                "owner": {"type": "string", "enum": list(OWNERS)},
                "reason": {"type": "string"},
            },
        },
    },
}

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def _transcript(steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        entry: dict[str, Any] = {
            "role": step.get("role"),
            "content": str(step.get("content") or "")[:STEP_CHARS],
        }
        if step.get("tool_calls"):
            entry["tool_calls"] = [
                {"name": c.get("name"), "arguments": c.get("arguments")} for c in step["tool_calls"]
            ]
        if step.get("fault"):
            entry["fault"] = step["fault"]
        out.append(entry)
    return out


def judge_messages(
    row: Mapping[str, Any], situation: Situation, patience: int
) -> list[dict[str, Any]]:
    """What the attribution judge reads: the request, who the user was told to be and what it
    knew, the grader's reason, the faults and the transcript."""
    case = {
        "request": situation.prompt,
        "user_persona": situation.persona,
        "user_knows": dict(situation.hidden_state),
        "user_patience": patience,
        "grader_said": row.get("reason"),
        "faults": list(row.get("faults") or []),
        "transcript": _transcript(row.get("steps") or []),
    }
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": json.dumps(case, ensure_ascii=False, default=str)},
    ]


def read_answer(text: str) -> tuple[str, str] | str:
    """``(owner, reason)`` from the judge's reply, or why it cannot be read."""
    match = _OBJECT.search(text or "")
    if match is None:
        return f"the answer holds no JSON object: {text[:80]!r}"
    try:
        answer = json.loads(match.group(0))
    except ValueError as exc:
        return f"the answer's JSON does not parse: {exc}"
    owner = answer.get("owner") if isinstance(answer, dict) else None
    reason = answer.get("reason") if isinstance(answer, dict) else None
    if owner not in OWNERS:
        return f"the answer names owner {owner!r}, not one of {', '.join(OWNERS)}"
    if not isinstance(reason, str) or not reason.strip():
        return "the answer gives no reason"
    return str(owner), reason.strip()


@attrs.define
class Attributor:
    """The attribution judge of a run: its backend and the spec that named it."""

    backend: Backend
    spec: str

    def wanted(self, verdict: Mapping[str, Any] | None) -> bool:
        """Only the rules' fall-through (no evidence against the user or the world)."""
        return (
            verdict is not None and verdict.get("source") == "rules" and verdict["owner"] == "agent"
        )

    async def attribute(
        self, row: Mapping[str, Any], situation: Situation, patience: int, rules: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The failure's owner as the judge sees it, with its provenance; the rules' verdict
        with the problem when the judge's answer cannot be used."""
        kept = {"owner": rules["owner"], "reason": rules["reason"]}
        try:
            reply = await self.backend.complete(
                judge_messages(row, situation, patience),
                None,
                Sampling(temperature=0.0, max_tokens=160),
                response_format=RESPONSE_FORMAT,
            )
        except Exception as exc:  # a judge that fails leaves the rules' verdict standing
            return {**rules, "judge_problem": f"{self.spec}: {type(exc).__name__}: {exc}"}
        read = read_answer(reply.text)
        if isinstance(read, str):
            return {**rules, "judge_problem": f"{self.spec}: {read}"}
        owner, reason = read
        return {
            "owner": owner,
            "reason": reason,
            "source": "judge",
            "judge_model": reply.model or self.spec,
            "rules": kept,
        }
