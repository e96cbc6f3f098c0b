"""The progress line of a long run: done/total, rate, retries and errors.

Shown with rich on a terminal; silent when output is not a terminal (CI logs, pipes, tests),
so nothing but the caller's own prints reaches a log.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)


class RunProgress:
    """A progress display for one run; a no-op when ``stream`` is not a terminal."""

    def __init__(
        self,
        total: int,
        *,
        label: str = "rollouts",
        stream: IO[str] | None = None,
        refresh_per_second: float = 4.0,
        enabled: bool | None = None,
    ) -> None:
        out = stream if stream is not None else sys.stderr
        self.enabled = out.isatty() if enabled is None else enabled
        self.total = total
        self.done = 0
        #: retries shown: the larger of the finished rollouts' count and the backends' own
        self.retries = 0
        self._row_retries = 0
        self._backend_retries = 0
        self.errors = 0
        self._progress: Progress | None = None
        self._task: Any = None
        if self.enabled:
            from rich.console import Console

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[speed_text]}"),
                TextColumn("retries {task.fields[retries]}  errors {task.fields[errors]}"),
                TimeElapsedColumn(),
                console=Console(file=out),
                refresh_per_second=refresh_per_second,
                transient=False,
            )
            self._task = self._progress.add_task(
                label, total=total, retries=0, errors=0, speed_text=""
            )

    def __enter__(self) -> RunProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def backend_retries(self, retries: int) -> None:
        """The retries the run's backends report so far (their ``stats``), which count calls
        still waiting and calls that failed, not only the finished rollouts' retries."""
        self._backend_retries = max(self._backend_retries, retries)
        shown = max(self._row_retries, self._backend_retries)
        if shown == self.retries:
            return
        self.retries = shown
        if self._progress is not None:
            self._progress.update(self._task, retries=self.retries)

    def advance(self, *, retries: int = 0, error: bool = False, resumed: bool = False) -> None:
        self.done += 1
        self._row_retries += retries
        self.retries = max(self._row_retries, self._backend_retries)
        self.errors += int(error)
        if self._progress is None:
            return
        task = self._progress.tasks[0]
        speed = task.speed
        speed_text = f"{speed:,.1f}/s" if speed else ""
        self._progress.update(
            self._task,
            advance=1,
            retries=self.retries,
            errors=self.errors,
            speed_text=speed_text,
        )

    def grow(self, extra: int) -> None:
        """More rollouts were planned (adaptive repeats)."""
        self.total += extra
        if self._progress is not None:
            self._progress.update(self._task, total=self.total)
