"""The candidate's process: runs the program, then answers the tests' calls into it.

Nothing here is trusted. The program runs in this process and may rewrite any of it, so this
module's only job is to be a faithful servant for an honest program: whatever it sends, the
trusted harness reads as plain values (``wire.decode``) and never as a verdict.

Messages in (from the harness): ``{"op": ..., "target": {"n": name} | {"h": id}, ...}`` with
ops ``call`` (``args``, ``kwargs``), ``getattr`` (``name``), ``iter``, ``next``, ``len``,
``getitem`` (``key``), ``str`` and ``repr``. Replies: ``{"ok": value}`` (with ``"mutated"``,
the arguments a call changed in place, for ``call``) or ``{"raised": description}``.
The first message out is ``{"loaded": {name: value}}`` once the program has run, for the
names the tests asked for, or ``{"failed": description}``.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
import traceback
import types
from typing import Any

from whileai_verifiers.sandbox import wire

MESSAGE_LIMIT = 600


def short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def describe(exc: BaseException, sources: dict[str, list[str]]) -> dict[str, Any]:
    """Type, message and the innermost line of ``sources`` the exception passed through."""
    where = None
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename in sources and frame.lineno:
            line = sources[frame.filename][frame.lineno - 1].strip()
            where = f"{frame.filename} line {frame.lineno}: {short(line)}"
            break
    if isinstance(exc, SyntaxError) and exc.filename in sources:
        where = f"{exc.filename} line {exc.lineno}"
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return {"error_type": type(exc).__name__, "message": short(message), "where": where}


def _builtin_base(exc: BaseException) -> str:
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return "Exception"


class Unsendable(Exception):
    """A result too large or too deep to copy out; not an exception of the program's."""


class Servant:
    """Holds the program's module and the objects handed out as handles."""

    def __init__(self, module: types.ModuleType, sources: dict[str, list[str]]) -> None:
        self.module = module
        self.sources = sources
        self.objects: dict[int, Any] = {}

    def handle(self, value: Any) -> dict[str, Any]:
        # A numpy scalar is a number: a program that computes with numpy still answers one.
        if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
            return wire.encode(value.item(), self.handle)  # type: ignore[no-any-return]
        key = id(value)
        self.objects[key] = value
        return {"h": key, "type": type(value).__qualname__, "callable": callable(value)}

    def resolve(self, tree: dict[str, Any]) -> Any:
        return self.objects[tree["h"]]

    def encode(self, value: Any) -> Any:
        try:
            return wire.encode(value, self.handle)
        except wire.WireError as exc:
            raise Unsendable(str(exc)) from None

    def target(self, ref: dict[str, Any]) -> Any:
        if "n" in ref:
            return self.module.__dict__[ref["n"]]
        return self.objects[ref["h"]]

    def export(self, names: list[str]) -> dict[str, Any]:
        """The program's top-level ``names`` that exist, as the tests will see them."""
        exported: dict[str, Any] = {}
        for name in names:
            if name not in self.module.__dict__:
                continue
            value = self.module.__dict__[name]
            if isinstance(value, types.ModuleType):
                exported[name] = {"h": 0, "module": value.__name__}
                continue
            try:
                exported[name] = self.encode(value)
            except Unsendable:
                exported[name] = self.handle(value)
        return exported

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        target = self.target(request["target"])
        decode = self.resolve
        if op == "call":
            args = [wire.decode(a, decode) for a in request.get("args", [])]
            kwargs = {k: wire.decode(v, decode) for k, v in request.get("kwargs", {}).items()}
            result = target(*args, **kwargs)
            mutated = [
                [index, self.encode(arg)]
                for index, arg in enumerate(args)
                if type(arg) in (list, dict, set, bytearray)
            ]
            mutated += [
                [name, self.encode(arg)]
                for name, arg in kwargs.items()
                if type(arg) in (list, dict, set, bytearray)
            ]
            return {"ok": self.encode(result), "mutated": mutated}
        if op == "getattr":
            return {"ok": self.encode(getattr(target, request["name"]))}
        if op == "iter":
            return {"ok": self.handle(iter(target))}
        if op == "next":
            try:
                return {"ok": self.encode(next(target))}
            except StopIteration:
                return {"stop": True}
        if op == "len":
            return {"ok": self.encode(len(target))}
        if op == "getitem":
            return {"ok": self.encode(target[wire.decode(request["key"], decode)])}
        if op == "str":
            return {"ok": self.encode(str(target))}
        if op == "repr":
            return {"ok": self.encode(repr(target))}
        raise ValueError(f"unknown request {op!r}")

    def raised(self, exc: BaseException) -> dict[str, Any]:
        description = describe(exc, self.sources)
        try:
            args = self.encode(list(exc.args))
        except Unsendable:
            args = self.encode([short(str(exc))])
        description.update(base=_builtin_base(exc), args=args)
        return {"raised": description}


def load(job: dict[str, Any]) -> tuple[types.ModuleType, dict[str, list[str]], dict[str, Any]]:
    """Run the program as ``__main__``; the module, its sources, and a failure if it raised."""
    text = job["program"]
    sources = {"<program>": text.splitlines()}
    linecache.cache["<program>"] = (len(text), None, text.splitlines(True), "<program>")
    sys.argv = ["<program>"]
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = module
    try:
        exec(compile(text, "<program>", "exec", dont_inherit=True), module.__dict__)
    except SystemExit as exc:
        failure = describe(exc, sources)
        failure.update(error_type="SystemExit", message=f"exit({exc.code!r}) during the program")
        return module, sources, failure
    except BaseException as exc:
        return module, sources, describe(exc, sources)
    return module, sources, {}


def serve(job: dict[str, Any], requests: int, replies: int) -> None:
    """Run the program, then answer requests until the harness closes its end."""
    module, sources, failure = load(job)
    if failure:
        wire.send(replies, {"failed": failure})
        return
    servant = Servant(module, sources)
    entry_point = job.get("entry_point")
    if entry_point and entry_point not in module.__dict__:
        wire.send(
            replies,
            {
                "failed": {
                    "error_type": "NameError",
                    "message": f"the program does not define {entry_point!r}",
                    "where": None,
                }
            },
        )
        return
    loaded = {"loaded": servant.export(list(job.get("names") or []))}
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    wire.send(replies, loaded)
    while True:
        try:
            request = wire.receive(requests)
        except EOFError:
            return
        try:
            reply = servant.answer(request)
        except Unsendable as exc:
            reply = {"unsendable": short(str(exc))}
        except BaseException as exc:
            reply = servant.raised(exc)
        # The init kills this process once the tests end, so what it printed goes out now.
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        try:
            wire.send(replies, reply)
        except wire.WireError as exc:
            wire.send(replies, {"unsendable": short(str(exc))})
