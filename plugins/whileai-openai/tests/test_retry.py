"""Retry-After parsing and the back-off schedule."""

from __future__ import annotations

import email.utils
import random
from datetime import UTC, datetime, timedelta

import pytest

from whileai_openai.retry import RetryPolicy, parse_retry_after


def test_retry_after_in_seconds_and_as_an_http_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("1.5") == 1.5
    later = email.utils.format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(later, now=now) == 30.0
    earlier = email.utils.format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(earlier, now=now) == 0.0
    for unreadable in (None, "", "soon", "nan", "-3x"):
        assert parse_retry_after(unreadable) is None
    assert parse_retry_after("-3") == 0.0


def test_backoff_grows_stays_under_its_ceiling_and_is_jittered() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0)
    rng = random.Random(0)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        waits = [policy.backoff(retry, rng) for _ in range(200)]
        assert all(ceiling / 2 <= w <= ceiling for w in waits)
        assert len(set(waits)) > 100  # spread out, not lock-step


def test_a_retry_after_is_never_shortened() -> None:
    policy = RetryPolicy()
    rng = random.Random(1)
    waits = [policy.after_header(5.0, rng) for _ in range(100)]
    assert all(5.0 <= w <= 5.5 for w in waits)


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="base_delay_s"):
        RetryPolicy(base_delay_s=-0.1)
