"""llama.cpp's OpenAI-compatible server, ``python -m llama_cpp.server`` with the same
arguments, loading its model as the embedded backend loads it (``whileai_local.contexts``):
without llama.cpp's extra buffer types where llama.cpp reports AMX, whose matrix multiply
crashes the server on its first generation on some such machines (ggml-org/llama.cpp#20824).
Elsewhere the server is llama.cpp's own, unchanged. Run as a script by conftest.py."""

from __future__ import annotations

import llama_cpp
from llama_cpp.server.__main__ import main

from whileai_local.contexts import llama_class

if __name__ == "__main__":
    # the server builds its model with llama_cpp.Llama, looked up when it loads
    llama_cpp.Llama = llama_class()  # type: ignore[misc]
    main()
