"""The progress of a long run: done/total, rate, time left, tokens, retries, waits and errors.

On a terminal, rich draws a live line. Off one (a CI log, a pipe, nohup), a plain line goes to
stderr every ``PLAIN_EVERY_S`` seconds and once at the end, so a long run in a log is never
silent; stdout is left alone, so ``--json`` output stays JSON.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: Seconds between plain progress lines off a terminal: often enough that a log shows a run
#: is alive, rare enough that a long run's log stays readable. Convention.
PLAIN_EVERY_S = 10.0


def asking_again(doing: str, asked: str) -> str:
    """What doing a stopped pass again costs, for its stop note:
    ``asking_again("grading", "judge")``. (``WHILEAI_CACHE`` is
    :data:`whileai.response_cache.CACHE_ENV`, named here as a person sets it.)"""
    return (
        f"{doing} again asks the {asked} again, except what a response cache holds (cache=, "
        "or WHILEAI_CACHE)"
    )


class RunProgress:
    """A progress display for one run: live on a terminal, a periodic plain line otherwise
    (``plain=False`` silences that; ``clock`` is for tests)."""

    def __init__(
        self,
        total: int,
        *,
        label: str = "rollouts",
        stream: IO[str] | None = None,
        refresh_per_second: float = 4.0,
        enabled: bool | None = None,
        plain: bool = True,
        usage: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.plain = plain and not self.enabled
        self.label = label
        #: whether the line shows tokens, retries and waits (a rollout's), or only errors
        self.usage = usage
        self.total = total
        self.done = 0
        #: retries shown: the larger of the finished rollouts' count and the backends' own
        self.retries = 0
        self._row_retries = 0
        self._backend_retries = 0
        self.errors = 0
        self.tokens = 0
        self.waited_s = 0.0
        self._clock = clock
        self._started = clock()
        self._last_line = self._started
        self._progress: Progress | None = None
        self._task: Any = None
        if self.enabled:
            from rich.console import Console

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[speed_text]}"),
                TextColumn(
                    "tokens {task.fields[tokens]}  retries {task.fields[retries]}  "
                    "errors {task.fields[errors]}"
                    if usage
                    else "errors {task.fields[errors]}"
                ),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                refresh_per_second=refresh_per_second,
                transient=False,
            )
            self._task = self._progress.add_task(
                label, total=total, retries=0, errors=0, tokens=0, speed_text=""
            )

    def __enter__(self) -> RunProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
        elif self.plain and self.done:
            self._write_line()

    def line(self) -> str:
        """The plain line: what is done, how fast, what is left, and what it cost."""
        elapsed = max(self._clock() - self._started, 1e-9)
        rate = self.done / elapsed
        left = self.total - self.done
        eta = f"{left / rate:,.0f} s left" if rate > 0 and left > 0 else "done" if not left else "-"
        usage = (
            f"tokens {self.tokens:,}, retries {self.retries}, waited {self.waited_s:,.1f} s, "
            if self.usage
            else ""
        )
        return (
            f"whileai: {self.done}/{self.total} {self.label}, {rate:,.2f}/s, {eta}, {usage}"
            f"errors {self.errors}"
        )

    def _write_line(self) -> None:
        self._last_line = self._clock()
        self.stream.write(self.line() + "\n")
        self.stream.flush()

    def _maybe_line(self) -> None:
        if self.plain and self._clock() - self._last_line >= PLAIN_EVERY_S:
            self._write_line()

    @contextmanager
    def shown(self, if_stopped: str | Callable[[], str]) -> Iterator[RunProgress]:
        """This display while the block runs. A block stopped part way (Ctrl-C, a cancelled
        task) says, once the display is closed and before the traceback, what it left and
        how to go on (``if_stopped``, or what it returns then), so a person hours in reads
        what is safe."""
        try:
            with self:
                yield self
        except (asyncio.CancelledError, KeyboardInterrupt):
            said = if_stopped() if callable(if_stopped) else if_stopped
            self.stream.write(
                f"whileai: stopped at {self.done}/{self.total} {self.label}: {said}\n"
            )
            self.stream.flush()
            raise

    def backend_retries(self, retries: int) -> None:
        """The retries the run's backends report so far (their ``stats``), which count calls
        still waiting and calls that failed, not only the finished rollouts' retries."""
        self._backend_retries = max(self._backend_retries, retries)
        shown = max(self._row_retries, self._backend_retries)
        if shown != self.retries:
            self.retries = shown
            if self._progress is not None:
                self._progress.update(self._task, retries=self.retries)
        self._maybe_line()

    def advance(
        self,
        *,
        retries: int = 0,
        error: bool = False,
        resumed: bool = False,
        tokens: int = 0,
        waited_s: float = 0.0,
    ) -> None:
        self.done += 1
        self._row_retries += retries
        self.retries = max(self._row_retries, self._backend_retries)
        self.errors += int(error)
        self.tokens += tokens
        self.waited_s += waited_s
        if self._progress is None:
            self._maybe_line()
            return
        task = self._progress.tasks[0]
        speed = task.speed
        speed_text = f"{speed:,.1f}/s" if speed else ""
        self._progress.update(
            self._task,
            advance=1,
            retries=self.retries,
            errors=self.errors,
            tokens=f"{self.tokens:,}",
            speed_text=speed_text,
        )

    def grow(self, extra: int) -> None:
        """More rollouts were planned (adaptive repeats)."""
        self.total += extra
        if self._progress is not None:
            self._progress.update(self._task, total=self.total)
