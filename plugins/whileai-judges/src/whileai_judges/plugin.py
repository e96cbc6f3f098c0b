"""Registers this package's plugins through the whileai entry point."""

from __future__ import annotations
