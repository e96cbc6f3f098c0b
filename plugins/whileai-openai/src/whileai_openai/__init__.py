"""OpenAI-compatible backends for whileai (openai:, vllm:, bare URLs) over aiohttp or httpx."""

from importlib.metadata import version

__version__ = version("whileai-openai")
