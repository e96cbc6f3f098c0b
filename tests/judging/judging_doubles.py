"""Model doubles for the judging tests, registered through the real backend hook.

``judgefake:<name>`` is a judge model: it reads the rubric judge's prompt and passes the
conversation when the final answer contains the reference answer the prompt shows, so the
rubric judge runs for real and its verdicts can be checked by hand. An answer containing
``BOOM`` makes it fail the call. ``agentfake:<name>`` is an agent that answers from a table of
prompt -> replies (one per call, in order), reports tokens, and fails on a prompt containing
``unreachable``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from whileai import hookimpl
from whileai.backends import BackendError, BackendStats, Completion, Sampling
from whileai.hookspecs import Register

JUDGE_SERVED_MODEL = "judge-double-1"


class JudgeModel:
    def __init__(self, name: str, served: str = JUDGE_SERVED_MODEL) -> None:
        self.name = name
        self.served = served
        self.prompts: list[str] = []
        self.closed = False
        self.stats = BackendStats()

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        prompt = str(messages[-1]["content"])
        self.prompts.append(prompt)
        self.stats.calls += 1
        answers = re.findall(r"^ASSISTANT(?: \(final answer\))?: (.*)$", prompt, re.MULTILINE)
        answer = answers[-1] if answers else ""
        if "BOOM" in answer:
            raise BackendError("judge server down", kind="http_500")
        reference = re.search(r"^Reference answer: (.*)$", prompt, re.MULTILINE)
        passed = reference is not None and reference.group(1).strip() in answer
        reply = {
            "reason": "matches the reference" if passed else "no match",
            "score": float(passed),
        }
        return Completion(text=json.dumps(reply), model=self.served, sampling={"temperature": 0.0})

    async def aclose(self) -> None:
        self.closed = True


class AgentModel:
    def __init__(self, name: str, replies: Mapping[str, list[str]]) -> None:
        self.name = name
        self.replies = {k: list(v) for k, v in replies.items()}
        self.calls: list[dict[str, Any]] = []
        self.closed = False

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        chosen = Sampling.coerce(sampling)
        prompt = str(messages[-1]["content"])
        self.calls.append({"messages": [dict(m) for m in messages], "sampling": chosen})
        if "unreachable" in prompt:
            raise BackendError("connection refused", kind="connect")
        text = self.replies[prompt].pop(0)
        return Completion(
            text=text,
            model="agent-double-7b",
            sampling={"temperature": chosen.temperature, "max_tokens": chosen.max_tokens},
            input_tokens=len(prompt.split()),
            output_tokens=len(text.split()),
        )

    async def aclose(self) -> None:
        self.closed = True


class ModelDoubles:
    """Registers both doubles; keeps every backend it built to look at afterwards."""

    def __init__(self, agent_replies: Mapping[str, list[str]] | None = None) -> None:
        self.agent_replies = dict(agent_replies or {})
        self.judges: list[JudgeModel] = []
        self.agents: list[AgentModel] = []

    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        def judge(argument: str | None = None, **options: Any) -> JudgeModel:
            built = JudgeModel(f"judgefake:{argument}")
            self.judges.append(built)
            return built

        def agent(argument: str | None = None, **options: Any) -> AgentModel:
            built = AgentModel(f"agentfake:{argument}", self.agent_replies)
            self.agents.append(built)
            return built

        register("judgefake", judge)
        register("agentfake", agent)


class EmbeddedStandIn:
    """Stands in for the embedded model under its own name, ``local:smollm2``, so the
    no-endpoint default resolves without loading a model."""

    def __init__(self) -> None:
        self.built: list[JudgeModel] = []

    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        def local(argument: str | None = None, **options: Any) -> JudgeModel:
            built = JudgeModel(f"local:{argument}", served="SmolLM2-135M-Instruct")
            self.built.append(built)
            return built

        register("local", local)
