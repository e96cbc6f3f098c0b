"""The counters every backend keeps for a run's report, and the error a failed call raises."""

from __future__ import annotations

import json

from whileai.backends import BackendError, BackendStats


def test_stats_count_failures_by_kind_and_read_as_one_sentence() -> None:
    stats = BackendStats()
    stats.calls = 3
    stats.succeeded = 2
    stats.retries = 4
    stats.waits = 4
    stats.waited_s = 12.3456
    stats.rate_limited = 3
    for kind in ("rate_limited", "rate_limited", "rate_limited", "http_500"):
        stats.count_error(kind)
    stats.count_failure("http_500")

    assert stats.failed == 1
    assert stats.errors == {"rate_limited": 3, "http_500": 1}
    assert stats.failures == {"http_500": 1}
    data = stats.as_dict()
    assert data["waited_s"] == 12.346
    assert json.loads(json.dumps(data)) == data  # ready for a report or a sidecar
    assert stats.summary() == (
        "3 calls (1 failed); 4 retries; waited 12.3 s over 4 pauses, 3 rate-limit answers; "
        "errors: http_500 1, rate_limited 3"
    )


def test_quiet_stats_say_only_what_happened() -> None:
    stats = BackendStats(calls=2, succeeded=2)
    assert stats.summary() == "2 calls (0 failed)"


def test_a_backend_error_carries_kind_retries_and_wait() -> None:
    error = BackendError("rate limited", kind="rate_limited", retries=6, waited_s=40.0)
    assert (error.kind, error.retries, error.waited_s) == ("rate_limited", 6, 40.0)
    assert BackendError("boom").kind == "error"
