"""Words in messages: counts (``1 row``, ``2 rows``, ``1 row has``, ``3 rows have``) and the
names a typo may have meant.

Every message that counts something goes through here, so a count of one reads as English
(a run of one situation, a comparison with one task unpaired) and not as ``1 rows``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence

_SIBILANT_ENDINGS = ("s", "x", "z", "ch", "sh")
_VOWELS = frozenset("aeiou")


def plural_of(noun: str) -> str:
    """``noun``'s regular English plural: row -> rows, entry -> entries, batch -> batches,
    key -> keys. A noun that is not regular is given its plural by the caller."""
    if noun.endswith("y") and len(noun) > 1 and noun[-2] not in _VOWELS:
        return noun[:-1] + "ies"
    if noun.endswith(_SIBILANT_ENDINGS):
        return noun + "es"
    return noun + "s"


def counted(n: int, noun: str, plural: str | None = None, *, spec: str = "") -> str:
    """``n`` and the noun in the number it takes: ``counted(1, "row")`` is ``"1 row"``,
    ``counted(0, "row")`` ``"0 rows"``, ``counted(12_000, "row", spec=",")`` ``"12,000 rows"``.
    ``plural`` for a noun whose plural is not regular (``counted(2, "body", "bodies")``)."""
    word = noun if n == 1 else (plural if plural is not None else plural_of(noun))
    return f"{n:{spec}} {word}"


def agreeing(n: int, one: str, many: str) -> str:
    """The word that agrees with a count of ``n``: ``agreeing(n, "has", "have")``,
    ``agreeing(n, "was", "were")``, ``agreeing(n, "it", "them")``."""
    return one if n == 1 else many


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """`` (did you mean 'unique'?)`` for a mistyped name with close matches among
    ``choices`` (up to three, closest first, at least ``cutoff`` alike by difflib's ratio),
    else ``""``: the tail of an error's message."""
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=cutoff)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def named_with_close(words: Iterable[str], choices: Iterable[str], cutoff: float = 0.6) -> str:
    """Each of ``words`` quoted, with the close matches :func:`did_you_mean` finds among
    ``choices``: ``'uniqe' (did you mean 'unique'?), 'colour'``, for an error naming the keys
    it does not know."""
    known = list(choices)
    return ", ".join(f"{w!r}{did_you_mean(str(w), known, cutoff)}" for w in words)


def name_some(names: Sequence[str], limit: int = 5, quote: Callable[[str], str] = repr) -> str:
    """``'a', 'b', 'c' and 4 more``: a list a person can read in one line."""
    shown = ", ".join(quote(n) for n in names[:limit])
    more = len(names) - limit
    return f"{shown} and {more} more" if more > 0 else shown
