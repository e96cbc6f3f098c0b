"""Other tools' logs in: ``wai.load(path)`` reads a run another harness wrote into rows, so
every measurement works on it (pass@1 with its interval, compare against a noise floor).

Each reader turns one tool's per-sample output into rows with their provenance:
``label_source`` says who graded the row (the source tool), ``lineage.source`` names the tool,
its format and version, and the file. What a reader cannot find is left out of the row, never
made up; a file it cannot read is an error naming the file, the line or sample, and why.

| format | what it reads |
|---|---|
| ``inspect`` | an Inspect AI eval log (``.eval`` or ``.json``), through ``inspect_ai.log.read_eval_log`` |
| ``lm_eval`` | lm-evaluation-harness per-sample outputs (``samples_<task>_<date>.jsonl``) |
| ``tau_bench`` | tau-bench's results list (``EnvRunResult``) or tau2-bench's ``simulations`` |
| ``verifiers`` | a verifiers ``vf-eval`` ``results.jsonl`` (with its ``metadata.json`` when beside it) |
| ``whileai`` | our own rows (``.jsonl``) or a Parquet file ``wai.export`` wrote |
"""

from __future__ import annotations

from whileai.importers.load import FORMATS, detect, load

__all__ = ["FORMATS", "detect", "load"]
