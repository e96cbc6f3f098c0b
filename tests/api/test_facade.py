"""The public surface: `import whileai as wai` is cheap, and names resolve through the registry."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import whileai as wai


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


def test_import_loads_no_plugin() -> None:
    result = run_python(
        """
        import sys
        import whileai as wai
        from whileai.registry import default_registry
        assert default_registry.cache_info().currsize == 0
        loaded = sorted(m for m in sys.modules if m.startswith("whileai_"))
        print(loaded)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_runs_without_a_registry_find_the_installed_plugins_once_per_process() -> None:
    # what docs/parameters.md says of registry=None: a loop of short runs (an RL step's)
    # does not read every installed package's entry points again for each (the shop world
    # comes from whileai-worlds)
    pytest.importorskip("whileai_worlds")
    result = run_python(
        """
        import whileai as wai
        from whileai.registry import Registry

        loads = []
        load = Registry.load.__func__

        def counted(cls, *args, **kwargs):
            loads.append(1)
            return load(cls, *args, **kwargs)

        Registry.load = classmethod(counted)
        for _ in range(3):
            data = wai.simulate(
                agent_model=lambda messages: "Done.", unique=2, repeats=1, max_turns=1,
                judge=lambda prompt, completion: 1.0, advanced={"world": "shop"},
            )
            assert [r["reward"] for r in data.rows] == [1.0, 1.0]
        print(len(loads))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


def test_every_export_resolves() -> None:
    for name in wai.__all__:
        assert getattr(wai, name) is not None, name


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'simulatee'"):
        wai.simulatee  # noqa: B018


@pytest.mark.plugins
def test_plugins_lists_the_builtin_verifiers_with_distribution_and_version() -> None:
    table = wai.plugins()
    exact = [e for e in table if e.kind == "verifier" and e.name == "ExactMatch"]
    assert len(exact) == 1
    assert (exact[0].distribution, exact[0].version) == ("whileai-verifiers", "0.1.0")
    assert "whileai-verifiers" in str(table)


@pytest.mark.plugins
def test_verify_names_come_from_the_registry_not_an_import() -> None:
    verifier = wai.verify.ExactMatch(ignore_case=False)
    assert verifier.verify("Paris", "paris").reward == 0.0
    # with the plugin blocked, the same name is unknown and the error says what to install
    result = run_python(
        """
        import whileai as wai
        try:
            wai.verify.ExactMatch()
        except LookupError as exc:
            print(type(exc).__name__)
            print(exc)
        """,
        WHILEAI_DISABLE_PLUGINS="whileai-verifiers",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("UnknownVerifierError\nno verifier named 'ExactMatch'")
    assert "pip install whileai-verifiers" in result.stdout
    assert "Disabled by WHILEAI_DISABLE_PLUGINS: verifiers" in result.stdout


@pytest.mark.plugins
def test_cli_plugins_prints_the_table() -> None:
    from whileai.cli import main

    result = run_python("from whileai.cli import main; raise SystemExit(main(['plugins']))")
    assert result.returncode == 0, result.stderr
    header = result.stdout.splitlines()[0].split()
    assert header == ["kind", "name", "aliases", "distribution", "version"]
    assert any(
        line.split()[:2] == ["verifier", "ExactMatch"] for line in result.stdout.splitlines()
    )
    assert callable(main)
