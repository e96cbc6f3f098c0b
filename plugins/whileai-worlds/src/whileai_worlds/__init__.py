"""Mock worlds with fault injection for whileai rollouts."""

from importlib.metadata import version

__version__ = version("whileai-worlds")
