"""The progress line shows done/total, retries and errors on a terminal, nothing otherwise."""

from __future__ import annotations

import io

from whileai.simulations.progress import RunProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_counts_done_retries_and_errors() -> None:
    screen = Terminal()
    with RunProgress(3, stream=screen) as progress:
        progress.advance(retries=2)
        progress.advance(error=True)
        progress.advance()
    shown = screen.getvalue()
    assert "3/3" in shown and "retries 2" in shown and "errors 1" in shown


def test_progress_is_silent_off_a_terminal() -> None:
    log = io.StringIO()
    with RunProgress(2, stream=log) as progress:
        progress.advance()
        progress.advance()
    assert log.getvalue() == "" and progress.done == 2


def test_progress_shows_the_backends_retries_before_any_rollout_finishes() -> None:
    screen = Terminal()
    with RunProgress(4, stream=screen) as progress:
        progress.backend_retries(7)  # calls still waiting on Retry-After
        assert progress.retries == 7
        progress.advance(retries=2)  # a finished rollout's retries are among those seven
        assert progress.retries == 7
    assert "retries 7" in screen.getvalue()
