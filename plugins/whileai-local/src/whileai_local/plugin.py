"""Registers the embedded model as the ``local`` backend through the whileai entry point."""

from __future__ import annotations

from whileai.hookspecs import Register, hookimpl
from whileai_local.backend import LocalBackend
from whileai_local.contexts import DEFAULT_N_CTX, default_pool_size
from whileai_local.model_file import SMOLLM2, find_model_file


def local_backend(
    argument: str | None = None, *, contexts: int | None = None, n_ctx: int = DEFAULT_N_CTX
) -> LocalBackend:
    """``local:smollm2`` (the default) or ``local:<path to a .gguf>``.

    ``contexts`` bounds how many generations run side by side (default: one per core, up to 4);
    ``n_ctx`` is the context length in tokens.
    """
    model_file = find_model_file(argument)
    size = default_pool_size() if contexts is None else contexts
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"contexts must be a positive integer, got {contexts!r}")
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 256:
        raise ValueError(f"n_ctx must be an integer of at least 256 tokens, got {n_ctx!r}")
    return LocalBackend(
        name=f"local:{argument or SMOLLM2}", model_file=model_file, contexts=size, n_ctx=n_ctx
    )


@hookimpl
def whileai_register_backends(register: Register) -> None:
    register(
        "local",
        local_backend,
        description="the embedded model, offline: local:smollm2 or local:<path to a .gguf>",
    )
