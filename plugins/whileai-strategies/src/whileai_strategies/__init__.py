"""Situation selection strategies for whileai."""

from importlib.metadata import version

__version__ = version("whileai-strategies")
