"""The values a row holds in memory that an export must not carry, and their masking.

A row's privileged block is the answer key: the ``reference`` (whole, and each line of a
multi-line one such as a test suite), the ``principle`` and ``rubric``, every form of the
reference a grader said its reason quotes (``quoted``, from ``Verdict.quotes``), and the facts
of the situation (every value in ``hidden_state`` and ``goal``); a value of these that is one
number (``42``, ``"42"``, ``"1/2"``) is also compared with the numbers a row holds, where a
grader records what it parsed or a world's state holds it. On export, what the run wrote
about an episode (a grader's reason and metadata, the world's final state, error text, carried
fields) is searched for each of them in every encoding :func:`forms` names (a value of eight characters
or more without regard to case), and a hit becomes ``***``. What the agent saw and said (the prompt and the transcript)
is not searched: a correct answer is the agent's own, and the training signal.

Two limits, both documented in docs/rows.md: a fact shorter than :data:`MIN_FACT` characters (a
small number, "yes") or one the situation shows anyway (in its prompt or as one of its
dimensions) is not masked, since it says nothing the row does not; base64 and other encodings
that change every character are out of scope.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
import threading
import urllib.parse
from collections.abc import Mapping
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

import attrs

from whileai.schema.jsonline import key_text
from whileai.schema.reserved import MASK

#: Lines of a multi-line reference (a test suite) shorter than this are not masked on their own.
MIN_LINE = 8

#: Facts of a situation (hidden state, goal) shorter than this match ordinary text too often
#: to mask; the reference, principle and rubric are masked at any length.
MIN_FACT = 4

#: A value at least this long is also masked where it was cut short: any run of its first
#: characters at least half its length (and at least :data:`MIN_CUT`) long.
LONG_VALUE = 16
MIN_CUT = 12

FACT_FIELDS: tuple[str, ...] = ("hidden_state", "goal")

#: How many strings an answer key remembers the masking of, and how long one may be: room for
#: the strings of a world's state (a shop's: about 45 distinct), and at most some 60 MB over
#: the keys a process keeps (one a situation, the latest 1,024: ``_cached_key``).
_REMEMBERED_STRINGS = 128
_REMEMBERED_LENGTH = 128


@attrs.frozen
class AnswerKey:
    """What of one row must not leave memory, each value as written (longest first)."""

    values: tuple[str, ...]
    #: the numbers the key's values stand for (42 for ``42`` or ``"42"``): a number equal to one
    #: is masked where it stands as a number
    numbers: tuple[float, ...] = ()
    #: the needles a text can hold, by the marks (:func:`_marks_of`) it holds (made as asked for: a
    #: situation's key serves all its rollouts)
    _candidates: dict[int, tuple[_Needle, ...]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )

    #: each short string :meth:`mask_strings` masked, and what it became: a situation's
    #: rollouts write the same ids, names and statuses again (a bounded number, cleared when
    #: full, so a key kept for a long run holds the strings of its latest rows)
    _masked: dict[str, str] = attrs.field(factory=dict, init=False, eq=False, repr=False)
    #: held while :meth:`mask_strings` reads and fills ``_masked``: a key is shared by every
    #: row of its situation, and rows may be exported from several threads at once
    #: (``data.save`` in one while a loader exports in another)
    _memo_lock: threading.Lock = attrs.field(
        factory=threading.Lock, init=False, eq=False, repr=False
    )

    def __bool__(self) -> bool:
        return bool(self.values or self.numbers)

    def mask(self, value: Any, written: str | None = None) -> Any:
        """``value`` with every form of the key masked in its strings and mapping keys, as a
        new object (the same object when nothing in it matched). ``written``, when given, is
        ``value`` as JSON already (``json.dumps(value, ensure_ascii=False)``)."""
        return self._mask_comparing(value, written, self.numbers)

    def _mask_comparing(self, value: Any, written: str | None, numbers: tuple[float, ...]) -> Any:
        """:meth:`mask`, comparing the numbers ``value`` holds with ``numbers`` (none: a value
        whose numbers are compared elsewhere, or that holds none)."""
        if not self:
            return value
        text = isinstance(value, str)
        if written is None:
            try:
                written = json.dumps(value, ensure_ascii=False, default=str)
            except (TypeError, ValueError, RecursionError):
                return _Masker(self.values, numbers).value(value)
        lowered = written.lower()
        if len(lowered) != len(written):
            # lower() changed the length (a few non-ASCII letters): read every string
            return _Masker(self.values, numbers).value(value)
        # The value written as JSON holds each of its strings JSON-escaped, so a form of the
        # key that a string holds is in the text, escaped: the masking is done on that text
        # (C-speed searches rather than a walk over every string), and read back. Whatever
        # the text cannot settle (a number to compare, text that no longer parses) goes to
        # the walk, which reads every string.
        found = self._needles_in(written, lowered)
        # (numbers are compared where they stand as numbers: a string has none)
        if not found and (text or not numbers):
            return value
        if numbers and not text:
            return _Masker(self.values, numbers).value(value)
        spans, in_keys = _spans(written, lowered, found)
        if not spans:
            return value
        try:
            masked = _merged_masks(_masked_spans(written, spans))
            # only a mask inside a key can make two keys alike
            if in_keys:
                return json.loads(masked, object_pairs_hook=_distinct_keys)
            return json.loads(masked)
        except ValueError:
            return _Masker(self.values, numbers).value(value)

    def _needles_in(self, written: str, lowered: str) -> list[_Needle]:
        """The needles of the key that ``written`` (JSON text) holds."""
        # a form with an escape, a percent sign or a plus cannot be in a text without one:
        # most of a key's forms are ruled out by three searches rather than one each
        marks = _marks_of(written)
        candidates = self._candidates.get(marks)
        if candidates is None:
            candidates = tuple(n for v in self.values for n in _needles(v, marks))
            self._candidates[marks] = candidates
        return [n for n in candidates if n.text in (written if n.exact_case else lowered)]

    def mask_strings(self, value: Any) -> Any:
        """:meth:`mask` for a value of JSON's own kinds (what ``json.loads`` returns), read
        string by string: the strings this key has not masked before are masked together in
        one text, and what each became is remembered for the next rows (a situation's
        rollouts write the same ids, names and statuses again).

        The same masking as :meth:`mask`: there every match is inside one JSON string, and
        what decides it (the string's text, the characters either side of the match within
        it, the quotes that bound it) is all in that string's own JSON text; a number is
        compared where it stands, as :meth:`mask`'s walk compares it. The same object when
        nothing changed."""
        if not self:
            return value
        with self._memo_lock:
            return self._masked_by_memo(value)

    def _masked_by_memo(self, value: Any) -> Any:
        """:meth:`mask_strings`' work, with the table of strings masked before to itself."""
        memo = self._masked
        if memo:
            # a situation's later rows hold the strings its first ones did: one walk masks
            # them, the second (collect, then mask) is for a row with something new
            try:
                return self._strings_masked(value, memo)
            except KeyError:  # a string not in the table, or a value of another kind
                pass
        strings: set[str] = set()
        if not _collect_strings(value, strings):
            return self.mask(value)
        new = [text for text in strings if text not in memo]
        if not new:
            return self._strings_masked(value, memo)
        if len(memo) + len(new) > _REMEMBERED_STRINGS:
            # full: start again with this row's strings
            memo.clear()
            new = list(strings)
        # strings only: the row's numbers are compared as the table is read
        masked = self._mask_comparing(new, None, ())
        # a row with more strings than are remembered, or long ones, reads a table of its
        # own; what the memory takes of it stays within its bounds
        fits = len(new) <= _REMEMBERED_STRINGS
        table = memo if fits and all(len(t) <= _REMEMBERED_LENGTH for t in new) else {}
        for text, became in zip(new, masked, strict=True):
            became = text if became == text else became
            table[text] = became
            if table is not memo and fits and len(text) <= _REMEMBERED_LENGTH:
                memo[text] = became
        if table is not memo:
            table.update((text, became) for text, became in memo.items() if text not in table)
        return self._strings_masked(value, table)

    def _strings_masked(self, value: Any, table: Mapping[str, str]) -> Any:
        """``value`` with each string (keys too) as ``table`` says it is masked; raises
        KeyError at a string the table does not hold, :class:`_NotInTable` (a KeyError) at a
        value of another kind than JSON's own."""
        if type(value) is dict:
            out: dict[Any, Any] = {}
            changed = False
            for key, item in value.items():
                if type(key) is not str:
                    raise _NotInTable(key)
                shown = table[key]
                if shown in out:
                    # two keys masked alike stay two entries, as mask() keeps them
                    n = 2
                    while f"{MASK}#{n}" in out:
                        n += 1
                    shown = f"{MASK}#{n}"
                kind = type(item)
                if kind is str:
                    masked = table[item]
                elif kind is dict or kind is list:
                    masked = self._strings_masked(item, table)
                elif kind is int or kind is float:
                    # a number is compared where it stands, as the walk compares it
                    masked = MASK if item in self.numbers else item
                elif item is None or kind is bool:
                    masked = item
                else:
                    raise _NotInTable(item)
                if shown is not key or masked is not item:
                    changed = True
                out[shown] = masked
            return out if changed else value
        kind = type(value)
        if kind is list:
            items = [self._strings_masked(item, table) for item in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                return items
            return value
        if kind is str:
            return table[value]
        if kind is int or kind is float:
            return MASK if value in self.numbers else value
        if value is None or kind is bool:
            return value
        raise _NotInTable(value)


class _NotInTable(KeyError):
    """A value a masking table cannot say how to mask: not of JSON's own kinds."""


def _collect_strings(value: Any, into: set[str]) -> bool:
    """Add every string of ``value`` (keys too) to ``into``; False when ``value`` holds
    anything but JSON's own kinds (dict with string keys, list, str, int, float, bool,
    None), which only :meth:`AnswerKey.mask` reads."""
    kind = type(value)
    if kind is str:
        into.add(value)
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            into.add(key)
            if type(item) is str:
                into.add(item)
            elif not _collect_strings(item, into):
                return False
        return True
    if kind is list:
        return all(_collect_strings(item, into) for item in value)
    return kind is int or kind is float or kind is bool or value is None


@attrs.frozen
class _Needle:
    """A form of a value as it reads inside a JSON string."""

    text: str
    #: a short value's case must match, and it matches whole tokens only
    exact_case: bool
    #: for the start of a long value: the whole value (as ``text`` reads), to extend into
    whole: str | None = None
    #: the marks (:func:`_marks_of`) the text holds, one bit each (a text without one cannot hold
    #: this needle)
    marks: int = attrs.field(init=False)
    #: whether a match can only be inside a JSON string: the needle holds a character no
    #: JSON text has outside a string, and no quote or backslash to end or start one
    surely_inside: bool = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "marks", _marks_of(self.text))
        object.__setattr__(
            self,
            "surely_inside",
            '"' not in self.text
            and "\\" not in self.text
            and not _OUTSIDE_STRINGS.issuperset(self.text),
        )


def _marks_of(text: str) -> int:
    """Which of the three characters whose absence from a text rules out every needle that
    holds one ``text`` holds, as bits: 1 a backslash, 2 a percent sign, 4 a plus."""
    return ("\\" in text) | ("%" in text) << 1 | ("+" in text) << 2


_BACKSLASH, _PERCENT, _PLUS = 1, 2, 4
_ALL_MARKS = _BACKSLASH | _PERCENT | _PLUS


#: Every character a JSON text (as ``json.dumps`` writes it) may hold outside its strings, in
#: either case: punctuation, white space, numbers, true, false, null, NaN, Infinity.
_OUTSIDE_STRINGS = frozenset("{}[],: \t\n\r0123456789+-.eEtruefalsnullNaNInfinity")


def _merged_masks(text: str) -> str:
    """Runs of masks as one, so a mask never shows how long the cut was."""
    while MASK + MASK in text:
        text = text.replace(MASK + MASK, MASK)
    return text


_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_ESCAPED_SPACE = ("\\n", "\\t", "\\r", "\\b", "\\f", '\\"')


def _spans(
    written: str, lowered: str, needles: list[_Needle]
) -> tuple[list[tuple[int, int]], bool]:
    """Where in the JSON text ``written`` a needle stands inside a string, merged, and
    whether any stands inside a mapping key."""
    literals: list[tuple[int, int]] | None = None
    starts: list[int] = []
    plain = "\\" not in written
    spans: list[tuple[int, int]] = []
    in_keys = False
    for needle in needles:
        hay = written if needle.exact_case else lowered
        at = hay.find(needle.text)
        while at >= 0:
            end = at + len(needle.text)
            if needle.surely_inside:
                # its string closes at the next quote no backslash escapes
                closing = _closing_quote(written, end)
            elif plain:
                # no escaped quotes: an odd number of quotes before it opens its string
                if written.count('"', 0, at) % 2 == 0:
                    at = hay.find(needle.text, at + 1)
                    continue
                closing = written.find('"', end)
            else:
                if literals is None:
                    # a needle that could match outside a string: where the strings are
                    literals = [m.span() for m in _LITERAL.finditer(written)]
                    starts = [a for a, _ in literals]
                i = bisect.bisect_right(starts, at) - 1
                if not (i >= 0 and at > literals[i][0] and end < literals[i][1]):
                    at = hay.find(needle.text, at + 1)
                    continue
                closing = literals[i][1] - 1
            kept = False
            if needle.whole is not None:
                whole = needle.whole
                if hay.startswith(whole, at) and at + len(whole) <= closing:
                    end = at + len(whole)
                else:
                    while end < closing and end - at < len(whole) and hay[end] == whole[end - at]:
                        end += 1
                if end == closing or not _word_char(hay[end]):
                    kept = True
            elif not needle.exact_case or _whole_token(written, at, end):
                kept = True
            if kept:
                spans.append((at, end))
                in_keys = in_keys or written.startswith(":", closing + 1)
            at = hay.find(needle.text, at + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for begin, end in spans:
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((begin, end))
    return merged, in_keys


def _closing_quote(written: str, at: int) -> int:
    """Where the JSON string that ``at`` is inside closes."""
    close = written.find('"', at)
    while close >= 0:
        backslashes = 0
        while written[close - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return close
        close = written.find('"', close + 1)
    return len(written)


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _whole_token(written: str, at: int, end: int) -> bool:
    """Whether ``written[at:end]`` (inside a JSON string) stands as a whole token: no word
    character or ``.`` before it, no word character after it; an escaped newline, tab or
    quote before it is a boundary (in the string it is one character)."""
    before = written[at - 1]
    if (_word_char(before) or before == ".") and written[at - 2 : at] not in _ESCAPED_SPACE:
        return False
    return not _word_char(written[end])


def _distinct_keys(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """A JSON object read back with keys that masking made alike kept apart."""
    out: dict[Any, Any] = {}
    for key, value in pairs:
        shown, n = key, 1
        while shown in out:
            n += 1
            shown = f"{MASK}#{n}"
        out[shown] = value
    return out


def answer_key(row: Mapping[str, Any]) -> AnswerKey:
    """The answer key of ``row``: empty when it holds no privileged block."""
    held = row.get("privileged")
    if not isinstance(held, Mapping) or not any(_has_leaf(value) for value in held.values()):
        # no block, or one with no value in it (a situation with an empty hidden state): no
        # key (what the situation shows only ever takes values out of one)
        return _NO_KEY
    # what the key is made of, as text: a situation's rollouts share it, so it is made once
    # per situation rather than once per row
    basis = key_text([held, row.get("prompt"), row.get("scenario_dimensions")])
    if basis is None:
        return _key_of(held, _public_face(row))
    return _cached_key(basis)


_NO_KEY = AnswerKey(())


@functools.lru_cache(maxsize=1024)
def _cached_key(basis: str | bytes) -> AnswerKey:
    held, prompt, dimensions = json.loads(basis)
    return _key_of(held, _public_face({"prompt": prompt, "scenario_dimensions": dimensions}))


def _key_of(held: Mapping[str, Any], shown: str) -> AnswerKey:
    """The answer key of a privileged block, ``shown`` what the situation shows of itself."""
    exact: set[str] = set()
    numbers: set[float] = set()
    for name in ("reference", "principle", "rubric"):
        for leaf in _leaves(held.get(name)):
            text = str(leaf).strip()
            if not text:
                continue
            exact.add(text)
            numbers.update(_numbers_of(leaf, text))
            if "\n" in text:
                exact.update(
                    line.strip() for line in text.splitlines() if len(line.strip()) >= MIN_LINE
                )
    for leaf in _leaves(held.get("quoted")):
        text = str(leaf).strip()
        if text:
            exact.add(text)
            numbers.update(_numbers_of(leaf, text))
    for field in FACT_FIELDS:
        block = held.get(field)
        names = _field_names(block)
        for leaf in _leaves(block):
            text = str(leaf).strip()
            if len(text) < MIN_FACT or text in names:
                continue
            if text.lower() in shown:
                continue
            exact.add(text)
            numbers.update(_numbers_of(leaf, text))
    return AnswerKey(tuple(sorted(exact, key=lambda v: (-len(v), v))), tuple(sorted(numbers)))


def _numbers_of(leaf: Any, text: str) -> tuple[float, ...]:
    """The numbers a value of the key stands for: itself when it is a number, else what its
    text (``text``, stripped) reads as (:func:`_numbers_written`)."""
    if isinstance(leaf, int | float) and not isinstance(leaf, bool):
        return (float(leaf),)
    return _numbers_written(text)


#: How a reference writes one number: digits with an optional sign, point and exponent; digits
#: grouped in threes by commas; a fraction of whole numbers.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_GROUPED_NUMBER = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_FRACTION = re.compile(r"([+-]?\d+)\s*/\s*(\d+)")
_CURRENCY = "$€£¥"


def _numbers_written(text: str) -> tuple[float, ...]:
    """The numbers a reference written as text stands for: ``"42"`` is the number 42 a grader
    may record as parsed (``{"expected": 42}``), which a search of strings never meets. Read
    as a whole, as graders parse an answer: a sign, a currency sign before it, thousands
    grouped by commas, a percent sign after it (both 42 and 0.42, as ``Numeric`` reads
    ``"42%"``), and a fraction of whole numbers (``"1/2"``: 0.5). Empty for text that is not
    one number (``"12 apples"``, ``"nan"``, ``"x/0"``)."""
    body = text.strip()
    percent = body.endswith("%")
    if percent:
        body = body[:-1].rstrip()
    sign = body[:1] if body[:1] in ("+", "-") else ""
    body = body[len(sign) :].lstrip()
    if body[:1] and body[:1] in _CURRENCY:
        body = body[1:].lstrip()
    body = sign + body
    fraction = _FRACTION.fullmatch(body)
    if _GROUPED_NUMBER.fullmatch(body):
        body = body.replace(",", "")
    elif fraction is None and not _PLAIN_NUMBER.fullmatch(body):
        return ()
    try:
        if fraction is None:
            number = float(body)
        else:
            number = int(fraction.group(1)) / int(fraction.group(2))
    except (OverflowError, ZeroDivisionError):
        return ()
    if number in (float("inf"), float("-inf")):
        return ()
    return (number, number / 100) if percent else (number,)


def _has_leaf(value: Any) -> bool:
    """Whether :func:`_leaves` finds anything in ``value``, told at the first it would."""
    # JSON's own kinds by exact type first: a key is made of a block read back from JSON
    kind = type(value)
    if kind is str or kind is int or kind is float:
        return True
    if value is None or kind is bool:
        return False
    if kind is dict or isinstance(value, Mapping):
        return any(_has_leaf(v) for v in value.values())
    if kind is list or isinstance(value, list | tuple | set | frozenset):
        return any(_has_leaf(v) for v in value)
    return True


def _leaves(value: Any) -> list[Any]:
    """The scalar values of a privileged field (strings, numbers), at any depth, in order."""
    out: list[Any] = []
    _add_leaves(value, out)
    return out


def _add_leaves(value: Any, out: list[Any]) -> None:
    kind = type(value)
    if kind is str or kind is int or kind is float:
        out.append(value)
    elif value is None or kind is bool:
        return
    elif kind is dict or isinstance(value, Mapping):
        for item in value.values():
            _add_leaves(item, out)
    elif kind is list or isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _add_leaves(item, out)
    else:
        out.append(value)


def _field_names(block: Any) -> set[str]:
    """The names a fact block uses for its fields: a value equal to one (``withheld_until_asked:
    ["order_id"]``) names a field, it is not a fact."""
    names: set[str] = set()
    _add_field_names(block, names)
    return names


def _add_field_names(block: Any, names: set[str]) -> None:
    kind = type(block)
    if kind is dict or (kind is not list and isinstance(block, Mapping)):
        for key, value in block.items():
            names.add(key if type(key) is str else str(key))
            held = type(value)
            # (a string or number names nothing: only what holds keys is read further)
            if not (held is str or held is int or held is float):
                _add_field_names(value, names)
    elif kind is list or isinstance(block, list | tuple):
        for value in block:
            _add_field_names(value, names)


def _public_face(row: Mapping[str, Any]) -> str:
    """What the situation shows of itself, lower case: its prompt and its dimensions' values."""
    parts = [str(row.get("prompt") or "")]
    dimensions = row.get("scenario_dimensions")
    if isinstance(dimensions, Mapping):
        parts += [str(v) for v in dimensions.values()]
    return "\n".join(parts).lower()


def forms(value: str, marks: int = _ALL_MARKS) -> set[str]:
    """How ``value`` may read once written into JSON, JSON inside JSON, a repr, a URL or a
    ``\\u``-escaped dump; with ``marks`` (:func:`_marks_of`), at least those a text holding
    only these marks can hold (a form with another mark may be left out)."""
    # (json's own string encoders, which json.dumps of a string calls after setting up an
    # encoder: a situation's key writes each of its values in every form)
    once = encode_basestring_ascii(value)[1:-1]
    found = {
        value,
        once,
        encode_basestring(value)[1:-1],
        encode_basestring_ascii(once)[1:-1],
        repr(value)[1:-1],
    }
    # The forms left out without their mark are the costly ones, and no text without the
    # mark holds them: every \u escape has a backslash, and a URL form is either the value
    # itself (nothing in it needed quoting) or holds a percent sign or a plus.
    if marks & _BACKSLASH:
        found.add(_u_escaped(value))
    if marks & (_PERCENT | _PLUS):
        found.add(urllib.parse.quote(value, safe=""))
        found.add(urllib.parse.quote_plus(value))
    return {f for f in found if f}


def _u_escaped(value: str) -> str:
    """Every character of ``value`` as ``\\u`` and its code point in four (or more) hex
    digits."""
    if value.isascii():
        # one hex pair per byte: each character's four digits are two zeros and its pair
        digits = value.encode().hex()
        return "".join(["\\u00" + digits[i : i + 2] for i in range(0, len(digits), 2)])
    return "".join([f"\\u{ord(c):04x}" for c in value])


@functools.lru_cache(maxsize=4096)
def _pattern(values: tuple[str, ...]) -> re.Pattern[str]:
    pieces: list[str] = []
    for value in values:
        for form in sorted(forms(value), key=len, reverse=True):
            escaped = re.escape(form)
            if len(value) < MIN_LINE:
                # a short value is masked as a whole token and as written ("5" is not masked
                # inside "15", a reference "A" not in the word "a")
                pieces.append(rf"(?<![\w.]){escaped}(?!\w)")
            else:
                pieces.append(f"(?i:{escaped})")
    return re.compile("|".join(pieces))


# a situation's answer key keeps the needles it uses: this only spares remaking them
@functools.lru_cache(maxsize=4096)
def _needles(value: str, marks: int = _ALL_MARKS) -> tuple[_Needle, ...]:
    """Each form of ``value``, and the start of a long one, as it reads inside a JSON string
    (lower case where the case need not match), of those a text holding only ``marks`` can
    hold (:func:`_marks_of`): a key's first text, with none of the marks, makes only the
    few forms such a text can hold."""
    exact_case = len(value) < MIN_LINE

    def inside(piece: str) -> str:
        escaped = encode_basestring(piece)[1:-1]
        return escaped if exact_case else escaped.lower()

    # most forms of a plain value read alike inside a JSON string: one needle per text
    texts = {inside(form) for form in forms(value, marks)}
    out = [_Needle(text, exact_case) for text in texts if _marks_of(text) & ~marks == 0]
    if len(value) >= LONG_VALUE:
        cut = _Needle(inside(_cut(value)), exact_case, whole=inside(value))
        if cut.marks & ~marks == 0:
            out.append(cut)
    return tuple(sorted(out, key=lambda n: (-len(n.text), n.text)))


def _cut(value: str) -> str:
    """The shortest start of a long value that is still masked where the value was cut."""
    return value[: max(MIN_CUT, len(value) // 2)]


def _mask_cut_short(text: str, value: str) -> str:
    """``text`` with every run that starts as ``value`` does, for at least :func:`_cut` of it,
    and ends a word where it stops matching, masked."""
    start, folded, lowered = _cut(value).lower(), value.lower(), text.lower()
    spans: list[tuple[int, int]] = []
    at = lowered.find(start)
    while at >= 0:
        end = at + len(start)
        while end < len(lowered) and end - at < len(folded) and lowered[end] == folded[end - at]:
            end += 1
        # where it was cut, a word ends: without that, one value's start would claim the
        # start of another that shares it
        if end == len(lowered) or not _word_char(lowered[end]):
            spans.append((at, end))
        at = lowered.find(start, end)
    if not spans:
        return text
    if len(lowered) != len(text):
        # lower() changed the text's length (a few non-ASCII letters do): the spans do not
        # map back onto it, so the value's start alone is masked
        return re.sub(re.escape(_cut(value)), MASK, text, flags=re.IGNORECASE)
    return _masked_spans(text, spans)


def _masked_spans(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for begin, end in spans:
        out.append(text[last:begin])
        out.append(MASK)
        last = end
    out.append(text[last:])
    return "".join(out)


class _Masker:
    """The walk: every string of a value (keys too) masked on its own, and numbers equal to
    one of the reference compared as numbers."""

    def __init__(self, values: tuple[str, ...], numbers: tuple[float, ...]) -> None:
        self.numbers = numbers
        self.pattern = _pattern(values) if values else None
        self.long = tuple(v for v in values if len(v) >= LONG_VALUE)

    def text(self, text: str) -> str:
        if self.pattern is None or not text:
            return text
        masked = self.pattern.sub(MASK, text)
        for value in self.long:
            if _cut(value).lower() in masked.lower():
                masked = _mask_cut_short(masked, value)
        if masked == text:
            return text
        return _merged_masks(masked)

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is dict or (kind is not list and isinstance(value, Mapping)):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                shown = self.text(k) if type(k) is str else k
                # two keys masked alike stay two entries
                n = 1
                while shown in out:
                    n += 1
                    shown = f"{MASK}#{n}"
                out[shown] = self.value(v)
            return out
        if kind is list or kind is tuple or isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        if (
            self.numbers
            and isinstance(value, int | float)
            and not isinstance(value, bool)
            and float(value) in self.numbers
        ):
            return MASK
        return value
