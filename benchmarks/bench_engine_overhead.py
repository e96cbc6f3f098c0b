"""Engine overhead: 2,000 single-turn rollouts through simulate() against 2,000 samples through
Inspect AI, both with an instant model and a trivial grader.

    python3 dev.py bench bench_engine_overhead            # 2,000 rollouts each
    python3 dev.py bench bench_engine_overhead --quick    # 200 each

whileai: an in-process backend that answers at once (registered through the real backend
hook), a one-prompt world with no tools, and an exact-match judge. Inspect AI: its
``mockllm/model`` and the ``match()`` scorer over 2,000 samples. Both must grade every sample a
pass before the ratio is printed. Inspect's token counter fetches a tiktoken file at run time,
so ``tiktoken.get_encoding`` is patched to a whitespace splitter (which only makes Inspect
faster).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import ratio_line, timed

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


def run_whileai(n: int) -> list[float]:
    data = wai.simulate(
        registry=Registry.from_plugins(BenchPlugin()),
        agent_model="instant",
        user_model="instant",
        simulator="template",
        unique_situations=n,
        rollouts_per_request=1,
        max_turns=1,
        judge=exact,
        advanced={"world": "questions", "max_concurrency": 256},
    )
    return [r["reward"] for r in data.rows]


def patch_tiktoken() -> None:
    import tiktoken

    class Whitespace:
        def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
            return [0] * len(text.split())

    tiktoken.get_encoding = lambda *args, **kwargs: Whitespace()  # type: ignore[assignment]
    tiktoken.encoding_for_model = lambda *args, **kwargs: Whitespace()  # type: ignore[assignment]


def run_inspect(n: int, log_dir: str) -> list[float]:
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
    )
    assert log.samples is not None
    values = []
    for sample in log.samples:
        assert sample.scores is not None
        score = next(iter(sample.scores.values()))
        values.append(1.0 if score.value == "C" else 0.0)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 200 if args.quick else 2000
    patch_tiktoken()
    # warm both up once (imports, plugin hooks) so the timed runs measure the engines
    run_whileai(20)
    with tempfile.TemporaryDirectory() as log_dir:
        run_inspect(20, log_dir)
    ours = timed("whileai", lambda: run_whileai(n))
    with tempfile.TemporaryDirectory() as log_dir:
        peer = timed("inspect", lambda: run_inspect(n, log_dir))
    assert len(ours.result) == len(peer.result) == n
    assert all(r == 1.0 for r in ours.result), "whileai graded a rollout a fail"
    assert all(r == 1.0 for r in peer.result), "Inspect graded a sample a fail"
    print(
        f"{n} single-turn rollouts: whileai {ours.seconds:.2f} s, Inspect AI {peer.seconds:.2f} s"
    )
    print(ratio_line("rollouts", ours.rate(n), peer.rate(n), "Inspect AI", target=10))


if __name__ == "__main__":
    main()
