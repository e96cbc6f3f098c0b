"""The plugin manager, entry-point loading, the registry and name resolution.

Nothing here runs at import time. A :class:`Registry` is built on demand from a pluggy plugin
manager (``Registry.load()`` reads the ``whileai`` entry-point group; tests build one from
inline plugins with ``Registry.from_plugins``), and every public call that resolves a name
accepts ``registry=`` so no caller depends on shared state. ``default_registry()`` builds the
entry-point registry once per process for the facade's convenience.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
import re
import traceback
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import importlib_metadata
import pluggy

from whileai import hookspecs
from whileai.signatures import accepted

ENTRY_POINT_GROUP = "whileai"
DISABLE_ENV = "WHILEAI_DISABLE_PLUGINS"

#: Kinds of registered things, in the order ``wai.plugins()`` lists them.
KINDS: tuple[str, ...] = tuple(hookspecs.REGISTRATION_HOOKS)

#: Which built-in distribution provides a well-known name, so a missing one can say what to
#: install. Third-party names are found through their own entry points and need no entry here.
KNOWN_PROVIDERS: dict[tuple[str, str], str] = {
    ("verifier", "ExactMatch"): "whileai-verifiers",
    ("verifier", "MathEqual"): "whileai-verifiers",
    ("verifier", "Numeric"): "whileai-verifiers",
    ("verifier", "CodeExec"): "whileai-verifiers",
    ("backend", "openai"): "whileai-openai",
    ("backend", "vllm"): "whileai-openai",
    ("backend", "url"): "whileai-openai",
    ("backend", "local"): "whileai-local",
    ("judge", "rubric"): "whileai-judges",
    ("judge", "pairwise"): "whileai-judges",
    ("world", "shop"): "whileai-worlds",
    ("executor", "ray"): "whileai-ray",
}

_URL = re.compile(r"^https?://", re.IGNORECASE)

#: A factory a plugin names instead of importing: ``package.module:attribute`` (the form of an
#: entry point's object reference), imported when the entry is first built
_IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class UnknownPluginError(LookupError):
    """A spec names nothing registered of its kind."""


class DuplicatePluginError(ValueError):
    """Two plugins registered the same name (or alias) for one kind."""


class PluginImportError(ImportError):
    """A factory registered by its import path could not be imported when it was needed."""


@attrs.frozen
class Entry:
    """One registered thing: what it is called, how to build it, and who provided it."""

    kind: str
    name: str
    #: the factory, or the ``module:attribute`` path it is imported from (:meth:`load`)
    factory: Callable[..., Any] | str = attrs.field(repr=False, eq=False)
    aliases: tuple[str, ...] = ()
    description: str = ""
    plugin: str = ""
    distribution: str | None = None
    version: str | None = None
    #: the factory a path named, once imported
    _imported: list[Callable[..., Any]] = attrs.field(
        factory=list, init=False, repr=False, eq=False
    )

    def load(self) -> Callable[..., Any]:
        """The factory: as registered, or imported from the path it was registered by, at
        the first call (a plugin whose factory needs a heavy library registers its path, so
        loading the registry does not import the library; only building the entry does)."""
        if not isinstance(self.factory, str):
            return self.factory
        if self._imported:
            return self._imported[0]
        module_name, _, attribute = self.factory.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except Exception as exc:
            raise PluginImportError(
                f"{self.kind} {self.name!r} from {self.provided_by}: its factory "
                f"{self.factory!r} could not be imported: {_describe(exc)}"
            ) from exc
        if not callable(target):
            raise PluginImportError(
                f"{self.kind} {self.name!r} from {self.provided_by}: its factory "
                f"{self.factory!r} is a {type(target).__name__}, not callable"
            )
        factory: Callable[..., Any] = target
        self._imported.append(factory)
        return factory

    @property
    def provided_by(self) -> str:
        """``<distribution> <version>``, or the plugin name for a plugin with no distribution."""
        if self.distribution:
            return f"{self.distribution} {self.version}" if self.version else self.distribution
        return f"plugin {self.plugin!r} (no distribution)"


@attrs.frozen
class LoadFailure:
    """A plugin that could not be loaded or whose registration hook raised."""

    name: str
    distribution: str | None
    error: str

    def __str__(self) -> str:
        where = f" ({self.distribution})" if self.distribution else ""
        return f"{self.name}{where}: {self.error}"


@attrs.frozen
class Spec:
    """A parsed spec: ``name`` to look up and the ``argument`` handed to its factory."""

    name: str
    argument: str | None


def parse_spec(spec: str) -> Spec:
    """Split a spec into the registered name and the argument for its factory.

    ``"MathEqual"`` names a thing; ``"openai:gpt-4o"`` is provider ``openai`` with argument
    ``gpt-4o``; a bare ``http(s)://`` URL is the provider registered as ``url`` with the whole
    URL as argument.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"a plugin spec must be a non-empty string, got {spec!r}")
    spec = spec.strip()
    if _URL.match(spec):
        return Spec("url", spec)
    if ":" in spec:
        name, argument = spec.split(":", 1)
        return Spec(name, argument)
    return Spec(spec, None)


def make_plugin_manager() -> pluggy.PluginManager:
    """A plugin manager that knows the whileai hookspecs and nothing else yet."""
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    return pm


def disabled_names(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Plugin (entry-point) or distribution names blocked by ``WHILEAI_DISABLE_PLUGINS``."""
    raw = (os.environ if environ is None else environ).get(DISABLE_ENV, "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


@attrs.define
class _Loaded:
    failures: list[LoadFailure] = attrs.Factory(list)
    blocked: list[str] = attrs.Factory(list)
    distributions: dict[str, tuple[str | None, str | None]] = attrs.Factory(dict)


def _plugin_label(name: str, plugin: object) -> str:
    """How listings and errors name a plugin: its registered name, or, for an object
    registered without one (``Registry.load(plugins=[...])``, where pluggy names it by its
    ``id()``), what it is: ``mypkg.plugins.MyBackends`` rather than ``140531204312656``."""
    if name != str(id(plugin)):
        return name
    if isinstance(plugin, types.ModuleType):
        return plugin.__name__
    kind = plugin if isinstance(plugin, type) else type(plugin)
    return f"{kind.__module__}.{kind.__qualname__}"


def _load_entry_points(pm: pluggy.PluginManager, group: str, disabled: frozenset[str]) -> _Loaded:
    loaded = _Loaded()
    for ep in importlib_metadata.entry_points(group=group):
        dist = ep.dist.name if ep.dist is not None else None
        version = ep.dist.version if ep.dist is not None else None
        if ep.name in disabled or (dist is not None and dist in disabled):
            loaded.blocked.append(ep.name)
            continue
        if pm.get_plugin(ep.name) is not None:
            continue
        try:
            plugin = ep.load()
            pm.register(plugin, name=ep.name)
        except Exception as exc:  # a broken plugin must never stop the others
            loaded.failures.append(LoadFailure(ep.name, dist, _describe(exc)))
            continue
        loaded.distributions[ep.name] = (dist, version)
    return loaded


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


class Registry:
    """Everything registered through the registration hooks, by kind and name."""

    def __init__(
        self,
        pm: pluggy.PluginManager,
        *,
        failures: Sequence[LoadFailure] = (),
        blocked: Sequence[str] = (),
        distributions: Mapping[str, tuple[str | None, str | None]] | None = None,
        backend_wrapper: Callable[[Any], Any] | None = None,
    ) -> None:
        pm.check_pending()
        self.pm = pm
        #: applied to every backend this registry resolves (the response cache is one)
        self.backend_wrapper = backend_wrapper
        self.failures: list[LoadFailure] = list(failures)
        self.blocked: tuple[str, ...] = tuple(blocked)
        self._distributions = dict(distributions or {})
        self._entries: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}
        self._aliases: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
        for kind, hook_name in hookspecs.REGISTRATION_HOOKS.items():
            self._collect(kind, hook_name)

    @property
    def distributions(self) -> dict[str, tuple[str | None, str | None]]:
        """Plugin name -> (distribution, version) of each entry-point plugin: what a worker
        process needs to rebuild this registry with the same provenance."""
        return dict(self._distributions)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        *,
        group: str = ENTRY_POINT_GROUP,
        environ: Mapping[str, str] | None = None,
        plugins: Iterable[object] = (),
    ) -> Registry:
        """Load every entry point of ``group`` (minus the disabled ones), plus ``plugins``."""
        pm = make_plugin_manager()
        for plugin in plugins:
            pm.register(plugin)
        loaded = _load_entry_points(pm, group, disabled_names(environ))
        return cls(
            pm,
            failures=loaded.failures,
            blocked=loaded.blocked,
            distributions=loaded.distributions,
        )

    @classmethod
    def from_plugins(cls, *plugins: object, names: Sequence[str] | None = None) -> Registry:
        """A registry of the given plugin objects only, no entry points (tests, embedding)."""
        pm = make_plugin_manager()
        for i, plugin in enumerate(plugins):
            pm.register(plugin, name=names[i] if names else None)
        return cls(pm)

    def _collect(self, kind: str, hook_name: str) -> None:
        hook = getattr(self.pm.hook, hook_name)
        # Called one implementation at a time so every entry knows which plugin made it.
        for impl in reversed(hook.get_hookimpls()):
            plugin_name = _plugin_label(impl.plugin_name, impl.plugin)
            dist, version = self._distributions.get(plugin_name, (None, None))

            def register(
                name: str,
                factory: Callable[..., Any] | str,
                aliases: Sequence[str] = (),
                description: str = "",
                *,
                _plugin: str = plugin_name,
                _dist: str | None = dist,
                _version: str | None = version,
            ) -> None:
                self._add(
                    Entry(
                        kind=kind,
                        name=name,
                        factory=factory,
                        aliases=tuple(aliases),
                        description=description,
                        plugin=_plugin,
                        distribution=_dist,
                        version=_version,
                    )
                )

            try:
                impl.function(register=register)
            except DuplicatePluginError:
                raise
            except Exception as exc:
                self.failures.append(
                    LoadFailure(plugin_name, dist, f"{hook_name}: {_describe(exc)}")
                )

    def _add(self, entry: Entry) -> None:
        if not isinstance(entry.name, str) or not entry.name or ":" in entry.name:
            raise ValueError(
                f"{entry.kind} names must be non-empty strings without ':', "
                f"got {entry.name!r} from {entry.provided_by}"
            )
        if isinstance(entry.factory, str):
            if not _IMPORT_PATH.match(entry.factory):
                raise ValueError(
                    f"{entry.kind} {entry.name!r} from {entry.provided_by}: a factory given as "
                    f"text is an import path 'package.module:attribute', got {entry.factory!r}"
                )
        elif not callable(entry.factory):
            raise TypeError(
                f"{entry.kind} {entry.name!r} from {entry.provided_by}: factory is not callable"
            )
        for label in (entry.name, *entry.aliases):
            owner = self._owner(entry.kind, label)
            if owner is not None:
                raise DuplicatePluginError(
                    f"{entry.kind} {label!r} is registered twice: by {owner.provided_by} "
                    f"(plugin {owner.plugin!r}) and by {entry.provided_by} "
                    f"(plugin {entry.plugin!r})"
                )
        self._entries[entry.kind][entry.name] = entry
        for alias in entry.aliases:
            self._aliases[entry.kind][alias] = entry.name

    def _owner(self, kind: str, label: str) -> Entry | None:
        if label in self._entries[kind]:
            return self._entries[kind][label]
        if label in self._aliases[kind]:
            return self._entries[kind][self._aliases[kind][label]]
        return None

    # -- lookup -------------------------------------------------------------------------
    def entries(self, kind: str | None = None) -> list[Entry]:
        """Registered entries, of one kind or all, in kind order then name order."""
        kinds = KINDS if kind is None else (_check_kind(kind),)
        return [e for k in kinds for _, e in sorted(self._entries[k].items())]

    def names(self, kind: str) -> list[str]:
        return sorted(self._entries[_check_kind(kind)])

    def lookup(self, kind: str, spec: str) -> tuple[Entry, str | None]:
        """The entry a spec names and the argument for its factory, or UnknownPluginError."""
        kind = _check_kind(kind)
        parsed = parse_spec(spec)
        entry = self._owner(kind, parsed.name)
        if entry is None:
            raise UnknownPluginError(self._unknown_message(kind, spec, parsed))
        return entry, parsed.argument

    def resolve(
        self, kind: str, spec: str, *, offer: Mapping[str, Any] | None = None, **options: Any
    ) -> Any:
        """Build what ``spec`` names: ``factory(argument, **options)`` for a ``prefix:argument``
        or URL spec, ``factory(**options)`` for a bare name.

        ``options`` are the caller's own and reach the factory as given (a factory that does
        not take one fails loudly). ``offer`` holds what the engine can supply (the run's
        registry, its concurrency, the judge model): each goes only to a factory that
        declares it, by name or through ``**kwargs``, so a plugin written before the engine
        offered it keeps working; ``options`` win over an offer of the same name."""
        entry, argument = self.lookup(kind, spec)
        factory = entry.load()
        if offer:
            options = {**accepted(factory, offer), **options}
        built = factory(**options) if argument is None else factory(argument, **options)
        if kind == "backend" and self.backend_wrapper is not None:
            return self.backend_wrapper(built)
        return built

    def with_backend_wrapper(self, wrapper: Callable[[Any], Any] | None) -> Registry:
        """This registry's plugins, with ``wrapper`` applied to every backend it resolves
        (``wrapper(backend) -> backend``; None: none). The registry itself is unchanged."""
        return Registry(
            self.pm,
            failures=self.failures,
            blocked=self.blocked,
            distributions=self._distributions,
            backend_wrapper=wrapper,
        )

    def __contains__(self, item: tuple[str, str]) -> bool:
        kind, name = item
        return self._owner(_check_kind(kind), name) is not None

    def _unknown_message(self, kind: str, spec: str, parsed: Spec) -> str:
        plural = _plural(kind)
        what = "bare URL" if parsed.name == "url" and parsed.argument else repr(parsed.name)
        lines = [f"no {kind} named {what} (from spec {spec!r})."]
        labels = sorted([*self._entries[kind], *self._aliases[kind]])
        close = difflib.get_close_matches(parsed.name, labels, n=3, cutoff=0.6)
        if not close:
            folded = {label.lower(): label for label in labels}
            close = [folded[m] for m in difflib.get_close_matches(parsed.name.lower(), folded, n=3)]
        if close:
            lines.append("Did you mean " + " or ".join(repr(c) for c in close) + "?")
        provider = KNOWN_PROVIDERS.get((kind, parsed.name))
        if provider:
            lines.append(f"{parsed.name!r} is provided by {provider}: pip install {provider}")
        if self._entries[kind]:
            lines.append(f"Registered {plural}:")
            for entry in self.entries(kind):
                alias = f" (aliases: {', '.join(entry.aliases)})" if entry.aliases else ""
                lines.append(f"  {entry.name}{alias} - {entry.provided_by}")
        else:
            lines.append(f"No {plural} are registered.")
        if self.failures:
            lines.append("Plugins that failed to load:")
            lines.extend(f"  {failure}" for failure in self.failures)
        if self.blocked:
            lines.append(f"Disabled by {DISABLE_ENV}: {', '.join(self.blocked)}")
        return "\n".join(lines)

    # -- presentation -------------------------------------------------------------------
    def table(self) -> PluginTable:
        return PluginTable(self.entries(), list(self.failures), self.blocked)


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown plugin kind {kind!r}; kinds are {', '.join(KINDS)}")
    return kind


def _plural(kind: str) -> str:
    return "strategies" if kind == "strategy" else f"{kind}s"


@attrs.frozen
class PluginTable(Sequence[Entry]):
    """What ``wai.plugins()`` returns: the entries as a sequence, printed as a table."""

    rows: list[Entry]
    failures: list[LoadFailure] = attrs.Factory(list)
    blocked: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: Any) -> Any:
        return self.rows[index]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.rows)

    def as_dicts(self) -> list[dict[str, Any]]:
        return [
            {
                "kind": e.kind,
                "name": e.name,
                "aliases": list(e.aliases),
                "distribution": e.distribution,
                "version": e.version,
                "plugin": e.plugin,
                "description": e.description,
            }
            for e in self.rows
        ]

    def __str__(self) -> str:
        header = ("kind", "name", "aliases", "distribution", "version")
        body = [
            (
                e.kind,
                e.name,
                ", ".join(e.aliases),
                e.distribution or f"({e.plugin})",
                e.version or "",
            )
            for e in self.rows
        ]
        widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]
        out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
        out.append("  ".join("-" * w for w in widths))
        out.extend(
            "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in body
        )
        if not body:
            out.append("(no plugins registered)")
        for failure in self.failures:
            out.append(f"failed to load: {failure}")
        if self.blocked:
            out.append(f"disabled by {DISABLE_ENV}: {', '.join(self.blocked)}")
        return "\n".join(out)


def has_observers(pm: pluggy.PluginManager, hook_name: str) -> bool:
    """Whether any plugin observes a lifecycle hook: a payload that costs something to build
    (a row's export, a run's report as plain data) is built only then."""
    return bool(getattr(pm.hook, hook_name).get_hookimpls())


def notify(pm: pluggy.PluginManager, hook_name: str, **kwargs: Any) -> list[str]:
    """Call every observer of a lifecycle hook on its own; return a warning per failure."""
    if hook_name not in hookspecs.LIFECYCLE_HOOKS:
        raise ValueError(f"{hook_name!r} is not a lifecycle hook")
    warnings: list[str] = []
    for impl in reversed(getattr(pm.hook, hook_name).get_hookimpls()):
        try:
            impl.function(**{name: kwargs[name] for name in impl.argnames})
        except Exception as exc:
            warnings.append(
                f"observer plugin {impl.plugin_name!r} failed in {hook_name}: {_describe(exc)}"
            )
    return warnings


@functools.cache
def default_registry() -> Registry:
    """The registry of installed entry points, built on first use and kept for the process."""
    return Registry.load()


def get_registry(registry: Registry | None = None) -> Registry:
    """``registry`` if given, else the process's entry-point registry."""
    if registry is None:
        return default_registry()
    if not isinstance(registry, Registry):
        raise TypeError(
            f"registry= must be a whileai Registry (Registry.load() or "
            f"Registry.from_plugins(...)), got {type(registry).__name__} {registry!r}"
        )
    return registry


def plugins(registry: Registry | None = None) -> PluginTable:
    """``wai.plugins()``: the registry as a table (kind, name, aliases, distribution,
    version), with the plugins that failed to load or were disabled."""
    return get_registry(registry).table()
