"""The tests' process: the trusted side, and the only one whose report can say "passed".

It runs the reference's tests in an interpreter the candidate never ran code in, marked
non-dumpable so the candidate's process (the same uid) cannot trace it or open its files.
The program's names the tests use are stand-ins: calling one sends the arguments, as plain
values, to the candidate's process and returns what came back, decoded into plain values
(``wire``). So every comparison, ``assert`` and ``unittest`` check runs here, on values alone;
the candidate can answer wrongly, slowly or not at all, but cannot reach the code that decides.

"Passed" is written only after the tests ran to their end, and never if, along the way, the
candidate exited, its process died, it sent a reply that was not a well-formed value, or the
tests compared, hashed or took the truth of an object that lives in the candidate's process
(its ``__eq__`` would be the candidate's code deciding the comparison). Those are failures,
flagged ``hack_suspected`` with the reason.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import linecache
import sys
import traceback
import types
from typing import Any, NoReturn

from whileai_verifiers.sandbox import pysource, wire
from whileai_verifiers.sandbox.candidate import describe, short


class CandidateGone(BaseException):
    """The candidate exited or died while the tests needed it. A BaseException, so a test's
    ``except Exception`` does not swallow it; a bare ``except:`` may, and the run fails anyway."""


class Unverifiable(BaseException):
    """The tests asked for something only the candidate's own code could decide."""


class Unsupported(Exception):
    """The tests did something that cannot be carried across (a function passed to the
    candidate); the run is an error, not a failure, since no verdict could be reached."""


class RemoteError(Exception):
    """Base of every exception re-raised here for one the candidate raised."""

    remote: dict[str, Any]


@functools.cache
def _remote_class(base: type[Exception]) -> type[Exception]:
    return type(base.__name__, (base, RemoteError), {"__module__": "builtins"})


def remote_exception(description: dict[str, Any], args: list[Any]) -> BaseException:
    """An exception of the builtin class the candidate's derives from, so ``except ValueError``
    in a test catches a ValueError the candidate raised; marked as the candidate's."""
    base = getattr(builtins, str(description.get("base") or "Exception"), None)
    if not (isinstance(base, type) and issubclass(base, Exception)):
        base = Exception
    cls = _remote_class(base)
    try:
        exc = cls(*args)
    except Exception:
        exc = cls(str(description.get("message", "")))
    exc.remote = description  # type: ignore[attr-defined]
    return exc


# Exceptions that steer the tests' own control flow rather than report an error: an exit ends
# them, and a StopIteration out of a call ends the loop the call is in, as if no case were left.
_CONTROL_FLOW = frozenset(
    {
        "SystemExit",
        "KeyboardInterrupt",
        "GeneratorExit",
        "BaseException",
        "StopIteration",
        "StopAsyncIteration",
    }
)


class Channel:
    """Requests to the candidate's process and what it answered."""

    def __init__(self, requests: int, replies: int) -> None:
        self.requests = requests
        self.replies = replies
        self.calls = 0
        # Each is set once and never cleared: a failure the tests catch still fails the run.
        self.gone: str | None = None
        self.hack: str | None = None
        # The candidate's process closed the channel (it exited or died), as opposed to raising
        # an exit the harness caught: then its exit status says why.
        self.ended = False
        # Only the program's own names may stand for modules; a reply that claims to be one is
        # a forgery, never an import on the candidate's word.
        self.modules_allowed = False

    def fail_gone(self, why: str, *, hack: bool = False) -> NoReturn:
        self.gone = self.gone or why
        if hack:
            self.hack = self.hack or why
        raise CandidateGone(self.gone)

    def receive(self) -> dict[str, Any]:
        try:
            reply = wire.receive(self.replies)
        except EOFError:
            self.ended = True
            self.fail_gone("the candidate's process ended")
        except (wire.WireError, OSError) as exc:
            self.fail_gone(f"the candidate's process sent {exc}", hack=True)
        except (MemoryError, RecursionError) as exc:
            self.fail_gone(
                f"the candidate's reply exhausted the tests' process ({exc!r})", hack=True
            )
        if type(reply) is not dict:
            self.fail_gone("the candidate's process sent a reply that is not an object", hack=True)
        return reply

    def decode(self, tree: Any) -> Any:
        try:
            return wire.decode(tree, self.stand_in)
        except wire.WireError as exc:
            self.fail_gone(f"the candidate's process sent a {exc}", hack=True)
        except MemoryError as exc:
            self.fail_gone(
                f"the candidate's reply exhausted the tests' process ({exc!r})", hack=True
            )

    def stand_in(self, tree: dict[str, Any]) -> Any:
        if "module" in tree:
            if not self.modules_allowed:
                self.fail_gone(
                    "the candidate's process sent a module where a value goes", hack=True
                )
            module = trusted_module(str(tree["module"]))
            if module is not None:
                return module
        return RemoteObject(self, {"h": tree["h"]}, str(tree.get("type", "object")))

    def encode(self, value: Any) -> Any:
        def handle_of(item: Any) -> dict[str, Any]:
            if isinstance(item, RemoteObject):
                return dict(object.__getattribute__(item, "_ref"))
            raise Unsupported(
                f"the tests passed a {type(item).__name__} to the candidate; only plain values "
                "and the candidate's own objects can cross into its process"
            )

        try:
            return wire.encode(value, handle_of)
        except wire.WireError as exc:
            raise Unsupported(f"the tests passed a value that cannot cross: {exc}") from None

    def exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.gone:
            raise CandidateGone(self.gone)
        try:
            wire.send(self.requests, request)
        except OSError:
            self.fail_gone("the candidate's process ended")
        return self.receive()

    def ask(self, request: dict[str, Any]) -> Any:
        return self.interpret(self.exchange(request), iterating=request.get("op") == "next")

    def call(self, ref: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        request = {
            "op": "call",
            "target": ref,
            "args": [self.encode(a) for a in args],
            "kwargs": {str(k): self.encode(v) for k, v in kwargs.items()},
        }
        self.calls += 1
        reply = self.exchange(request)
        if "ok" in reply:
            self.copy_back(reply.get("mutated"), args, kwargs)
        return self.interpret(reply)

    def interpret(self, reply: dict[str, Any], *, iterating: bool = False) -> Any:
        if "ok" in reply:
            return self.decode(reply["ok"])
        if "stop" in reply:
            # Only the end of an iteration: anywhere else a StopIteration would end whatever
            # loop the tests are in (``all(map(check, cases))`` would pass on no cases).
            if not iterating:
                self.fail_gone(
                    "the candidate's process ended an iteration it was not in", hack=True
                )
            raise StopIteration
        if "unsendable" in reply:
            raise CandidateValueError(
                f"the candidate returned a value that cannot be copied out: {reply['unsendable']}"
            )
        raised = reply.get("raised")
        if type(raised) is not dict:
            self.fail_gone("the candidate's process sent an unknown reply", hack=True)
        base = str(raised.get("base") or "")
        if base in _CONTROL_FLOW:
            message = short(str(raised.get("message") or ""))
            self.fail_gone(f"{base}({message}) raised by the candidate during the tests", hack=True)
        args = self.decode(raised.get("args", {"l": []}))
        raise remote_exception(raised, args if type(args) is list else [])

    def copy_back(self, mutated: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A list, dict, set or bytearray the candidate changed in place changes here too."""
        if not mutated:
            return
        if type(mutated) is not list:
            self.fail_gone("the candidate's process sent a malformed list of changes", hack=True)
        for entry in mutated:
            if type(entry) is not list or len(entry) != 2:
                continue
            where, tree = entry
            if type(where) is int and 0 <= where < len(args):
                original = args[where]
            elif type(where) is str and where in kwargs:
                original = kwargs[where]
            else:
                continue
            new = self.decode(tree)
            if type(new) is not type(original) or new == original:
                continue
            if isinstance(original, list | bytearray):
                original[:] = new
            else:
                original.clear()
                original.update(new)


class CandidateValueError(Exception):
    """The candidate returned something too large or deep to copy out."""


def _unverifiable(what: str, method: str) -> Any:
    def refuse(self: RemoteObject, *args: Any) -> NoReturn:
        channel = object.__getattribute__(self, "_channel")
        kind = object.__getattribute__(self, "_type")
        why = (
            f"the tests {what} an object of the candidate's type {kind!r}, which would run the "
            f"candidate's own {method}; only plain values are compared"
        )
        channel.hack = channel.hack or why
        raise Unverifiable(why)

    return refuse


class RemoteObject:
    """Stands in for an object that lives in the candidate's process."""

    __slots__ = ("_channel", "_ref", "_type")

    def __init__(self, channel: Channel, ref: dict[str, Any], kind: str) -> None:
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_type", kind)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._channel.call(self._ref, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._channel.ask({"op": "getattr", "target": self._ref, "name": name})

    def __iter__(self) -> RemoteObject:
        iterator = self._channel.ask({"op": "iter", "target": self._ref})
        if not isinstance(iterator, RemoteObject):
            raise TypeError("the candidate's iterator came back as a plain value")
        return iterator

    def __next__(self) -> Any:
        return self._channel.ask({"op": "next", "target": self._ref})

    def __len__(self) -> int:
        length = self._channel.ask({"op": "len", "target": self._ref})
        if type(length) is not int:
            raise TypeError(f"the candidate's len() gave {type(length).__name__}")
        return length

    def __getitem__(self, key: Any) -> Any:
        return self._channel.ask(
            {"op": "getitem", "target": self._ref, "key": self._channel.encode(key)}
        )

    def __str__(self) -> str:
        return str(self._channel.ask({"op": "str", "target": self._ref}))

    def __repr__(self) -> str:
        return str(self._channel.ask({"op": "repr", "target": self._ref}))

    def __setattr__(self, name: str, value: Any) -> None:
        raise Unsupported("the tests set an attribute on an object in the candidate's process")

    __eq__ = _unverifiable("compared", "__eq__")
    __ne__ = _unverifiable("compared", "__ne__")
    __lt__ = _unverifiable("compared", "__lt__")
    __le__ = _unverifiable("compared", "__le__")
    __gt__ = _unverifiable("compared", "__gt__")
    __ge__ = _unverifiable("compared", "__ge__")
    __bool__ = _unverifiable("took the truth of", "__bool__")
    __hash__ = _unverifiable("hashed", "__hash__")
    __contains__ = _unverifiable("searched", "__contains__")


def trusted_module(name: str) -> types.ModuleType | None:
    """The tests' own copy of a standard-library module the program imported (the candidate's
    copy may have been patched); None for any other, which stays the candidate's object: only
    standard modules are imported on its word."""
    if name.partition(".")[0] not in sys.stdlib_module_names:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def referenced_names(tests: str) -> list[str]:
    """Every name the tests read: only these are asked of the program."""
    try:
        tree = pysource.parse(tests)
    except SyntaxError:
        return []
    return sorted({node.id for node in ast.walk(tree) if isinstance(node, ast.Name)})


def defined_names(source: str) -> set[str]:
    """The names ``source`` defines at its top level (functions, classes, assignments)."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def prompt_definitions(prompt: str, entry_point: str, uses_helpers: bool = True) -> dict[str, Any]:
    """The prompt's own helpers (``poly`` beside ``find_zero``), run here from the reference's
    text: the tests check the candidate with them, so the candidate must not supply them."""
    if not prompt.strip() or not uses_helpers:
        return {}
    namespace: dict[str, Any] = {"__name__": "__prompt__", "__builtins__": builtins}
    try:
        exec(compile(prompt, "<prompt>", "exec", dont_inherit=True), namespace)
    except Exception:
        return {}
    namespace.pop(entry_point, None)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def run_tests(job: dict[str, Any], channel: Channel) -> dict[str, Any]:
    """Wait for the program to load, then run the tests against it; the outcome to report."""
    tests = job.get("tests") or ""
    sources = {"<tests>": tests.splitlines()}
    linecache.cache["<tests>"] = (len(tests), None, tests.splitlines(True), "<tests>")
    # Compiled while the candidate's process loads the program, not after.
    try:
        code: types.CodeType | SyntaxError = compile(tests, "<tests>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        code = exc
    try:
        first = channel.receive()
    except CandidateGone as gone:
        error_type = "CandidateEnded" if channel.ended else "CandidateGone"
        failure = {
            "status": "failed",
            "phase": "program",
            "error_type": error_type,
            "message": str(gone),
            "where": None,
        }
        if channel.hack:
            failure["hack_suspected"] = channel.hack
        return failure
    if "failed" in first:
        failed = first["failed"] if type(first["failed"]) is dict else {}
        return {
            "status": "failed",
            "phase": "program",
            "error_type": short(str(failed.get("error_type", "Error"))),
            "message": short(str(failed.get("message", ""))),
            "where": short(str(failed["where"])) if failed.get("where") else None,
        }
    loaded = first.get("loaded")
    if type(loaded) is not dict:
        why = "the candidate's process sent an unknown first reply"
        return {
            "status": "failed",
            "phase": "program",
            "error_type": "CandidateGone",
            "message": why,
            "where": None,
            "hack_suspected": why,
        }
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    entry_point = job.get("entry_point")
    try:
        channel.modules_allowed = True
        for name, tree in loaded.items():
            namespace[str(name)] = channel.decode(tree)
        channel.modules_allowed = False
        if entry_point:
            namespace.update(
                prompt_definitions(
                    job.get("prompt") or "", entry_point, bool(job.get("prompt_helpers"))
                )
            )
    except (CandidateGone, Unsupported) as exc:
        return _outcome_of(exc, channel, sources, "program")
    sys.modules["__main__"] = module
    sys.argv = ["<tests>"]
    phase = "tests"
    try:
        if isinstance(code, SyntaxError):
            raise code
        exec(code, namespace)
        if entry_point:
            candidate = namespace.get(entry_point)
            check = namespace.get("check")
            if not callable(check):
                return {"status": "error", "message": "the tests define no check(candidate)"}
            check(candidate)
    except SystemExit as exc:
        # The tests' own exit (unittest.main() ends with one): the candidate's exits arrive as
        # CandidateGone, never as SystemExit, so this is the reference's word.
        if exc.code not in (None, 0, False):
            return _flagged(
                channel,
                {
                    "status": "failed",
                    "phase": phase,
                    "error_type": "SystemExit",
                    "message": f"exit({exc.code!r}) during the tests",
                    "where": describe(exc, sources)["where"],
                },
            )
    except BaseException as exc:
        return _outcome_of(exc, channel, sources, phase)
    return _flagged(channel, {"status": "passed"})


def _flagged(channel: Channel, outcome: dict[str, Any]) -> dict[str, Any]:
    """The outcome, turned into a failure if anything along the way rules a pass out: the
    candidate gone, or a hack suspected, even where the tests caught what it raised."""
    outcome["calls"] = channel.calls
    why = channel.hack or channel.gone
    if why is None:
        return outcome
    failure = {
        "status": "failed",
        "phase": "tests",
        "error_type": ("CandidateEnded" if channel.ended else "CandidateGone")
        if channel.gone
        else "Unverifiable",
        "message": why,
        "where": outcome.get("where"),
        "calls": channel.calls,
    }
    if channel.hack:
        failure["hack_suspected"] = channel.hack
    return failure


def _outcome_of(
    exc: BaseException, channel: Channel, sources: dict[str, list[str]], phase: str
) -> dict[str, Any]:
    if isinstance(exc, Unsupported):
        return {"status": "error", "message": str(exc), "calls": channel.calls}
    if isinstance(exc, CandidateGone | Unverifiable):
        return _flagged(channel, {"status": "failed"})
    if isinstance(exc, RemoteError):
        remote = exc.remote
        return _flagged(
            channel,
            {
                "status": "failed",
                "phase": phase,
                "error_type": short(str(remote.get("error_type", "Error"))),
                "message": short(str(remote.get("message", ""))),
                "where": short(str(remote["where"])) if remote.get("where") else None,
            },
        )
    return _flagged(channel, {"status": "failed", "phase": phase, **describe(exc, sources)})


def serve(job: dict[str, Any], requests: int, replies: int) -> dict[str, Any]:
    """Run the tests; the outcome. Any failure of this harness itself is an error, never a pass."""
    channel = Channel(requests, replies)
    try:
        return run_tests(job, channel)
    except BaseException as exc:
        return {
            "status": "sandbox_error",
            "message": f"the test harness failed: {type(exc).__name__}: {exc}",
            "trace": traceback.format_exc()[-2000:],
        }
