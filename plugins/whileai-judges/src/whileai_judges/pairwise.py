"""The pairwise judge: a model reads two replies to the same task and says which better meets
the rubric. It is what ``wai.rank`` ranks with by default.

Every pair is asked in both orders (B shown first the second time), because a judge model
favours a position; a verdict that changes with the order is a tie with ``flipped=True``
(``whileai.ranking.combine_orders``), so the judge declares ``both_orders = True``. The reply
is asked for with a JSON-schema ``response_format`` (``{"reason", "winner": "A"|"B"|"tie"}``)
and read leniently (code fences, text around the object; every object in the reply must
name the same winner, see :mod:`whileai_judges.replies`); a reply that still holds no valid
verdict, or a backend that fails, gives a failed :class:`~whileai.ranking.Preference` with the
reason, which ``wai.rank`` counts and ranks around.

Provenance as for the rubric judge: ``model``, ``prompt_sha`` (SHA-256 of the template,
instruction and rubric, so a rubric edit is a new judge), ``temperature`` and ``version`` =
``<model>@<prompt_sha[:12]>``. The rubric is the judge's ``rubric=``, else the first row's
``privileged.rubric`` (the two rows answer one task), else the rubric judge's default.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from whileai.backends import Backend, BackendError, Sampling, resolve_backend
from whileai.ranking import Preference, combine_orders
from whileai.registry import Registry
from whileai_judges.replies import read_verdict, reason_of
from whileai_judges.rubric import (
    DEFAULT_RUBRIC,
    MAX_TRANSCRIPT_CHARS,
    TURNS,
    check_options,
    choose_rubric,
    cut_middle,
    model_name,
    render_transcript,
)

TEMPLATE = """You are comparing two conversations in which an AI assistant answered the same \
request. {turns}

Rubric:
{rubric}
{context}
Conversation A:
{transcript_a}

Conversation B:
{transcript_b}

{instruction}
Reply with a JSON object only."""

INSTRUCTION = (
    'Which conversation better meets the rubric? Give "reason" (one or two sentences) and then '
    '"winner": "A", "B", or "tie" when neither is better.'
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string"},
        "winner": {"type": "string", "enum": ["A", "B", "tie"]},
    },
    "required": ["reason", "winner"],
    "additionalProperties": False,
}


def prompt_sha(rubric: str) -> str:
    """SHA-256 of what defines the pairwise prompt: template, instruction and rubric."""
    material = "\n".join((TEMPLATE, TURNS, INSTRUCTION, rubric))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def parse_winner(text: str) -> tuple[str, str]:
    """``(winner, reason)`` from a judge's reply; ValueError saying what is wrong otherwise
    (see :mod:`whileai_judges.replies`: every object in the reply must name the same winner)."""
    return read_verdict(text, "winner", _read_winner)


def _read_winner(data: dict[str, Any]) -> tuple[str, str]:
    winner = data.get("winner")
    if isinstance(winner, str):
        word = winner.strip().strip(".").upper()
        if word in ("A", "B"):
            winner = word
        elif word == "TIE":
            winner = "tie"
    if winner not in ("A", "B", "tie"):
        raise ValueError(f"judge winner must be 'A', 'B' or 'tie', got {data.get('winner')!r}")
    return winner, reason_of(data)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _context(row: Mapping[str, Any]) -> str:
    """What only the grader may see, shared by both rows of one task: the reference, the goal."""
    privileged = row.get("privileged")
    if not isinstance(privileged, Mapping):
        return ""
    labels = (("reference", "Reference answer"), ("goal", "What a good outcome is"))
    parts = [
        f"{label}: {_text(privileged[key])}"
        for key, label in labels
        if privileged.get(key) not in (None, "", {})
    ]
    return "\n" + "\n".join(parts) + "\n" if parts else ""


def _clip_transcript(text: str) -> str:
    # two transcripts share one prompt, so each gets half of what the rubric judge shows
    return cut_middle(text, MAX_TRANSCRIPT_CHARS // 2)


@attrs.define
class PairwiseJudge:
    """A ranking judge: ``await judge.compare(row_a, row_b)`` returns a
    :class:`whileai.ranking.Preference`, asked in both orders.

    ``backend`` is a backend (the factory resolves a spec); ``temperature`` 0 by default so a
    pair gets the same verdict each time it is asked.
    """

    backend: Backend
    rubric: str | None = None
    temperature: float = 0.0
    max_tokens: int = 256
    #: the name the judge reports its model by; the backend's spec unless given
    model: str = ""
    name: str = "pairwise"
    #: compare() asks both orders itself and reports a flip (the ranking protocol)
    both_orders: ClassVar[bool] = True

    def __attrs_post_init__(self) -> None:
        check_options(self.rubric, self.temperature, self.max_tokens)
        if not self.model:
            self.model = model_name(self.backend)

    @property
    def version(self) -> str:
        """``<model>@<prompt sha>`` for the judge's own rubric (a row's rubric gives its own
        version in the verdict's meta)."""
        return f"{self.model}@{prompt_sha(self.rubric or DEFAULT_RUBRIC)[:12]}"

    def rubric_for(self, row: Mapping[str, Any]) -> tuple[str, str]:
        """The rubric a pair is compared by, and where it came from (option, row or default)."""
        return choose_rubric(self.rubric, row)

    def messages(
        self, row_a: Mapping[str, Any], row_b: Mapping[str, Any], rubric: str
    ) -> list[dict[str, str]]:
        content = TEMPLATE.format(
            rubric=rubric,
            context=_context(row_a),
            transcript_a=_clip_transcript(render_transcript(row_a)),
            transcript_b=_clip_transcript(render_transcript(row_b)),
            turns=TURNS,
            instruction=INSTRUCTION,
        )
        return [{"role": "user", "content": content}]

    def response_format(self) -> dict[str, Any]:
        return {
            "type": "json_schema",
            "json_schema": {"name": "pairwise_verdict", "strict": True, "schema": SCHEMA},
        }

    async def _ask(
        self, row_a: Mapping[str, Any], row_b: Mapping[str, Any], rubric: str
    ) -> Preference:
        try:
            completion = await self.backend.complete(
                self.messages(row_a, row_b, rubric),
                sampling=Sampling(temperature=self.temperature, max_tokens=self.max_tokens),
                response_format=self.response_format(),
            )
        except BackendError as exc:
            return Preference.error(f"judge backend failed ({exc.kind}): {exc}")
        meta: dict[str, Any] = {"served_model": completion.model}
        if completion.truncated:
            meta["truncated"] = True
        try:
            winner, reason = parse_winner(completion.text)
        except ValueError as exc:
            return Preference.error(str(exc), **meta)
        return Preference(winner, reason, "ok", None, meta)

    async def compare(self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> Preference:
        """Which row better meets the rubric, asked as (A, B) and as (B, A)."""
        for label, row in (("row_a", row_a), ("row_b", row_b)):
            if not isinstance(row, Mapping):
                raise TypeError(f"{label} must be a row mapping, got {type(row).__name__}")
        rubric, source = self.rubric_for(row_a)
        sha = prompt_sha(rubric)
        first, second = await asyncio.gather(
            self._ask(row_a, row_b, rubric), self._ask(row_b, row_a, rubric)
        )
        verdict = combine_orders(first, second)
        meta = {
            **verdict.meta,
            "name": self.name,
            "model": self.model,
            "prompt_sha": sha,
            "temperature": self.temperature,
            "version": f"{self.model}@{sha[:12]}",
            "rubric_source": source,
        }
        return attrs.evolve(verdict, meta=meta)

    def __call__(self, row: Mapping[str, Any]) -> Any:
        raise TypeError(
            "the pairwise judge compares two rows and gives no reward to one; rank a group "
            "with wai.rank(rows, judge='pairwise'), or grade with judge='rubric'"
        )


def make_pairwise_judge(
    argument: str | None = None,
    *,
    backend: str | Backend | None = None,
    registry: Registry | None = None,
    **options: Any,
) -> PairwiseJudge:
    """``"pairwise"`` or ``"pairwise:<backend spec>"`` (``"pairwise:openai:gpt-4o"``); options
    ``backend=``, ``rubric=``, ``temperature=``, ``max_tokens=``, ``model=``, ``registry=``
    (where the backend spec is resolved). No model named: the judge role's default."""
    if argument is not None and backend is not None:
        raise ValueError(
            f"judge spec 'pairwise:{argument}' names a backend and backend= is given too; pass one"
        )
    spec = argument if argument is not None else backend
    return PairwiseJudge(resolve_backend(spec, role="judge", registry=registry), **options)
