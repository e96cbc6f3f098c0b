"""The embedded model runs on a CPU with AMX.

llama.cpp moves quantized weights into AMX buffers on such a CPU, and its AMX matrix multiply
crashes the process on the first generation on some machines (a segmentation fault in
``ggml_backend_amx_mul_mat``, seen here in the demo). Contexts load without llama.cpp's extra
buffer types wherever llama.cpp reports AMX, and as they always did elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import llama_cpp
import pytest

from whileai_local import contexts
from whileai_local.model_file import smollm2_file

WITH_AMX = (
    b"CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | "
    b"AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)
WITHOUT_AMX = b"CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | FMA = 1 | LLAMAFILE = 1 | REPACK = 1 | "


@pytest.fixture
def fresh_class() -> Iterator[None]:
    """The Llama class is made once a process; each test here makes its own."""
    contexts.llama_class.cache_clear()
    yield
    contexts.llama_class.cache_clear()


def load(**options: Any) -> Any:
    return contexts.llama_class()(
        model_path=str(smollm2_file()), n_ctx=512, n_threads=1, verbose=False, **options
    )


@pytest.mark.parametrize(("info", "extra"), [(WITH_AMX, False), (WITHOUT_AMX, True)])
def test_extra_buffers_are_left_out_only_where_llama_cpp_reports_amx(
    monkeypatch: pytest.MonkeyPatch, info: bytes, extra: bool
) -> None:
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: info)
    assert contexts.loads_extra_buffers() is extra


def test_a_context_loaded_where_amx_is_reported_keeps_its_weights_out_of_it_and_answers(
    monkeypatch: pytest.MonkeyPatch, fresh_class: None
) -> None:
    monkeypatch.setattr(contexts, "loads_extra_buffers", lambda: False)
    llama = load()
    try:
        # the parameters the weights were loaded with, not a copy made afterwards
        assert llama.model_params.use_extra_bufts is False
        out = llama.create_chat_completion(
            [{"role": "user", "content": "Say hello."}], max_tokens=8, temperature=0
        )
        assert out["usage"]["completion_tokens"] > 0
        assert out["choices"][0]["message"]["content"]
    finally:
        llama.close()


def test_a_context_loaded_elsewhere_keeps_llama_cpps_defaults(
    monkeypatch: pytest.MonkeyPatch, fresh_class: None
) -> None:
    monkeypatch.setattr(contexts, "loads_extra_buffers", lambda: True)
    # loaded only: generating with AMX buffers on a machine where they crash would crash here
    llama = load(vocab_only=True)
    try:
        assert llama.model_params.use_extra_bufts is True
        assert llama.model_params.vocab_only is True
    finally:
        llama.close()


def test_parameters_not_yet_set_are_missing_as_any_attribute_is(fresh_class: None) -> None:
    import contextlib

    llama_type = contexts.llama_class()
    bare = llama_type.__new__(llama_type)  # as a load that failed early leaves it
    assert not hasattr(bare, "model_params")
    bare._stack = contextlib.ExitStack()  # what Llama.__del__ closes
