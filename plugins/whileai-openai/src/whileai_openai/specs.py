"""The three spec forms this package serves, each a factory ``factory(argument, **options)``:

- ``openai:<model>``: OpenAI (``OPENAI_BASE_URL`` or https://api.openai.com/v1, key
  ``OPENAI_API_KEY``);
- ``vllm:<model>@<url>``: any OpenAI-compatible server at ``url`` (key ``WHILEAI_API_KEY`` if
  set); ``vllm:<model>`` alone uses ``WHILEAI_BASE_URL``;
- a bare ``http(s)://`` URL: an OpenAI-compatible server; the model is ``model=`` or the first
  one the server lists at ``/models``.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from whileai.backends import API_KEY_ENV, BASE_URL_ENV
from whileai_openai.backend import OpenAICompatibleBackend

OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

_URL_IN_SPEC = re.compile(r"@(?=https?://)", re.IGNORECASE)


def normalize_base_url(url: str, *, argument: str = "url") -> str:
    """The API root of an OpenAI-compatible server: ``http://host:8000`` becomes
    ``http://host:8000/v1``; a pasted ``.../v1/chat/completions`` is cut back to ``.../v1``."""
    text = url.strip()
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme.lower() not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"{argument} must be an http(s) URL with a host, got {url!r}")
    if parsed.username or parsed.password:
        raise ValueError(
            f"{argument} must not carry credentials; put the key in {API_KEY_ENV} or api_key="
        )
    path = parsed.path.rstrip("/")
    for suffix in ("/chat/completions", "/completions", "/models"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    if not path:
        path = "/v1"
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", ""))


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _require_model(model: str | None, spec_form: str) -> str:
    if not model or not model.strip():
        raise ValueError(f"the spec needs a model name: {spec_form}")
    return model.strip()


def openai_backend(
    model: str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> OpenAICompatibleBackend:
    """``openai:<model>``."""
    env = _env(environ)
    name = _require_model(model, "openai:<model>, e.g. openai:gpt-4o-mini")
    url = base_url or env.get(OPENAI_BASE_URL_ENV, "").strip() or OPENAI_DEFAULT_BASE_URL
    key = api_key or env.get(OPENAI_API_KEY_ENV, "").strip() or None
    url = normalize_base_url(url, argument="base_url")
    if key is None and url == OPENAI_DEFAULT_BASE_URL:
        raise ValueError(
            f"openai:{name} needs an API key: set {OPENAI_API_KEY_ENV} (or pass api_key=)"
        )
    options.setdefault("max_tokens_field", "max_completion_tokens")
    return OpenAICompatibleBackend(
        name=f"openai:{name}", base_url=url, model=name, api_key=key, **options
    )


def vllm_backend(
    argument: str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> OpenAICompatibleBackend:
    """``vllm:<model>@<url>``, or ``vllm:<model>`` on ``WHILEAI_BASE_URL``."""
    env = _env(environ)
    form = "vllm:<model>@<url>, e.g. vllm:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1"
    parts = _URL_IN_SPEC.split(argument or "", maxsplit=1)
    model = _require_model(parts[0], form)
    url = parts[1] if len(parts) == 2 else (base_url or env.get(BASE_URL_ENV, "").strip())
    if not url:
        raise ValueError(f"vllm:{model} names no server: use {form}, or set {BASE_URL_ENV}")
    url = normalize_base_url(url)
    key = api_key or env.get(API_KEY_ENV, "").strip() or None
    return OpenAICompatibleBackend(
        name=f"vllm:{model}@{url}", base_url=url, model=model, api_key=key, **options
    )


def url_backend(
    url: str | None = None,
    *,
    model: str | None = None,
    api_key: str | None = None,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> OpenAICompatibleBackend:
    """A bare ``http(s)://`` URL; the model is ``model=`` or the server's first listed one."""
    if not url:
        raise ValueError("a url backend needs the server's URL, e.g. http://localhost:8000/v1")
    base = normalize_base_url(url)
    key = api_key or _env(environ).get(API_KEY_ENV, "").strip() or None
    return OpenAICompatibleBackend(name=base, base_url=base, model=model, api_key=key, **options)
