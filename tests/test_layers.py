"""The core's layers: every module imports only from its own part of the tree or from a layer
below it, so the shared bottom (rows, files, reports) never drags in the engine, and
``import whileai.simulations.engine`` never drags in scipy.

CONTRIBUTING.md's map of the tree lists the same layers; a new module is added to one here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import whileai

SOURCE = Path(whileai.__file__).parent

#: Lowest first. A part is a module or a package of ``whileai``; parts in one layer do not
#: import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the row model, files, reports; the plugin contract; small utilities
    ("version", "hookspecs", "schema", "sync", "signatures", "seeds", "pricing", "progress"),
    # the registry, and what a grader returns
    ("registry", "scoring"),
    # the kinds of plugins: models, worlds, verifiers
    ("backends", "backend_use", "worlds", "verify"),
    # what runs on the kinds: the executor contract, graders, rows from outputs, measurements
    # and how any world's faults look
    ("executors", "graders", "build_rows", "measure", "response_cache", "faults"),
    # the HTML report, laid out from the measurements
    ("viewing",),
    # the entry points a user calls
    ("simulations", "judging", "ranking", "training", "importers"),
    # the command line's subcommands, then the command line and the shared test doubles
    ("commands",),
    ("cli", "testing"),
)
LAYER_OF = {part: i for i, parts in enumerate(LAYERS) for part in parts}


def _part(module: str) -> str | None:
    """``whileai.schema.files`` -> ``schema``; None for the facade and other packages."""
    pieces = module.split(".")
    if pieces[0] != "whileai" or len(pieces) < 2:
        return None
    return pieces[1]


def _module_name(path: Path) -> str:
    rel = path.relative_to(SOURCE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every whileai module ``path`` imports (at the top, in a function, or for type checking)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module != "whileai":
                found.append((node.lineno, module))
                continue
            # ``from whileai import sync`` imports the submodule ``whileai.sync``; any other
            # name comes from the facade
            for alias in node.names:
                sub = SOURCE / alias.name
                is_module = sub.is_dir() or sub.with_suffix(".py").exists()
                found.append((node.lineno, f"whileai.{alias.name}" if is_module else "whileai"))
    return [(line, m) for line, m in found if m.split(".")[0] == "whileai"]


def _file_of(module: str) -> str:
    path = SOURCE.parent.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return str(path.relative_to(SOURCE.parent))


def upward_imports() -> list[str]:
    problems = []
    for path in sorted(SOURCE.rglob("*.py")):
        importer = _module_name(path)
        own = _part(importer)
        if own is None:
            continue  # the facade: it names everything, lazily
        if own not in LAYER_OF:
            problems.append(f"{path.relative_to(SOURCE.parent)}: part {own!r} is in no layer")
            continue
        for line, module in _imports(path):
            target = _part(module)
            if target is None or target == own:
                if target is None and module == "whileai":
                    problems.append(
                        f"{path.relative_to(SOURCE.parent)}:{line} imports the facade 'whileai'"
                    )
                continue
            if target not in LAYER_OF:
                continue  # reported as a part in no layer when its own file is walked
            if LAYER_OF[target] >= LAYER_OF[own]:
                side = "sideways" if LAYER_OF[target] == LAYER_OF[own] else "upward"
                problems.append(
                    f"{path.relative_to(SOURCE.parent)}:{line} imports {module} "
                    f"({_file_of(module)}): {side}, from layer {LAYER_OF[own]} ({own}) "
                    f"to layer {LAYER_OF[target]} ({target})"
                )
    return problems


def test_no_core_module_imports_from_a_layer_above_it() -> None:
    assert upward_imports() == []


def test_the_walk_catches_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself can fail: a schema module importing the engine is named, both files."""
    fake = tmp_path / "whileai"
    (fake / "schema").mkdir(parents=True)
    (fake / "simulations").mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "schema" / "__init__.py").write_text("")
    (fake / "simulations" / "__init__.py").write_text("")
    (fake / "simulations" / "engine.py").write_text("")
    (fake / "schema" / "records.py").write_text(
        "def f():\n    from whileai.simulations.engine import simulate\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SOURCE", fake)
    assert upward_imports() == [
        "whileai/schema/records.py:2 imports whileai.simulations.engine "
        "(whileai/simulations/engine.py): upward, from layer 0 (schema) to layer 5 (simulations)"
    ]


def imported_by(setup: str, packages: tuple[str, ...]) -> list[str]:
    """The modules of ``packages`` a fresh interpreter has imported after running ``setup``."""
    code = (
        f"import sys\n{setup}\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {packages!r}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return list(ast.literal_eval(out.stdout.strip()))


def test_importing_the_engine_does_not_import_scipy_or_a_plugin() -> None:
    heavy = ("scipy", "numpy", "whileai_verifiers", "whileai_worlds", "whileai_openai")
    assert imported_by("import whileai.simulations.engine", heavy) == []


def test_loading_the_installed_plugins_imports_no_heavy_library() -> None:
    """Every process that loads the registry (each CLI command, each Ray worker) imports every
    plugin's registering module: the plugins whose factories need the mcp SDK, the openai
    client or numpy register them by path, imported when a run builds one."""
    for package in ("whileai_mcp", "whileai_openai", "whileai_judges"):
        pytest.importorskip(package)
    setup = (
        "from whileai.registry import Registry\n"
        "registry = Registry.load()\n"
        "assert not registry.failures, registry.failures\n"
        "assert {'mcp', 'openai', 'rubric', 'pairwise'} <= {e.name for e in registry.entries()}"
    )
    heavy = ("mcp", "openai", "aiohttp", "numpy", "scipy", "pydantic")
    assert imported_by(setup, heavy) == []
