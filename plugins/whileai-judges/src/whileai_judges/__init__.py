"""The LLM rubric judge for whileai."""

from importlib.metadata import version

__version__ = version("whileai-judges")
