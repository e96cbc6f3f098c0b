"""``whileai run CONFIG.toml``: a simulate() call written as a TOML file.

Top-level keys are ``simulate()``'s parameters (their names or aliases, as in
docs/parameters.md); an ``[advanced]`` table holds the RunKnobs; ``plugins`` lists extra
plugin objects or modules to register (``"package.module"`` or ``"package.module:object"``)
beside the installed ones. Every key is checked before anything runs, and a wrong one is named
with the keys there are. TOML is read by the standard library (``tomllib``).
"""

from __future__ import annotations

import importlib
import inspect
import tomllib
from collections.abc import Mapping
from typing import Any

from whileai.commands.common import UsageError
from whileai.schema.files import user_path
from whileai.schema.wording import named_with_close

#: Keys of the file that are not simulate() parameters.
FILE_KEYS = ("advanced", "plugins")


def simulate_parameters() -> set[str]:
    from whileai.simulations.engine import simulate

    return set(inspect.signature(simulate).parameters) - {"registry"}


def load_config(path: str) -> dict[str, Any]:
    """The file's keys, checked; a UsageError names the file and what is wrong."""
    target = user_path(path)
    try:
        data = tomllib.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    known = simulate_parameters()
    unknown = sorted(set(data) - known - set(FILE_KEYS))
    if unknown:
        raise UsageError(
            f"{path}: unknown keys {named_with_close(unknown, known)}; a config holds "
            "simulate()'s parameters "
            f"({', '.join(sorted(known))}), an [advanced] table and plugins"
        )
    if not isinstance(data.get("advanced", {}), Mapping):
        raise UsageError(f"{path}: 'advanced' must be a table ([advanced])")
    plugins = data.get("plugins", [])
    if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
        raise UsageError(f"{path}: 'plugins' must be a list of 'module' or 'module:object'")
    return data


def load_plugins(names: list[str], where: str) -> list[object]:
    """The plugin objects ``names`` point at (a module, or an object in one)."""
    out: list[object] = []
    for name in names:
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UsageError(f"{where}: plugin {name!r} does not import: {exc}") from None
        if not attr:
            out.append(module)
            continue
        found = getattr(module, attr, None)
        if found is None:
            raise UsageError(f"{where}: plugin {name!r}: {module_name} has no {attr!r}")
        out.append(found() if inspect.isclass(found) else found)
    return out
