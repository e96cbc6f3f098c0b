"""The plugin contract: registration, resolution, failures a person can act on.

Every hook in whileai.hookspecs has a test here named after it (test_docs.py enforces that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy
import pytest

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai.registry import (
    DuplicatePluginError,
    Registry,
    UnknownPluginError,
    has_observers,
    make_plugin_manager,
    notify,
    parse_spec,
)

GOOD_PLUGIN = """
from whileai import hookimpl

@hookimpl
def whileai_register_verifiers(register):
    register("Shout", lambda **o: "shout", aliases=("loud",), description="upper-case match")
"""

BROKEN_PLUGIN = """
raise ImportError("this plugin needs a package that is not installed")
"""


# -- one test per registration hook -------------------------------------------------------
def test_whileai_register_verifiers(inline_registry: Registry) -> None:
    verifier = inline_registry.resolve("verifier", "Echo")
    assert verifier.verify("42", "42").reward == 1.0
    assert inline_registry.resolve("verifier", "echo").name == "Echo"  # alias


def test_whileai_register_backends(inline_registry: Registry) -> None:
    # prefix:argument hands the argument to the provider's factory, options pass through
    assert inline_registry.resolve("backend", "fake:model-7b", concurrency=4) == (
        "fake-backend",
        "model-7b",
        {"concurrency": 4},
    )


def test_whileai_register_judges(inline_registry: Registry) -> None:
    judge = inline_registry.resolve("judge", "always-pass")
    assert judge({"final_text": "x"}).reward == 1.0


def test_whileai_register_markers(inline_registry: Registry) -> None:
    marker = inline_registry.resolve("marker", "chars")
    assert marker({"final_text": "hello"}) == 5


def test_whileai_register_strategies(inline_registry: Registry) -> None:
    assert inline_registry.resolve("strategy", "first") == "first-strategy"


def test_whileai_register_worlds(inline_registry: Registry) -> None:
    assert inline_registry.resolve("world", "empty") == "empty-world"


def test_whileai_register_executors(inline_registry: Registry) -> None:
    assert inline_registry.resolve("executor", "inline") == "inline-executor"


# -- lifecycle hooks: observers, never fatal -----------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    @hookimpl
    def whileai_run_started(self, run_id: str, knobs: dict[str, Any], total: int) -> None:
        self.calls.append(("started", (run_id, total)))

    @hookimpl
    def whileai_rollout_finished(
        self, run_id: str, row: dict[str, Any], done: int, total: int
    ) -> None:
        self.calls.append(("rollout", (done, row["final_text"])))

    @hookimpl
    def whileai_run_finished(self, run_id: str, report: dict[str, Any]) -> None:
        self.calls.append(("finished", report["n_rows"]))


class FailingObserver:
    @hookimpl
    def whileai_run_started(self, run_id: str) -> None:
        raise RuntimeError("dashboard is down")

    @hookimpl
    def whileai_rollout_finished(self, row: dict[str, Any]) -> None:
        raise RuntimeError("disk full")

    @hookimpl
    def whileai_run_finished(self, report: dict[str, Any]) -> None:
        raise KeyError("n_rows")


@pytest.fixture
def observed() -> tuple[Registry, Recorder]:
    recorder = Recorder()
    return Registry.from_plugins(recorder, FailingObserver(), names=["recorder", "flaky"]), recorder


def test_whileai_run_started(observed: tuple[Registry, Recorder]) -> None:
    registry, recorder = observed
    warnings = notify(registry.pm, "whileai_run_started", run_id="r1", knobs={}, total=3)
    assert recorder.calls == [("started", ("r1", 3))]
    assert warnings == [
        "observer plugin 'flaky' failed in whileai_run_started: RuntimeError: dashboard is down"
    ]


def test_whileai_rollout_finished(observed: tuple[Registry, Recorder]) -> None:
    registry, recorder = observed
    row = {"final_text": "done"}
    warnings = notify(
        registry.pm, "whileai_rollout_finished", run_id="r1", row=row, done=1, total=3
    )
    assert recorder.calls == [("rollout", (1, "done"))]
    assert len(warnings) == 1 and "disk full" in warnings[0]


def test_whileai_run_finished(observed: tuple[Registry, Recorder]) -> None:
    registry, recorder = observed
    warnings = notify(registry.pm, "whileai_run_finished", run_id="r1", report={"n_rows": 3})
    assert recorder.calls == [("finished", 3)]
    assert warnings == [
        "observer plugin 'flaky' failed in whileai_run_finished: KeyError: 'n_rows'"
    ]


def test_a_run_builds_its_finished_report_only_for_an_observer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the report as plain data walks a table of every task: a run nobody watches skips it
    # (the shop world comes from whileai-worlds)
    pytest.importorskip("whileai_worlds")
    import whileai as wai
    from whileai.simulations.data import RunReport

    built: list[int] = []
    to_dict = RunReport.to_dict

    def counted(self: RunReport) -> dict[str, Any]:
        built.append(1)
        return to_dict(self)

    monkeypatch.setattr(RunReport, "to_dict", counted)

    def run(registry: Registry) -> Any:
        return wai.simulate(
            registry=registry,
            agent_model=lambda messages: "Done.",
            unique=2,
            repeats=1,
            max_turns=1,
            judge=lambda prompt, completion: 1.0,
            advanced={"world": "shop"},
        )

    unwatched = Registry.load()
    assert not has_observers(unwatched.pm, "whileai_run_finished")
    run(unwatched)
    assert built == []
    reports: list[dict[str, Any]] = []

    class Dashboard:
        @hookimpl
        def whileai_run_finished(self, run_id: str, report: dict[str, Any]) -> None:
            reports.append(report)

    watched = Registry.load(plugins=[Dashboard()])
    assert has_observers(watched.pm, "whileai_run_finished")
    data = run(watched)
    assert built == [1]
    assert reports == [data.report().to_dict()]
    assert reports[0]["unique_situations"] == 2


def test_notify_refuses_registration_hooks(inline_registry: Registry) -> None:
    with pytest.raises(ValueError, match="not a lifecycle hook"):
        notify(inline_registry.pm, "whileai_register_verifiers", register=print)


# -- resolution and its errors ---------------------------------------------------------------
def test_spec_forms() -> None:
    assert parse_spec("MathEqual") == parse_spec(" MathEqual ")
    assert (parse_spec("openai:gpt-4o").name, parse_spec("openai:gpt-4o").argument) == (
        "openai",
        "gpt-4o",
    )
    vllm = parse_spec("vllm:Qwen/Qwen2.5-7B@http://10.0.0.1:8000/v1")
    assert (vllm.name, vllm.argument) == ("vllm", "Qwen/Qwen2.5-7B@http://10.0.0.1:8000/v1")
    url = parse_spec("http://127.0.0.1:8080/v1")
    assert (url.name, url.argument) == ("url", "http://127.0.0.1:8080/v1")
    with pytest.raises(ValueError, match="non-empty string"):
        parse_spec("")


def test_unknown_name_error_text(inline_registry: Registry) -> None:
    with pytest.raises(UnknownPluginError) as caught:
        inline_registry.resolve("verifier", "Ecko")
    assert str(caught.value) == (
        "no verifier named 'Ecko' (from spec 'Ecko').\n"
        "Did you mean 'Echo'?\n"
        "Registered verifiers:\n"
        "  Echo (aliases: echo) - plugin 'inline' (no distribution)"
    )
    assert isinstance(caught.value, LookupError)


def test_a_plugin_registered_in_code_without_a_name_is_listed_by_its_class() -> None:
    # Registry.load(plugins=[...]) and from_plugins() without names: pluggy names such a
    # plugin by its id(), which tells a reader nothing
    class MyBackends:
        @hookimpl
        def whileai_register_backends(self, register: Any) -> None:
            register("mine", lambda argument=None, **_: None)

    registry = Registry.load(plugins=[MyBackends()])
    with pytest.raises(UnknownPluginError) as caught:
        registry.resolve("backend", "mien")
    where = f"{__name__}.test_a_plugin_registered_in_code_without_a_name_is_listed_by_its_class"
    assert f"  mine - plugin '{where}.<locals>.MyBackends' (no distribution)" in str(caught.value)


def test_unknown_builtin_name_says_what_to_install(inline_registry: Registry) -> None:
    with pytest.raises(UnknownPluginError) as caught:
        inline_registry.resolve("verifier", "MathEqual")
    assert "'MathEqual' is provided by whileai-verifiers: pip install whileai-verifiers" in str(
        caught.value
    )


def test_bare_url_without_an_http_backend(inline_registry: Registry) -> None:
    with pytest.raises(UnknownPluginError) as caught:
        inline_registry.resolve("backend", "http://127.0.0.1:9/v1")
    message = str(caught.value)
    assert message.startswith("no backend named bare URL (from spec 'http://127.0.0.1:9/v1').")
    assert "pip install whileai-openai" in message


def test_duplicate_name_error_names_both_distributions(
    installed_dist: Callable[..., None],
) -> None:
    installed_dist("acme-verifiers", "2.0", {"acme": ("fake_whileai_acme", GOOD_PLUGIN)})
    installed_dist("other-verifiers", "0.3", {"other": ("fake_whileai_other", GOOD_PLUGIN)})
    with pytest.raises(DuplicatePluginError) as caught:
        Registry.load(environ={})
    assert str(caught.value) in {
        "verifier 'Shout' is registered twice: by acme-verifiers 2.0 (plugin 'acme') "
        "and by other-verifiers 0.3 (plugin 'other')",
        "verifier 'Shout' is registered twice: by other-verifiers 0.3 (plugin 'other') "
        "and by acme-verifiers 2.0 (plugin 'acme')",
    }


def test_duplicate_alias_is_a_duplicate(inline_registry: Registry) -> None:
    class Clash:
        @hookimpl
        def whileai_register_verifiers(self, register: Register) -> None:
            register("Different", lambda: None, aliases=("echo",))

    with pytest.raises(DuplicatePluginError, match="verifier 'echo' is registered twice"):
        Registry.from_plugins(*inline_registry.pm.get_plugins(), Clash())


def test_broken_entry_point_does_not_stop_the_others(installed_dist: Callable[..., None]) -> None:
    installed_dist(
        "mixed-plugins",
        "1.2",
        {
            "good": ("fake_whileai_good", GOOD_PLUGIN),
            "broken": ("fake_whileai_broken", BROKEN_PLUGIN),
        },
    )
    registry = Registry.load(environ={})
    entry, _ = registry.lookup("verifier", "loud")
    assert (entry.name, entry.distribution, entry.version, entry.plugin) == (
        "Shout",
        "mixed-plugins",
        "1.2",
        "good",
    )
    [failure] = [f for f in registry.failures if f.name == "broken"]
    assert failure.distribution == "mixed-plugins"
    assert failure.error == "ImportError: this plugin needs a package that is not installed"
    with pytest.raises(UnknownPluginError) as caught:
        registry.resolve("verifier", "Nope")
    assert (
        "Plugins that failed to load:\n  broken (mixed-plugins): ImportError: this plugin needs"
        in str(caught.value)
    )


def test_a_raising_registration_hook_is_recorded_not_fatal() -> None:
    class Raises:
        @hookimpl
        def whileai_register_worlds(self, register: Register) -> None:
            raise RuntimeError("config file missing")

    class Fine:
        @hookimpl
        def whileai_register_worlds(self, register: Register) -> None:
            register("ok", lambda: "ok-world")

    registry = Registry.from_plugins(Raises(), Fine(), names=["raises", "fine"])
    assert registry.resolve("world", "ok") == "ok-world"
    assert [str(f) for f in registry.failures] == [
        "raises: whileai_register_worlds: RuntimeError: config file missing"
    ]


def test_disable_plugins_by_name(installed_dist: Callable[..., None]) -> None:
    installed_dist("acme-verifiers", "2.0", {"acme": ("fake_whileai_acme2", GOOD_PLUGIN)})
    assert ("verifier", "Shout") in Registry.load(environ={})
    blocked = Registry.load(environ={"WHILEAI_DISABLE_PLUGINS": "unrelated, acme"})
    assert ("verifier", "Shout") not in blocked
    assert "acme" in blocked.blocked
    by_distribution = Registry.load(environ={"WHILEAI_DISABLE_PLUGINS": "acme-verifiers"})
    assert ("verifier", "Shout") not in by_distribution


def test_check_pending_catches_misspelled_hooks() -> None:
    class Misspelled:
        @hookimpl
        def whileai_register_verifier(self, register: Register) -> None:  # missing "s"
            register("x", lambda: None)

    with pytest.raises(pluggy.PluginValidationError, match="whileai_register_verifier"):
        Registry.from_plugins(Misspelled())


def test_names_must_not_contain_a_colon() -> None:
    class BadName:
        @hookimpl
        def whileai_register_backends(self, register: Register) -> None:
            register("my:backend", lambda: None)

    registry = Registry.from_plugins(BadName(), names=["bad"])
    assert registry.names("backend") == []
    [failure] = registry.failures
    assert "backend names must be non-empty strings without ':'" in failure.error


def test_unknown_kind(inline_registry: Registry) -> None:
    with pytest.raises(ValueError, match="unknown plugin kind 'verifiers'"):
        inline_registry.resolve("verifiers", "Echo")


def test_table_lists_kind_name_aliases_distribution(inline_registry: Registry) -> None:
    text = str(inline_registry.table())
    header, _rule, *rows = text.splitlines()
    assert header.split() == ["kind", "name", "aliases", "distribution", "version"]
    assert any(r.split()[:3] == ["verifier", "Echo", "echo"] for r in rows)
    assert len(rows) == 7
    dicts = inline_registry.table().as_dicts()
    assert {d["kind"] for d in dicts} == {
        "backend",
        "verifier",
        "judge",
        "marker",
        "strategy",
        "world",
        "executor",
    }


def test_distributions_name_each_entry_point_plugin_and_are_a_copy() -> None:
    registry = Registry(make_plugin_manager(), distributions={"shop": ("whileai-worlds", "0.1.0")})
    assert registry.distributions == {"shop": ("whileai-worlds", "0.1.0")}
    registry.distributions["shop"] = ("changed", None)
    assert registry.distributions["shop"] == ("whileai-worlds", "0.1.0")


def test_resolve_passes_options_as_given_and_offers_only_what_a_factory_takes() -> None:
    """``options`` are the caller's and reach the factory (a wrong one fails loudly);
    ``offer`` is what the engine can supply, given only to a factory that declares it."""
    seen: list[dict[str, Any]] = []

    def old_style(*, strictness: int = 1) -> str:
        seen.append({"strictness": strictness})
        return "old"

    def new_style(*, strictness: int = 1, registry: Any = None, **rest: Any) -> str:
        seen.append({"strictness": strictness, "registry": registry, **rest})
        return "new"

    class Plugin:
        @hookimpl
        def whileai_register_verifiers(self, register: Any) -> None:
            register("Old", old_style)
            register("New", new_style)

    registry = Registry.from_plugins(Plugin())
    offer = {"registry": registry, "concurrency": 4}
    assert registry.resolve("verifier", "Old", offer=offer, strictness=2) == "old"
    assert seen[-1] == {"strictness": 2}
    assert registry.resolve("verifier", "New", offer=offer) == "new"
    assert seen[-1] == {"strictness": 1, "registry": registry, "concurrency": 4}
    registry.resolve("verifier", "New", offer=offer, concurrency=9)
    assert seen[-1]["concurrency"] == 9  # the caller's own option wins over an offer
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        registry.resolve("verifier", "Old", offer=offer, bogus=1)


LAZY_PLUGIN = """
from whileai import hookimpl
from whileai.schema.wording import counted

@hookimpl
def whileai_register_verifiers(register):
    register("Heavy", "fake_whileai_heavy:make", description="needs a heavy library")
    register("Missing", "fake_whileai_absent.sub:make")
    register("NotCallable", "fake_whileai_heavy:LIMIT")

@hookimpl
def whileai_register_markers(register):
    register("gone", "fake_whileai_absent:marker")
"""

HEAVY_MODULE = """
import sys

IMPORTS = sys.modules.setdefault("fake_whileai_imports", type(sys)("fake_whileai_imports"))
IMPORTS.count = getattr(IMPORTS, "count", 0) + 1
LIMIT = 3

def make(*, strictness=1, registry=None):
    return ("heavy", strictness, registry)
"""


def test_a_factory_registered_by_its_path_is_imported_only_when_built(
    installed_dist: Callable[..., None], tmp_path: Any
) -> None:
    import sys

    from whileai.graders import MarkerSet
    from whileai.registry import PluginImportError

    (tmp_path / "fake_whileai_heavy.py").write_text(HEAVY_MODULE)
    installed_dist("fake-whileai-lazy", "1.0", {"lazy": ("fake_whileai_lazy", LAZY_PLUGIN)})
    registry = Registry.load(environ={})
    assert registry.failures == []
    assert "fake_whileai_heavy" not in sys.modules  # loading the registry imported nothing
    assert registry.table()  # listing the plugins imports nothing either
    assert "fake_whileai_heavy" not in sys.modules

    # built with the caller's options and only the offers its signature takes
    offer = {"registry": registry, "concurrency": 4}
    built = registry.resolve("verifier", "Heavy", offer=offer, strictness=2)
    assert built == ("heavy", 2, registry)
    registry.resolve("verifier", "Heavy")
    assert sys.modules["fake_whileai_imports"].count == 1  # imported once, then reused
    del sys.modules["fake_whileai_imports"]

    with pytest.raises(PluginImportError) as missing:
        registry.resolve("verifier", "Missing")
    assert str(missing.value).startswith(
        "verifier 'Missing' from fake-whileai-lazy 1.0: its factory "
        "'fake_whileai_absent.sub:make' could not be imported: ModuleNotFoundError"
    )
    with pytest.raises(PluginImportError, match="'fake_whileai_heavy:LIMIT' is a int, not call"):
        registry.resolve("verifier", "NotCallable")
    # a marker that cannot be imported is a problem the run reports, not a crash
    markers, problems = MarkerSet.from_registry(registry)
    assert "gone" not in markers.markers
    assert (
        "marker 'gone' could not be built: marker 'gone' from fake-whileai-lazy 1.0: its "
        "factory 'fake_whileai_absent:marker' could not be imported: ModuleNotFoundError: "
        "No module named 'fake_whileai_absent'"
    ) in problems


@pytest.mark.parametrize("path", ["fake_whileai_heavy", "fake_whileai_heavy:", "a b:c", ":make"])
def test_a_factory_given_as_text_must_be_an_import_path(path: str) -> None:
    class Plugin:
        @hookimpl
        def whileai_register_verifiers(self, register: Register) -> None:
            register("Bad", path)

    registry = Registry.from_plugins(Plugin(), names=["bad"])
    assert registry.names("verifier") == []
    [failure] = registry.failures
    assert (
        f"verifier 'Bad' from plugin 'bad' (no distribution): a factory given as text is an "
        f"import path 'package.module:attribute', got {path!r}"
    ) in failure.error
