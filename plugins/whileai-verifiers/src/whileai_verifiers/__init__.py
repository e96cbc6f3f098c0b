"""Built-in whileai verifiers. Reach them by name: ``wai.verify.ExactMatch()``."""

from importlib.metadata import version

__version__ = version("whileai-verifiers")
