"""When to retry a failed model call, and how long to wait first.

Rate limits (429) and server errors (5xx) are transient; a server that says how long to wait
(``Retry-After``, in seconds or as an HTTP date) is obeyed; otherwise the wait grows
exponentially with jitter, so many rollouts that failed together do not retry together.
"""

from __future__ import annotations

import email.utils
import math
import random
from datetime import UTC, datetime

import attrs

#: HTTP statuses worth another try: timeouts, rate limits, and the server's own failures.
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
#: Failure kinds worth another try (a malformed or empty answer is not: it is a bug to see).
RETRYABLE_KINDS = frozenset({"rate_limited", "timeout", "connection"})


def _non_negative(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0 or math.isnan(value):
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen
class RetryPolicy:
    """How a backend retries: how often, how long it waits, and how long it will wait at most."""

    #: retries after the first attempt; the call fails with BackendError after that
    max_retries: int = attrs.field(default=6, validator=attrs.validators.ge(0))
    #: first back-off when the server gives no Retry-After; doubles per retry
    base_delay_s: float = attrs.field(default=0.5, validator=_non_negative)
    #: ceiling of one computed back-off
    max_delay_s: float = attrs.field(default=30.0, validator=_non_negative)
    #: the longest Retry-After obeyed; a server asking for more fails the call with that figure
    max_retry_after_s: float = attrs.field(default=120.0, validator=_non_negative)

    def backoff(self, retry: int, rng: random.Random) -> float:
        """The wait before retry number ``retry`` (1-based) with no Retry-After: "equal jitter",
        half fixed so the wait grows, half random so callers spread out."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** max(retry - 1, 0))
        return float(ceiling / 2 + rng.uniform(0, ceiling / 2))

    def after_header(self, seconds: float, rng: random.Random) -> float:
        """The wait for a Retry-After of ``seconds``: never less than asked, plus up to 10% (at
        most a second) so callers told the same instant do not all come back at once."""
        return seconds + rng.uniform(0, min(0.1 * seconds, 1.0))


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date), or None
    when absent or unreadable. A date in the past means "now" (0 seconds)."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else datetime.now(UTC)
    return max((when - current).total_seconds(), 0.0)
