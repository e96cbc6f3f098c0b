"""The progress line: live on a terminal; off one, a plain line on stderr now and then and at
the end, saying done/total, rate, time left, tokens, retries, waits and errors."""

from __future__ import annotations

import io

from whileai.progress import RunProgress


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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_plain_line_every_ten_seconds_and_one_at_the_end() -> None:
    log, clock = io.StringIO(), Clock()
    with RunProgress(4, stream=log, clock=clock) as progress:
        clock.now = 2.0
        progress.advance(tokens=1200, retries=1)
        assert log.getvalue() == "", "not ten seconds yet"
        clock.now = 10.0
        progress.advance(tokens=800, waited_s=1.5, error=True)
        clock.now = 12.0
        progress.advance(tokens=1000)
    lines = log.getvalue().splitlines()
    assert lines[0] == (
        "whileai: 2/4 rollouts, 0.20/s, 10 s left, tokens 2,000, retries 1, waited 1.5 s, errors 1"
    )
    assert lines[-1].startswith("whileai: 3/4 rollouts, 0.25/s, 4 s left, tokens 3,000")
    assert len(lines) == 2


def test_a_plain_line_can_be_silenced_and_a_run_that_did_nothing_prints_none() -> None:
    log = io.StringIO()
    with RunProgress(2, stream=log, plain=False) as progress:
        progress.advance()
        progress.advance()
    assert log.getvalue() == "" and progress.done == 2
    with RunProgress(2, stream=log):
        pass
    assert log.getvalue() == ""


def test_progress_shows_the_backends_retries_before_any_rollout_finishes() -> None:
    screen = Terminal()
    with RunProgress(4, stream=screen) as progress:
        progress.backend_retries(7)  # calls still waiting on Retry-After
        assert progress.retries == 7
        progress.advance(retries=2)  # a finished rollout's retries are among those seven
        assert progress.retries == 7
    assert "retries 7" in screen.getvalue()


def test_a_stop_note_names_the_cache_variable_a_person_sets() -> None:
    from whileai.progress import asking_again
    from whileai.response_cache import CACHE_ENV

    assert asking_again("grading", "judge") == (
        f"grading again asks the judge again, except what a response cache holds (cache=, or "
        f"{CACHE_ENV})"
    )
