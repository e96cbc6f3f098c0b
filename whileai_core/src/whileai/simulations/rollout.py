"""One rollout: the agent answers under the system prompt, calls the world's tools, and the
simulated user follows up until it is satisfied, gives up, or the turn limit is hit.

The result is a trajectory: the full row in memory, privileged block included (the judge reads
it); ``export_row`` makes the version that may leave memory. A backend failure after its
retries, or a tool that raises, ends the rollout with ``error`` recorded on its row, never the
run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from whileai.backends import Backend, BackendError, Completion, Sampling
from whileai.executors import Job, RolloutSettings, job_lineage, job_task, unfinished_row
from whileai.schema.export import step_messages
from whileai.schema.jsonline import STDLIB
from whileai.schema.records import Judgment, Rollout, to_row
from whileai.seeds import SeededOnFirstDraw
from whileai.signatures import accepts
from whileai.simulations import episode_life
from whileai.simulations.behavior import behavior_signature
from whileai.worlds import Episode, Situation, World

SATISFIED_TAG = "[DONE]"
GAVE_UP_TAG = "[GIVE UP]"


@attrs.frozen
class Models:
    """The backends of one run and what each is called on a row."""

    agent: Backend
    user: Backend
    agent_label: str
    user_label: str
    #: the agent is the user's own callable: its row sampling is what they passed (or None)
    agent_is_callable: bool = False


@attrs.frozen(kw_only=True)
class RolloutContext(RolloutSettings):
    """Everything a rollout needs that is the same for the whole run: the plain settings a
    worker receives, plus the live world and models it builds from them."""

    world: World
    models: Models


@attrs.define
class _Tally:
    input_tokens: int = 0
    output_tokens: int = 0
    user_input_tokens: int = 0
    user_output_tokens: int = 0
    cached_input_tokens: int = 0
    user_cached_input_tokens: int = 0
    retries: int = 0
    waited_s: float = 0.0
    logprob: float = 0.0
    n_tokens: int = 0
    logprobs_seen: int = 0
    truncated: bool = False
    model: str | None = None
    sampling: Mapping[str, Any] | None = None


def _seeded(base: Sampling, seed: int) -> Sampling:
    return base if base.seed is not None else base.with_seed(seed)


def _assistant_step(c: Completion, ctx: RolloutContext) -> dict[str, Any]:
    step: dict[str, Any] = {"role": "assistant", "content": c.text}
    if c.tool_calls:
        step["tool_calls"] = [
            {"id": t.id, "name": t.name, "arguments": dict(t.arguments)} for t in c.tool_calls
        ]
    step["input_tokens"] = c.input_tokens
    step["output_tokens"] = c.output_tokens
    if ctx.logprobs:
        step["logprob"] = c.logprob
        step["n_tokens"] = c.n_tokens
        step["truncated"] = c.truncated
    elif c.truncated:
        step["truncated"] = True
    if c.retries:
        step["retries"] = c.retries
    return step


def _count(tally: _Tally, c: Completion, *, user: bool) -> None:
    tally.retries += c.retries
    tally.waited_s += c.waited_s
    if user:
        tally.user_input_tokens += c.input_tokens or 0
        tally.user_output_tokens += c.output_tokens or 0
        tally.user_cached_input_tokens += c.cached_input_tokens or 0
        return
    tally.input_tokens += c.input_tokens or 0
    tally.cached_input_tokens += c.cached_input_tokens or 0
    tally.output_tokens += c.output_tokens or 0
    tally.truncated = tally.truncated or c.truncated
    if c.logprob is not None:
        tally.logprob += c.logprob
        tally.n_tokens += c.n_tokens or 0
        tally.logprobs_seen += 1
    if tally.model is None:
        tally.model = c.model
        tally.sampling = dict(c.sampling) if c.sampling is not None else None


#: json.dumps(..., ensure_ascii=False), built once: a tool's answer is written on every call
_TOOL_CONTENT = json.JSONEncoder(ensure_ascii=False)


def _tool_content(content: Any) -> str:
    return content if isinstance(content, str) else _TOOL_CONTENT.encode(content)


async def _call_tool(episode: Episode, name: str, call: Any, step: int) -> tuple[str, str | None]:
    """The tool message content for one call, and the fault kind that fired (if any).

    ``step`` is the index the tool's step will have in ``row["steps"]``; an episode whose
    ``call`` takes it records its faults there, so ``row["faults"][i]["step"]`` points at the
    step the fault answered."""
    if call.raw_arguments is not None:
        error = {"error": "invalid_arguments", "message": "arguments were not valid JSON"}
        return json.dumps(error), None
    where = {"step": step} if accepts(episode.call, "step") else {}
    try:
        result = await episode_life.call(episode, name, dict(call.arguments), **where)
    except Exception as exc:
        raise ToolRaised(f"tool {name!r} raised {type(exc).__name__}: {exc}") from exc
    content = result.content
    if result.error is not None and not (isinstance(content, Mapping) and "error" in content):
        content = {"error": result.error, "content": content}
    return _tool_content(content), result.fault


class ToolRaised(RuntimeError):
    """A world tool raised instead of returning an error result."""


class BranchDiverged(RuntimeError):
    """A replayed step did not come out as recorded: the branch would not be exact."""


@attrs.frozen
class _Recorded:
    """A recorded tool call, shaped as the agent's completion gave it."""

    id: str
    name: str
    arguments: Mapping[str, Any]
    raw_arguments: str | None = None


@attrs.frozen
class _Replayed:
    #: the turn the agent is in, the tool round within it, its last answer so far
    turn: int
    round: int
    text: str
    tool_calls: int
    user_spoke: bool


#: Tool answers the engine gave without calling the world: replayed as recorded.
_ENGINE_ANSWERS = ("tool_budget", "invalid_arguments")


async def _replay(
    prefix: Sequence[Mapping[str, Any]],
    ctx: RolloutContext,
    episode: Episode,
    messages: list[dict[str, Any]],
    steps: list[dict[str, Any]],
) -> _Replayed:
    """Play a branch's recorded steps again: the agent's and the user's as written, every tool
    call sent to the world once more, its answer and fault checked against the recording."""
    calls: dict[str, _Recorded] = {}
    turn = round_ = tool_calls = 0
    text = ""
    user_spoke = False
    for step in prefix:
        role = step.get("role")
        if role == "assistant":
            for call in step.get("tool_calls") or ():
                recorded = _Recorded(str(call["id"]), str(call["name"]), dict(call["arguments"]))
                calls[recorded.id] = recorded
            if step.get("content") and not step.get("tool_calls"):
                text = str(step["content"])
            round_ += 1
            recorded_step = dict(step)
        elif role == "tool":
            recorded_call = calls.get(str(step.get("tool_call_id")))
            if recorded_call is None:
                raise BranchDiverged(
                    f"step {len(steps)} answers tool call {step.get('tool_call_id')!r}, which no "
                    "earlier step made"
                )
            given = json.loads(step["content"]) if _engine_answer(step) else None
            if given is not None:
                content, fault = step["content"], None
                tool_calls += given.get("error") == "invalid_arguments"
            else:
                tool_calls += 1
                content, fault = await _call_tool(
                    episode, recorded_call.name, recorded_call, len(steps)
                )
            if content != step.get("content") or fault != step.get("fault"):
                raise BranchDiverged(
                    f"step {len(steps)} ({recorded_call.name}) came out otherwise than "
                    f"recorded: answered {content[:120]!r} with fault {fault!r}, recorded "
                    f"{str(step.get('content'))[:120]!r} with fault {step.get('fault')!r}; the "
                    "world (or its fault plan) is not the one the trajectory was recorded in"
                )
            recorded_step = dict(step)
        elif role == "user":
            turn += 1
            round_ = 0
            user_spoke = True
            recorded_step = dict(step)
        else:
            raise BranchDiverged(f"step {len(steps)} has role {role!r}, which a rollout never has")
        steps.append(recorded_step)
        messages.extend(step_messages([recorded_step]))
    # the recorded assistant steps of the current turn used its rounds; the agent is asked
    # for the decision the prefix stops before, so the round it is in is the next one
    return _Replayed(turn, round_, text, tool_calls, user_spoke)


def _engine_answer(step: Mapping[str, Any]) -> bool:
    content = step.get("content")
    if not isinstance(content, str) or not content.startswith('{"error": '):
        return False
    try:
        answer = json.loads(content)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("error") in _ENGINE_ANSWERS and len(answer) == 2


def _user_messages(
    ctx: RolloutContext, situation: Situation, prompt: str, steps: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    persona = ctx.user_persona or situation.persona
    known = STDLIB.encode(dict(situation.hidden_state))
    known = known[: ctx.user_context_chars]
    system = ctx.user_prompt.format(
        persona=persona, request=prompt, known=known, done=SATISFIED_TAG, give_up=GAVE_UP_TAG
    )
    # The simulated user sees the chat from its side: its own words are the assistant's.
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "assistant", "content": prompt},
    ]
    for step in steps:
        if step["role"] == "assistant" and step.get("content"):
            messages.append({"role": "user", "content": step["content"]})
        elif step["role"] == "user":
            messages.append({"role": "assistant", "content": step["content"]})
    return messages


async def _agent_turn(
    ctx: RolloutContext,
    messages: list[dict[str, Any]],
    steps: list[dict[str, Any]],
    episode: Episode,
    tally: _Tally,
    tools: list[dict[str, Any]],
    sampling: Sampling,
    tool_calls_left: int,
    first_round: int = 0,
) -> tuple[str, int]:
    """The agent's answer to the chat so far, with its tool rounds (from ``first_round``, when
    a branch resumes a turn mid-way). Returns the answer and the tool calls it has left."""
    for round_ in range(first_round, ctx.max_tool_rounds + 1):
        may_call = bool(tools) and tool_calls_left > 0 and round_ < ctx.max_tool_rounds
        completion = await ctx.models.agent.complete(
            messages, tools if may_call else None, sampling, logprobs=ctx.logprobs
        )
        _count(tally, completion, user=False)
        step = _assistant_step(completion, ctx)
        steps.append(step)
        messages.extend(step_messages([step]))
        calls = completion.tool_calls if may_call else ()
        if not calls:
            return completion.text, tool_calls_left
        for call in calls:
            if tool_calls_left <= 0:
                content, fault = (
                    json.dumps({"error": "tool_budget", "message": "no tool calls left"}),
                    None,
                )
            else:
                tool_calls_left -= 1
                content, fault = await _call_tool(episode, call.name, call, len(steps))
            tool_step: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": call.id,
                "name": call.name,
                "content": content,
            }
            if fault is not None:
                tool_step["fault"] = fault
            steps.append(tool_step)
            messages.extend(step_messages([tool_step]))
    return "", tool_calls_left  # pragma: no cover - the last round never offers tools


async def run_rollout(job: Job, ctx: RolloutContext) -> tuple[dict[str, Any], Episode | None]:
    """Play one rollout to its end; its trajectory (ungraded, privileged kept) and the
    episode, whose checks grade it (None when the world could not start one)."""
    situation = job.situation
    # a branch's world draws from the seed of the rollout it branches, so its replayed calls
    # meet the same state and the same faults; its agent samples from its own seed
    # (seeded when the episode first draws: most never do)
    rng = SeededOnFirstDraw(job.episode_seed if job.episode_seed is not None else job.seed)
    episode: Episode | None = None
    try:
        episode = ctx.world.new_episode(situation, rng, ctx.fault_plan)
        await episode_life.start(episode)
        tools = episode_life.tools(episode, ctx.world)
    except Exception as exc:
        # a situation the world cannot set up, or a live service that did not start or listed
        # no tools, fails its rollout only
        await episode_life.close(episode)
        failure = (
            f"world {ctx.world.name!r} could not start an episode: {type(exc).__name__}: {exc}"
        )
        return failed_row(job, ctx, failure), None
    try:
        return await _play(job, ctx, episode, tools), episode
    except BaseException:
        # cancelled or broken mid-rollout: a live service behind the episode must not outlive it
        await episode_life.close(episode)
        raise


async def _play(
    job: Job, ctx: RolloutContext, episode: Episode, tools: list[dict[str, Any]]
) -> dict[str, Any]:
    """The conversation of one started episode, to its trajectory."""
    situation = job.situation
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": ctx.system_prompt},
        {"role": "user", "content": situation.prompt},
    ]
    steps: list[dict[str, Any]] = []
    tally = _Tally()
    agent_sampling = _seeded(ctx.agent_sampling, job.seed)
    user_sampling: Sampling | None = None  # made when the user first speaks
    patience = ctx.user_patience if ctx.user_patience is not None else situation.patience
    final_text = ""
    error: str | None = None
    stop_reason = "turn_limit"
    user_spoke = False
    tool_calls_left = ctx.max_tool_calls
    start_turn = first_round = 0
    try:
        if job.prefix:
            replayed = await _replay(job.prefix, ctx, episode, messages, steps)
            start_turn, first_round, final_text = replayed.turn, replayed.round, replayed.text
            tool_calls_left -= replayed.tool_calls
            user_spoke = replayed.user_spoke
        for turn in range(start_turn, ctx.max_turns):
            text, tool_calls_left = await _agent_turn(
                ctx,
                messages,
                steps,
                episode,
                tally,
                tools,
                agent_sampling,
                tool_calls_left,
                first_round if turn == start_turn else 0,
            )
            if text.strip():
                final_text = text
            if turn == ctx.max_turns - 1:
                stop_reason = "turn_limit" if ctx.max_turns > 1 else "single_message"
                break
            if turn >= patience:
                stop_reason = "gave_up"
                break
            if user_sampling is None:
                user_sampling = _seeded(ctx.user_sampling, job.seed + 1)
            reply = await ctx.models.user.complete(
                _user_messages(ctx, situation, situation.prompt, steps), None, user_sampling
            )
            _count(tally, reply, user=True)
            user_spoke = True
            said = reply.text.strip()
            done = SATISFIED_TAG in said
            gave_up = GAVE_UP_TAG in said
            content = said.replace(SATISFIED_TAG, "").replace(GAVE_UP_TAG, "").strip()
            user_step = {
                "role": "user",
                "content": content,
                # what the markers' gave_up reads: how the simulated user left this turn
                "user_status": "satisfied" if done else "gave_up" if gave_up else "continue",
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
            }
            steps.append(user_step)
            messages.extend(step_messages([user_step]))
            if done or gave_up:
                stop_reason = "satisfied" if done else "gave_up"
                break
    except BackendError as exc:
        # the retries and waits of a call that failed for good count on the row too
        tally.retries += exc.retries
        tally.waited_s += exc.waited_s
        error = f"{type(exc).__name__}: {exc}"
        stop_reason = "error"
    except ToolRaised as exc:
        error = f"{type(exc).__name__}: {exc}"
        stop_reason = "error"
    except Exception as exc:  # the user's own agent callable, a malformed completion
        error = f"{type(exc).__name__}: {exc}"
        stop_reason = "error"
    try:
        await episode_life.finish(episode, final_text, steps)
    except Exception as exc:
        error = error or f"world {ctx.world.name!r} could not finish the episode: {exc}"
        stop_reason = "error"
    trajectory = _trajectory(
        job, ctx, episode, steps, messages, tally, final_text, error, stop_reason, user_spoke
    )
    return trajectory


def failed_row(job: Job, ctx: RolloutContext, reason: str) -> dict[str, Any]:
    """The row of a rollout that never ran its course (see ``whileai.executors.unfinished_row``;
    it reads only the context's labels and settings, never a backend)."""
    return unfinished_row(
        job,
        reason,
        run_id=ctx.run_id,
        world=ctx.world.name,
        system_prompt=ctx.system_prompt,
        system_prompt_sha=ctx.system_prompt_sha,
        system_prompt_head=ctx.system_prompt_head,
        agent_label=ctx.models.agent_label,
        agent_is_function=ctx.models.agent_is_callable,
        declared_sampling=ctx.declared_sampling,
    )


def _trajectory(
    job: Job,
    ctx: RolloutContext,
    episode: Episode | None,
    steps: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    tally: _Tally,
    final_text: str,
    error: str | None,
    stop_reason: str,
    user_spoke: bool,
) -> dict[str, Any]:
    model_version = tally.model or ctx.models.agent_label
    if ctx.models.agent_is_callable:
        sampling = dict(ctx.declared_sampling) if ctx.declared_sampling is not None else None
    else:
        sampling = dict(tally.sampling) if tally.sampling is not None else None
    lineage = job_lineage(
        job,
        run_id=ctx.run_id,
        system_prompt=ctx.system_prompt,
        system_prompt_sha=ctx.system_prompt_sha,
        system_prompt_head=ctx.system_prompt_head,
    )
    task = job_task(job)
    usage = {
        "input_tokens": tally.input_tokens,
        "output_tokens": tally.output_tokens,
        "user_input_tokens": tally.user_input_tokens,
        "user_output_tokens": tally.user_output_tokens,
        "cached_input_tokens": tally.cached_input_tokens,
        "user_cached_input_tokens": tally.user_cached_input_tokens,
        "retries": tally.retries,
        "waited_s": round(tally.waited_s, 3),
    }
    world_state: dict[str, Any] | None = None
    faults: list[dict[str, Any]] | None = None
    try:
        if episode is not None:
            world_state, faults = episode.state(), episode.faults()
    except Exception as exc:
        world_state, faults = None, None
        error = error or f"world state unreadable: {type(exc).__name__}: {exc}"
    task.behavior_signature = behavior_signature(
        {"steps": steps, "faults": faults, "stop_reason": stop_reason, "error": error}
    )
    rollout = Rollout(
        final_text=final_text,
        steps=steps,
        messages=messages,
        world_state=world_state,
        faults=faults,
        sampling=sampling,
        policy_version=f"{model_version}@{ctx.system_prompt_sha}",
        model_version=model_version,
        user_model=ctx.models.user_label if user_spoke else None,
        lineage=lineage,
        run_id=ctx.run_id,
        usage=usage,
        logprob=tally.logprob if ctx.logprobs and tally.logprobs_seen else None,
        n_tokens=tally.n_tokens if ctx.logprobs and tally.logprobs_seen else None,
        truncated=tally.truncated or None,
        error=error,
        extra={"stop_reason": stop_reason, "world": ctx.world.name},
    )
    judgment = (
        Judgment(judge_status="skipped", reason=f"rollout failed: {error}") if error else None
    )
    return to_row(task, rollout, judgment)
