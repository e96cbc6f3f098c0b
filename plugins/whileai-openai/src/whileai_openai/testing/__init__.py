"""Test support for anything that talks to an OpenAI-compatible server: a scriptable fault
server (:mod:`whileai_openai.testing.fault_server`) other packages' tests can reuse."""

from whileai_openai.testing.fault_server import FaultApp, FaultServer, Reply

__all__ = ["FaultApp", "FaultServer", "Reply"]
