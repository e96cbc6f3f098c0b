"""Engine overhead: 2,000 single-turn rollouts through simulate() against 2,000 samples through
Inspect AI, both with an instant model and a trivial grader, both writing their output.

    python3 dev.py bench bench_engine_overhead            # 2,000 rollouts each
    python3 dev.py bench bench_engine_overhead --quick    # 200 each

whileai: an in-process backend that answers at once (registered through the real backend
hook), a one-prompt world with no tools, an exact-match judge, and ``output=`` a JSONL file.
Inspect AI: its ``mockllm/model`` and the ``match()`` scorer over 2,000 samples, writing its
log, on the setting its maintainers documented for many samples that cost no inference
(``log_realtime=False``: no live-view event database; the log is still written every ten
samples). A labelled line also gives Inspect on its defaults, which are slower and so flatter
whileai. Both must grade every sample a pass before the ratio is printed. Inspect's token counter
fetches a tiktoken file at run time, so ``tiktoken.get_encoding`` is patched to a whitespace
splitter (which only makes Inspect faster).

A timed run ends when the engine has written its output: each side's grades are read and
checked after the clock stops (Inspect's log holds its samples in memory; whileai's rows are
read back from its file), and the bare ceilings are timed on rows (or their texts) already in
memory.

The headline is five pairs of runs, each run in a fresh interpreter of its own (one warm-up
run, then the timed one), the two engines taking turns (whileai first in the first pair, Inspect
AI first in the next, and so on): the ratio printed is the median of the five pairs' ratios,
with their range. Both engines' rates drift by a fifth or more between minutes on a shared
machine, so runs of the two sides timed minutes apart give a ratio that moves with the drift;
runs side by side in time share it. The other lines are each the median of five timed runs in
one process a side. Each engine always runs in an interpreter of its own: in one process, each
would pay for the other's objects in every full garbage collection (Inspect AI's imports hold
some 220,000 objects, whileai's 85,000).

Four more lines, each labelled: RL steps, the same rollouts as calls of 256 (a training loop
calls the engine once a step: each call writes its own output, on both sides, and the line
prints whileai's fixed cost per call); whileai keeping its rows in memory only (no file; not
like for like, for information); the shop world multi-turn with tools and faults, writing its
rows, against the bare ceiling the issue states, building and writing each of those same rows
(the row built by ``orjson.loads`` from its text, the fastest way to build it measured here:
21 us a 4.9 KB row against 31 us for a Python copy of its dicts and lists and 93 us for
``copy.deepcopy``; then ``json.dumps`` and a flushed write, nothing else). Two labelled lines
give stricter ceilings that leave the build out: writing the rows already built, with
``json.dumps`` and with orjson (the encoder whileai writes its lines with). Last, that shop run
against Inspect AI samples that call a tool (its mockllm asks for the tool until the tool
answers, the tool failing one call in five, on the same setting), both writing their output.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Timing, ratio_line, timed

import whileai as wai
from whileai import hookimpl
from whileai.backends import Completion, Sampling
from whileai.registry import Registry
from whileai.scoring import Verdict
from whileai.worlds import FaultPlan, Situation, ToolResult

#: What Inspect's mockllm/model answers; the whileai backend answers the same.
MOCK_OUTPUT = "Default output from mockllm/model"


class InstantBackend:
    name = "instant"

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        return Completion(
            text=MOCK_OUTPUT,
            model="instant",
            sampling={"temperature": None, "max_tokens": None, "model": "instant"},
            input_tokens=len(messages),
            output_tokens=5,
        )


class EchoEpisode:
    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(None, error=f"no tool {name}")

    def state(self) -> dict[str, Any]:
        return {}

    def faults(self) -> list[dict[str, Any]]:
        return []

    def check(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> Verdict:
        return Verdict(1.0 if final_text == MOCK_OUTPUT else 0.0)


class QuestionWorld:
    name = "questions"
    version = "1"
    default_fault_rate = 0.0

    def tools(self) -> list[dict[str, Any]]:
        return []

    def dimensions(self) -> dict[str, list[Any]]:
        return {"topic": ["a", "b", "c", "d"]}

    def template_situation(
        self, spec: Mapping[str, Any], rng: random.Random, phrasing: int = 0
    ) -> Situation:
        return Situation(situation_id=f"q{rng.random()}", prompt=f"Question on {spec['topic']}?")

    def new_episode(
        self, situation: Situation, rng: random.Random, fault_plan: FaultPlan | None = None
    ) -> EchoEpisode:
        return EchoEpisode()


class BenchPlugin:
    @hookimpl
    def whileai_register_backends(self, register: Any) -> None:
        register("instant", lambda argument=None, **options: InstantBackend())

    @hookimpl
    def whileai_register_worlds(self, register: Any) -> None:
        register("questions", QuestionWorld)


def exact(prompt: str, completion: str) -> float:
    return 1.0 if completion == MOCK_OUTPUT else 0.0


def run_whileai(n: int, output: str | None = None, registry: Registry | None = None) -> Any:
    """``n`` single-turn rollouts, one situation each. ``registry``: the one a loop of runs
    builds once and passes to each (a registry of its own when not given)."""
    return wai.simulate(
        registry=registry if registry is not None else Registry.from_plugins(BenchPlugin()),
        agent_model="instant",
        user_model="instant",
        simulator="template",
        unique_situations=n,
        rollouts_per_request=1,
        max_turns=1,
        judge=exact,
        output=output,
        advanced={"world": "questions", "max_concurrency": 256},
    )


def rewards(data: Any) -> list[float]:
    """Each row's reward, read once the timed run is over (on both sides: a finished Inspect
    log holds its samples in memory, a finished whileai run streamed its rows to disk)."""
    return [r["reward"] for r in data.rows]


class ShopDoubles:
    """The shop run's agent and user: a scripted agent that does the job right and a user
    pleased by any answer, keeping no copy of what it was sent (as no real backend does)."""

    @hookimpl
    def whileai_register_backends(self, register: Any) -> None:
        from whileai.testing import PleasedUser
        from whileai_worlds.testing import ScriptedSupportAgent

        register("support", lambda argument=None, **_: ScriptedSupportAgent())
        register(
            "customer", lambda argument=None, **_: PleasedUser("customer:pleased", record=False)
        )


def shop_registry() -> Registry:
    """The installed plugins (the shop world among them) and the shop doubles, loaded once
    and passed to every shop run, as a loop of runs does (docs/parameters.md, ``registry``):
    reading every installed package's entry points is a cost of the process, not of a run."""
    return Registry.load(plugins=[ShopDoubles()])


def run_shop(n: int, output: str, registry: Registry) -> Any:
    """The shop world, multi-turn, with tools and faults, writing its rows."""
    return wai.simulate(
        registry=registry,
        agent_model="support:scripted",
        user_model="customer:pleased",
        simulator="template",
        unique=n // 4,
        repeats=4,
        hard_share=0.5,
        fault_rate=0.2,
        seed=3,
        output=output,
        advanced={"max_concurrency": 256},
    )


def write_bare(rows: list[dict[str, Any]], path: str) -> int:
    """A stricter ceiling than the target's, for a labelled line: each row, already built,
    serialised and written, flushed, as a run writes it."""
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            f.flush()
    return len(rows)


def build_and_write_bare(texts: list[bytes], path: str) -> int:
    """The ceiling the target is stated against: each row built (``orjson.loads`` of its
    text, the fastest build measured) and written as :func:`write_bare` writes it."""
    with open(path, "w", encoding="utf-8") as f:
        for text in texts:
            row = orjson.loads(text)
            f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            f.flush()
    return len(texts)


def write_bare_orjson(rows: list[dict[str, Any]], path: str) -> int:
    """:func:`write_bare` with the encoder whileai writes its lines with (orjson), for a
    labelled line: the target's ceiling writes with the standard library's encoder."""
    with open(path, "wb") as f:
        for row in rows:
            f.write(orjson.dumps(row, default=str, option=orjson.OPT_APPEND_NEWLINE))
            f.flush()
    return len(rows)


def patch_tiktoken() -> None:
    import tiktoken

    class Whitespace:
        def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
            return [0] * len(text.split())

    tiktoken.get_encoding = lambda *args, **kwargs: Whitespace()  # type: ignore[assignment]
    tiktoken.encoding_for_model = lambda *args, **kwargs: Whitespace()  # type: ignore[assignment]


def pass_values(log: Any) -> list[float]:
    """Each sample's score in an Inspect log as whileai reads a reward: 1.0 for correct."""
    assert log.samples is not None
    values = []
    for sample in log.samples:
        assert sample.scores is not None
        score = next(iter(sample.scores.values()))
        values.append(1.0 if score.value == "C" else 0.0)
    return values


#: Inspect AI's documented setting for many samples that cost no inference: live-view event
#: logging off (its maintainers added the switch for exactly this workload, where the realtime
#: event database dominates). The log is still written, every ``log_buffer`` samples (10).
BEST = {"log_realtime": False}


def run_inspect(n: int, log_dir: str, **options: Any) -> Any:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    samples = [Sample(input=f"Question {i}?", target=MOCK_OUTPUT) for i in range(n)]
    task = Task(dataset=samples, solver=generate(), scorer=match())
    (log,) = inspect_eval(
        task,
        model="mockllm/model",
        log_dir=log_dir,
        display="none",
        max_connections=256,
        max_samples=256,
        **options,
    )
    return log


def run_inspect_tools(n: int, log_dir: str) -> Any:
    """Inspect AI with a tool: its mockllm asks for ``lookup_order`` until it has the tool's
    answer, then answers; the tool fails one call in five (a ToolError the model sees), as
    the shop's faults do. Writes its log."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageTool, ModelOutput, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import ToolError, tool

    @tool
    def lookup_order():  # type: ignore[no-untyped-def]
        async def execute(order_id: str) -> str:
            """Look up an order by its id.

            Args:
                order_id: The order's id.
            """
            if random.random() < 0.2:
                raise ToolError("timeout: the order service did not answer")
            return json.dumps({"order_id": order_id, "status": "delivered", "total": 42.0})

        return execute

    def answer(messages: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> Any:
        last = messages[-1]
        if isinstance(last, ChatMessageTool) and last.error is None:
            return ModelOutput.from_content(model="mockllm", content=MOCK_OUTPUT)
        return ModelOutput.for_tool_call("mockllm", "lookup_order", {"order_id": "A1001"})

    model = get_model("mockllm/model", custom_outputs=answer, memoize=False)
    samples = [
        Sample(input=f"Where is my order A1001? ({i})", target=MOCK_OUTPUT) for i in range(n)
    ]
    task = Task(dataset=samples, solver=[use_tools(lookup_order()), generate()], scorer=match())
    (log,) = inspect_eval(
        task,
        model=model,
        log_dir=log_dir,
        display="none",
        max_connections=256,
        max_samples=256,
        **BEST,
    )
    return log


#: Timed runs per line, the median reported: one 2,000-rollout whileai run lasts under half a
#: second, where one pause of the machine moves its rate by a fifth (five, not three: the
#: median of five still holds when two runs of a line meet such a pause)
TRIALS = 5


def median_of(label: str, fn: Callable[[int], Any]) -> Timing:
    """``fn(trial)`` timed TRIALS times: the median run (its result with it)."""
    runs = sorted((timed(label, partial(fn, t)) for t in range(TRIALS)), key=lambda r: r.seconds)
    return runs[len(runs) // 2]


#: The rollouts of one RL step: a training loop calls the engine once a step, so each call's
#: fixed costs (opening and closing its output, its report) are paid every few hundred rollouts
STEP = 256


def rl_steps(n: int) -> tuple[int, int]:
    """How many calls, and of how many rollouts each, the labelled RL-step line makes."""
    size = min(STEP, n)
    return max(1, n // (2 * size)), size


def whileai_single(n: int, scratch: str) -> dict[str, Any]:
    """One timed single-turn run of whileai writing its rows, after a warm-up (imports, plugin
    hooks), in a process of its own: one half of a headline pair."""
    run_whileai(20, f"{scratch}/warm.jsonl")
    run = timed("whileai", lambda: run_whileai(n, f"{scratch}/rows.jsonl"))
    graded = rewards(run.result)
    assert len(graded) == n and all(r == 1.0 for r in graded), "whileai graded a rollout a fail"
    written = len(Path(f"{scratch}/rows.jsonl").read_text(encoding="utf-8").splitlines())
    assert written == n, f"whileai wrote {written} rows of {n}"
    return {"rate": run.rate(n), "seconds": run.seconds}


def inspect_single(n: int, scratch: str) -> dict[str, Any]:
    """One timed run of Inspect AI's plain samples writing its log, after a warm-up, in a
    process of its own: the other half of a headline pair."""
    patch_tiktoken()
    run_inspect(20, f"{scratch}/warm-logs", **BEST)
    run = timed("inspect", lambda: run_inspect(n, f"{scratch}/logs", **BEST))
    graded = pass_values(run.result)
    assert len(graded) == n and all(r == 1.0 for r in graded), "Inspect graded a sample a fail"
    return {"rate": run.rate(n), "seconds": run.seconds}


def headline_pairs(n: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """TRIALS pairs of (whileai, Inspect AI) single runs, each in a fresh process, the two
    taking turns at going first, so that a drift of the machine falls on both alike."""
    pairs = []
    for t in range(TRIALS):
        order = ("whileai-single", "inspect-single")
        got = {side: run_side(side, n) for side in (order if t % 2 == 0 else order[::-1])}
        pairs.append((got["whileai-single"], got["inspect-single"]))
    return pairs


def whileai_side(n: int, scratch: str) -> dict[str, Any]:
    """whileai's timed runs for the labelled lines, in a process of its own: single-turn writing
    its rows (beside the RL steps, for the fixed cost of a call), the same in memory, the RL
    steps, the shop run and the bare ceilings of its rows."""
    # warm up once (imports, plugin hooks) so the timed runs measure the engine
    run_whileai(20, f"{scratch}/warm.jsonl")
    ours = median_of("whileai", lambda t: run_whileai(n, f"{scratch}/rows-{t}.jsonl"))
    memory = median_of("whileai in memory", lambda t: run_whileai(n))
    graded = rewards(ours.result)
    assert len(graded) == len(rewards(memory.result)) == n
    assert all(r == 1.0 for r in graded), "whileai graded a rollout a fail"
    written = len(Path(f"{scratch}/rows-0.jsonl").read_text(encoding="utf-8").splitlines())
    assert written == n, f"whileai wrote {written} rows of {n}"
    steps, size = rl_steps(n)
    # a training loop builds its registry once and passes it to every step's call
    # (docs/parameters.md, ``registry``), as Inspect AI keeps its own for the process
    looped = Registry.from_plugins(BenchPlugin())
    stepped = median_of(
        "whileai steps",
        lambda t: [
            run_whileai(size, f"{scratch}/step-{t}-{i}.jsonl", looped) for i in range(steps)
        ],
    )
    assert all(r == 1.0 for data in stepped.result for r in rewards(data))
    registry = shop_registry()
    run_shop(40, f"{scratch}/shop-warm.jsonl", registry)
    shop = median_of("shop", lambda t: run_shop(n, f"{scratch}/shop-{t}.jsonl", registry))
    rows = list(shop.result.rows)
    # (the scripted agent trips over a malformed payload now and then: those rows say so in
    # error, and are rows all the same)
    assert len(rows) == n, f"the shop run wrote {len(rows)} rows of {n}"
    # what the build starts from, made before the clock starts
    texts = [orjson.dumps(row) for row in rows]
    built = median_of(
        "bare build and write",
        lambda t: build_and_write_bare(texts, f"{scratch}/bare-b-{t}.jsonl"),
    )
    bare = median_of("bare write", lambda t: write_bare(rows, f"{scratch}/bare-{t}.jsonl"))
    bare_orjson = median_of(
        "bare orjson write", lambda t: write_bare_orjson(rows, f"{scratch}/bare-o-{t}.jsonl")
    )
    return {
        "single": ours.rate(n),
        "memory": memory.rate(n),
        "steps": stepped.rate(steps * size),
        "shop": shop.rate(n),
        "built": built.rate(n),
        "bare": bare.rate(n),
        "bare_orjson": bare_orjson.rate(n),
    }


def inspect_side(n: int, scratch: str) -> dict[str, Any]:
    """Inspect AI's timed runs for the labelled lines, in a process of its own: plain samples
    on its defaults, RL steps, and tool-using samples."""
    patch_tiktoken()
    run_inspect(20, f"{scratch}/warm-logs", **BEST)
    default = median_of("inspect default", lambda t: run_inspect(n, f"{scratch}/default-{t}"))
    graded = pass_values(default.result)
    assert len(graded) == n and all(r == 1.0 for r in graded), "Inspect graded a sample a fail"
    steps, size = rl_steps(n)
    stepped = median_of(
        "inspect steps",
        lambda t: [run_inspect(size, f"{scratch}/step-{t}-{i}", **BEST) for i in range(steps)],
    )
    assert all(r == 1.0 for log in stepped.result for r in pass_values(log))
    run_inspect_tools(20, f"{scratch}/tools-warm-logs")
    tools = median_of("inspect tools", lambda t: run_inspect_tools(n, f"{scratch}/tools-{t}"))
    answered = pass_values(tools.result)
    assert len(answered) == n and all(r == 1.0 for r in answered), (
        "Inspect's tool-using samples did not all end with the answer"
    )
    return {
        "default": default.rate(n),
        "steps": stepped.rate(steps * size),
        "tools": tools.rate(n),
    }


SIDES = {
    "whileai": whileai_side,
    "inspect": inspect_side,
    "whileai-single": whileai_single,
    "inspect-single": inspect_single,
}


def run_side(side: str, n: int) -> dict[str, Any]:
    """One side's figures, from a fresh interpreter: neither engine pays for the other's
    imports and objects (a full garbage collection walks every object in the process, and
    Inspect AI's imports hold four times whileai's)."""
    done = subprocess.run(
        [sys.executable, __file__, "--side", side, "-n", str(n)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the {side} side failed:\n{done.stderr[-4000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def headline(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    """The median of the pairs' ratios against the target, each side's median rate, and the
    ratios' range: the line and its figures, printed."""
    ratios = sorted(w["rate"] / i["rate"] for w, i in pairs)
    ratio = median(ratios)
    ours, peer = median([w["rate"] for w, _ in pairs]), median([i["rate"] for _, i in pairs])
    return (
        f"rollouts: whileai {ours:,.1f}/s  Inspect AI {peer:,.1f}/s (medians)  ratio "
        f"{ratio:.2f}x, the median of the pairs' ratios  (target >= 100x: "
        f"{'met' if ratio >= 100 else 'NOT met'})\n"
        f"   (the {TRIALS} pairs, whileai/s : Inspect AI/s = ratio: "
        + ", ".join(
            f"{w['rate']:,.0f} : {i['rate']:,.1f} = {w['rate'] / i['rate']:.1f}x" for w, i in pairs
        )
        + f"; range {ratios[0]:.2f}-{ratios[-1]:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--side", choices=sorted(SIDES), help=argparse.SUPPRESS)
    parser.add_argument("-n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.n or (200 if args.quick else 2000)
    if args.side:
        with tempfile.TemporaryDirectory() as scratch:
            print(json.dumps(SIDES[args.side](n, scratch)))
        return
    # one process after the other, never two at once on a 2-core machine
    pairs = headline_pairs(n)
    ours, peer = run_side("whileai", n), run_side("inspect", n)
    print(
        f"{n} single-turn rollouts, both writing their output, {TRIALS} pairs of runs taking "
        "turns, each run in a process of its own (Inspect AI on log_realtime=False, its "
        "setting for many samples that cost no inference)"
    )
    print(headline(pairs))

    print(
        "   (flatters whileai: Inspect AI on its defaults, live-view event logging on) "
        + ratio_line("rollouts", ours["single"], peer["default"], "Inspect AI (defaults)")
    )
    steps, size = rl_steps(n)
    per_call_ms = (size / ours["steps"] - size / ours["single"]) * 1000
    print(
        f"   (RL steps, like for like: {steps} calls of {size} rollouts, each writing its own "
        f"output, against {steps} Inspect AI evals of {size} samples; whileai's fixed cost per "
        f"call, beyond its rollouts' share of the {n}-rollout run: {per_call_ms:.1f} ms) "
        + ratio_line("rollouts", ours["steps"], peer["steps"], "Inspect AI")
    )
    print(
        "   (information, not like for like: whileai writing no file) "
        + ratio_line(
            "rollouts",
            ours["memory"],
            median([i["rate"] for _, i in pairs]),
            "Inspect AI (writing)",
        )
    )
    print(
        f"shop world, multi-turn with tools and faults, {n} rollouts writing output=: whileai "
        f"{ours['shop']:,.0f}/s; the bare ceiling of building and writing the same rows: "
        f"{ours['built']:,.0f}/s"
    )
    print(
        "   "
        + ratio_line(
            "shop rollouts vs the bare build and write",
            ours["shop"],
            ours["built"],
            "orjson.loads + json.dumps + flushed write",
            target=0.25,
        )
    )
    print(
        "   (a stricter ceiling, the build left out: the rows already built, written) "
        + ratio_line(
            "shop rollouts vs the bare write",
            ours["shop"],
            ours["bare"],
            "json.dumps + flushed write",
        )
    )
    print(
        "   (stricter still: the rows already built, written by orjson, the encoder "
        "whileai writes its lines with) "
        + ratio_line(
            "shop rollouts vs the bare orjson write",
            ours["shop"],
            ours["bare_orjson"],
            "orjson.dumps + flushed write",
        )
    )
    print(
        "   (tools, not turn for turn: Inspect's samples are one user message, a tool call "
        "that fails one time in five and is retried, and an answer; the shop's rollouts "
        "also play the user) "
        + ratio_line(
            "shop rollouts vs Inspect AI samples with a tool",
            ours["shop"],
            peer["tools"],
            "Inspect AI (writing)",
        )
    )


if __name__ == "__main__":
    main()
