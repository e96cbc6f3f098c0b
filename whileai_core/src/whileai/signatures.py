"""Which optional keywords a plugin's callable takes.

The engine grew keywords after some plugins were written (``hard_share=`` for a strategy's
``choose``, ``step=`` for an episode's ``call``, ``registry=`` for a judge factory,
``concurrency=`` for a backend factory). It passes each only to callables that declare it, by
name or through ``**kwargs``, so a plugin written against the older contract keeps working.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any


@functools.lru_cache(maxsize=256)
def _keywords(fn: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return frozenset(), False
    named = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


def _key(fn: Callable[..., Any]) -> Callable[..., Any]:
    # A bound method is a new object on every access; its function is stable and cacheable.
    return getattr(fn, "__func__", fn)


def accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes the keyword ``name`` (declared, or through ``**kwargs``)."""
    try:
        named, var_keyword = _keywords(_key(fn))
    except TypeError:  # unhashable callable: look without the cache
        named, var_keyword = _keywords.__wrapped__(fn)
    return name in named or var_keyword


def accepted(fn: Callable[..., Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of ``options`` that ``fn`` takes."""
    return {k: v for k, v in options.items() if accepts(fn, k)}
