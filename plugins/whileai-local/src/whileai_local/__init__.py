"""The embedded default model for whileai: SmolLM2-135M-Instruct through llama-cpp-python, offline."""

from importlib.metadata import version

__version__ = version("whileai-local")
