"""Counts in words: ``1 row``, ``2 rows``, ``1 row has``, ``3 rows have``.

Every message that counts something goes through here, so a count of one reads as English
(a run of one situation, a comparison with one task unpaired) and not as ``1 rows``.
"""

from __future__ import annotations

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
