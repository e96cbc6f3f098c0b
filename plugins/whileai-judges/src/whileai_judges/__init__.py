"""The LLM judges for whileai: the rubric judge (a reward) and the pairwise judge (wai.rank)."""

from importlib.metadata import version

__version__ = version("whileai-judges")
