"""A run slow enough to be killed in the middle: ``python resume_script.py OUT [--resume]``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim_doubles as d

import whileai as wai


def main() -> None:
    out = sys.argv[1]
    data = wai.simulate(
        registry=d.registry(),
        agent_model="fake:slow-agent",
        user_model="fake:user",
        simulator="template",
        unique=10,
        repeats=4,
        output=out,
        resume="--resume" in sys.argv,
        advanced={"world": "tinyshop", "max_concurrency": 2},
    )
    print(len(data.rows))


if __name__ == "__main__":
    main()
