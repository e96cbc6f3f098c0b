"""Built-in whileai markers: refusal, tool errors, length."""

from importlib.metadata import version

__version__ = version("whileai-markers")
