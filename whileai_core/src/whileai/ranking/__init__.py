"""Ranking rows of one task against each other: ``wai.rank`` and the pairwise-judge protocol.

``preference`` is the protocol a ranking judge implements, ``pairs`` chooses which pairs are
judged, ``bradley_terry`` turns verdicts into a quality in [0, 1], ``run`` holds ``rank`` itself.
"""

from whileai.ranking.preference import Preference, RankingJudge, as_preference, combine_orders
from whileai.ranking.run import RankReport, rank

__all__ = ["Preference", "RankReport", "RankingJudge", "as_preference", "combine_orders", "rank"]
