"""The situation writer: a model that writes each drawn situation, or rewords the world's
template of it.

A world that exposes the three writing hooks gets whole situations written by the model:

- ``situation_facts(spec, rng) -> dict``: the facts of one episode the writer must use
  (real order ids, accounts), drawn from the situation's seed;
- ``situation_schema() -> dict``: the JSON Schema of what the writer returns (the request,
  the persona, patience, what the user knows, the goal, a reference outcome, a principle
  and a rubric for the judge: whatever the world needs);
- ``situation_from_written(spec, facts, written) -> Situation``: the world's check that the
  written situation is consistent with its facts, raising ValueError naming what is wrong.

The writer is sent the spec, the facts and the schema and asked for one JSON object. A reply
that is not JSON, lacks a field or names something the world does not hold is sent back
with the world's reason, up to ``writer_retries`` times; after that the situation is skipped,
with its reason in the run's report, never a crash. Further phrasings of a written situation
reword its request (same facts). A world without the hooks gets each phrasing of its
template reworded, as does any situation a resumed run already has on disk.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from typing import Any

import attrs

from whileai.backends import Sampling
from whileai.schema.wording import counted
from whileai.seeds import derive_seed
from whileai.simulations.defaults import RunKnobs
from whileai.simulations.models import Writer
from whileai.simulations.plan import PlannedSituation
from whileai.worlds import World, WritesSituations


def writes_whole_situations(world: World) -> bool:
    return isinstance(world, WritesSituations)


@attrs.frozen
class Skipped:
    """A situation the writer could not write consistently with the world."""

    index: int
    reason: str


@attrs.frozen
class Written:
    plans: list[PlannedSituation]
    skipped: list[Skipped]


async def write_situations(
    plans: list[PlannedSituation],
    writer: Writer,
    knobs: RunKnobs,
    seed: int,
    known_prompts: Mapping[str, str],
    warnings: list[str],
    writer_prompt: str,
    world: World | None = None,
) -> Written:
    """The plans with their situations written by ``writer`` (unchanged for the template
    writer and for replays), and the situations skipped because no consistent one came."""
    if writer.backend is None:
        return Written(plans, [])
    whole = world is not None and writes_whole_situations(world)
    by_index: dict[int, list[PlannedSituation]] = {}
    for plan in plans:
        by_index.setdefault(plan.index, []).append(plan)
    job = _Job(writer, knobs, seed, known_prompts, warnings, writer_prompt, world)

    async def one(group: list[PlannedSituation]) -> list[PlannedSituation] | Skipped:
        first = group[0]
        if first.replayed:
            return group
        if not whole or first.scenario_id in known_prompts:
            return list(await asyncio.gather(*(job.reword(p) for p in group)))
        written = await job.write_whole(first)
        if isinstance(written, Skipped):
            return written
        # the other phrasings are the same situation, its request reworded
        rest = [
            attrs.evolve(p, situation=attrs.evolve(written.situation, prompt=p.situation.prompt))
            for p in group[1:]
        ]
        base = written.situation.prompt
        reworded = await asyncio.gather(*(job.reword(p, base=base) for p in rest))
        return [written, *reworded]

    out: list[PlannedSituation] = []
    skipped: list[Skipped] = []
    for result in await asyncio.gather(*(one(g) for g in by_index.values())):
        if isinstance(result, Skipped):
            skipped.append(result)
        else:
            out.extend(result)
    return Written(out, skipped)


@attrs.frozen
class _Job:
    writer: Writer
    knobs: RunKnobs
    seed: int
    known_prompts: Mapping[str, str]
    warnings: list[str]
    writer_prompt: str
    world: World | None

    def _sampling(self, plan: PlannedSituation, attempt: int = 0) -> Sampling:
        return Sampling(
            temperature=self.knobs.writer_temperature,
            max_tokens=self.knobs.writer_max_tokens,
            seed=derive_seed(
                self.seed, "writer", plan.scenario_id, *((attempt,) if attempt else ())
            ),
        )

    async def reword(self, plan: PlannedSituation, base: str | None = None) -> PlannedSituation:
        """One phrasing of the request in the user's own words (the facts stay)."""
        label = self.writer.label
        if plan.scenario_id in self.known_prompts:
            prompt = self.known_prompts[plan.scenario_id]
            return attrs.evolve(
                plan, situation=attrs.evolve(plan.situation, prompt=prompt, writer_model=label)
            )
        messages = [
            {"role": "system", "content": self.writer_prompt},
            {
                "role": "user",
                "content": (
                    f"Who writes it: {plan.situation.persona}. Situation: "
                    f"{json.dumps(plan.spec, default=str)}. A plain version of the request: "
                    f"{base or plan.situation.prompt}\nWrite it in their own words "
                    f"(version {plan.phrasing + 1})."
                ),
            },
        ]
        assert self.writer.backend is not None
        try:
            text = (await self.writer.backend.complete(messages, None, self._sampling(plan))).text
        except Exception as exc:
            self.warnings.append(
                f"writer {label} failed on {plan.scenario_id} ({exc}); the template prompt was kept"
            )
            return plan
        if not text.strip():
            self.warnings.append(
                f"writer {label} wrote nothing for {plan.scenario_id}; the template prompt was kept"
            )
            return plan
        return attrs.evolve(
            plan,
            situation=attrs.evolve(plan.situation, prompt=text.strip(), writer_model=label),
        )

    async def write_whole(self, plan: PlannedSituation) -> PlannedSituation | Skipped:
        """The whole situation, written under the world's schema from its facts, checked by
        the world; retried with the world's reason, then skipped."""
        world = self.world
        assert isinstance(world, WritesSituations) and self.writer.backend is not None
        situation_seed = plan.seed if plan.seed is not None else derive_seed(self.seed, plan.index)
        facts = world.situation_facts(plan.spec, random.Random(situation_seed))
        schema = world.situation_schema()
        messages: list[dict[str, Any]] = [
            {
                "role": "system",
                "content": (
                    f"{self.writer_prompt}\nWrite the whole situation as one JSON object that "
                    "matches the schema, using only the facts given; reply with the JSON only."
                ),
            },
            {
                "role": "user",
                "content": json.dumps(
                    {"situation": plan.spec, "facts": facts, "schema": schema},
                    ensure_ascii=False,
                    default=str,
                ),
            },
        ]
        reason = ""
        for attempt in range(self.knobs.writer_retries + 1):
            text = ""
            try:
                reply = await self.writer.backend.complete(
                    messages,
                    None,
                    self._sampling(plan, attempt),
                    response_format={"type": "json_object"},
                )
                text = reply.text
                situation = world.situation_from_written(plan.spec, facts, _json_object(text))
            except (ValueError, TypeError, KeyError) as exc:
                reason = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
                messages = [
                    *messages,
                    {"role": "assistant", "content": text},
                    {
                        "role": "user",
                        "content": f"That does not fit the world: {reason}. Write it again.",
                    },
                ]
                continue
            except Exception as exc:  # the backend failed for good: no point in asking again
                reason = f"the writer failed: {type(exc).__name__}: {exc}"
                break
            return attrs.evolve(
                plan,
                situation=attrs.evolve(
                    situation,
                    situation_id=plan.situation.situation_id,
                    writer_model=self.writer.label,
                ),
            )
        tries = self.knobs.writer_retries + 1
        return Skipped(
            plan.index, f"writer: no consistent situation in {counted(tries, 'try')} ({reason})"
        )


def _json_object(text: str) -> dict[str, Any]:
    """The JSON object a reply holds (a fenced block or surrounding prose allowed)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the reply holds no JSON object")
    try:
        value = json.loads(text[start : end + 1])
    except ValueError as exc:
        raise ValueError(f"the reply is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("the reply is not a JSON object")
    return value
