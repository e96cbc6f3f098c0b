"""How a call samples: what a rollout's seed changes, and what it keeps."""

from __future__ import annotations

import attrs

from whileai.backends import Sampling


def test_a_rollouts_seed_replaces_only_the_seed_and_keeps_every_other_field() -> None:
    base = Sampling(temperature=0.7, max_tokens=64, top_p=0.9, seed=None, stop=("\n\n",))

    seeded = base.with_seed(1234)

    assert seeded == attrs.evolve(base, seed=1234)
    assert base.seed is None  # the run's sampling is left as it was
    # a field added to Sampling must be carried by with_seed too: this list names them all
    assert [f.name for f in attrs.fields(Sampling)] == [
        "temperature",
        "max_tokens",
        "top_p",
        "seed",
        "stop",
    ]
