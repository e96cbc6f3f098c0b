"""Judging: grade rows you have (``wai.grade``), with your own versioned judge
(``wai.run_judge``), or answer a fixed prompt set and grade it (``wai.evaluate``); each returns
a :class:`ScoredData`.

One module per job: ``inputs`` reads what is graded, ``grade`` resolves the judge and grades,
``evaluate`` answers prompts first, ``scored`` is the result and its report.
"""

from __future__ import annotations

from whileai.judging.evaluate import evaluate
from whileai.judging.grade import grade, run_judge
from whileai.judging.scored import GradeReport, ScoredData

__all__ = ["GradeReport", "ScoredData", "evaluate", "grade", "run_judge"]
