"""Numbers as people write them in answers: ``1,000``, ``$18.00``, ``-5``, ``2.5e-3``, ``50%``.

Shared by Numeric (tolerant comparison of the last number in a text) and MathEqual's fast path
(exact comparison of a plainly written number, leaving anything else to math-verify).
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, InvalidOperation

import attrs

_CURRENCY = "$€£¥₹"
# A sign only when it is attached to the number and not a subtraction ("10-4", "x -4" in "2x -4"
# is still read as -4: an answer text rarely carries algebra, and MathEqual defers those).
_NUMBER = re.compile(
    r"""
    (?<![\w.\d])
    (?P<sign>[-−+])?
    (?:(?P<currency>[$€£¥₹]|\\\$)\s?)?
    (?P<sign2>[-−])?
    (?P<digits>[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)
    (?:
        (?:[eE](?P<exp>[-+]?\d+))
        |
        (?:\s?(?:[x×*]|\\times|\\cdot)\s?10\s?(?:\^|\*\*)\s?\{?(?P<exp10>[-+−]?\d+)\}?)
    )?
    (?P<percent>\s?(?:\\?%|\ percent\b))?
    """,
    re.VERBOSE,
)
_WHOLE_PADDING = re.compile(r"^\s*(?:####\s*)?|[\s.]*$")
# An exponent of more digits than this makes a number no answer means (``1e99999999999999999``):
# it is out of range, and reading it would overflow the arithmetic or int()'s digit limit.
MAX_EXPONENT_DIGITS = 15
# Comparisons of numbers a text writes: no exponent within range overflows or underflows it, and
# a difference keeps 50 significant digits (the operands themselves are exact).
ARITHMETIC = Context(prec=50, Emax=MAX_EMAX, Emin=MIN_EMIN)
# Past this many zeros between a number's digits and its point, ``shown`` writes it 1e+40.
_SHOWN_ZEROS = 40


@attrs.frozen
class NumberToken:
    """One number found in a text, with where it was."""

    # None when the exponent puts the number out of range (MAX_EXPONENT_DIGITS).
    value: Decimal | None
    text: str
    start: int
    end: int
    percent: bool
    exponent: bool


def _token(match: re.Match[str]) -> NumberToken | None:
    digits = match["digits"].replace(",", "")
    negative = (match["sign"] in ("-", "−")) != (match["sign2"] is not None)
    try:
        value = Decimal(digits)
    except InvalidOperation:  # pragma: no cover - the pattern only lets digits through
        return None
    exp = match["exp"] or match["exp10"]
    in_range = True
    if exp is not None:
        exp = exp.replace("−", "-")
        in_range = len(exp.lstrip("+-")) <= MAX_EXPONENT_DIGITS
        if in_range:
            value = shifted(value, int(exp))
    if negative:
        value = value.copy_negate()
    return NumberToken(
        value=value if in_range else None,
        text=match.group(0),
        start=match.start(),
        end=match.end(),
        percent=match["percent"] is not None,
        exponent=exp is not None,
    )


def find_numbers(text: str) -> list[NumberToken]:
    """Every number in ``text``, in order."""
    tokens = []
    for match in _NUMBER.finditer(text):
        token = _token(match)
        if token is not None:
            tokens.append(token)
    return tokens


def whole_number(text: str) -> NumberToken | None:
    """The number ``text`` consists of (allowing ``####``, currency, a final full stop), or None."""
    core = _WHOLE_PADDING.sub("", text)
    match = _NUMBER.fullmatch(core)
    return _token(match) if match else None


def _leading_zero(token: NumberToken) -> bool:
    # "01", "-007": math-verify's reading of these depends on the sign and the context.
    digits = token.text.lstrip(f"-−+{_CURRENCY}\\ ")
    return len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()


def plain_decimal(text: str) -> Decimal | None:
    """``text`` as an exact decimal when it is a plainly written number (no %, no leading 0)."""
    token = whole_number(text)
    if token is None or token.percent or _leading_zero(token):
        return None
    return token.value


def shifted(value: Decimal, places: int) -> Decimal:
    """``value`` times ``10 ** places``, exactly (Decimal's own scaleb rounds to a precision)."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite: the pattern reads only digits
    return Decimal((sign, digits, exponent + places))


def _significant(value: Decimal) -> tuple[int, str, int]:
    """(sign, digits without trailing zeros, exponent): ``value = ±digits × 10**exponent``."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0")
    return sign, text, exponent + len(digits) - len(text)


def decimal_places(value: Decimal) -> int:
    """How many places after the point ``value`` needs: 0 for ``18.00``, 2 for ``0.25``."""
    _, text, exponent = _significant(value)
    return max(0, -exponent) if text else 0


def shown(value: Decimal) -> str:
    """A decimal as a person writes it, exactly: ``18`` for ``18.00``, ``0.5`` for ``5E-1``, and
    ``1e+999999`` where writing it out would take more than a few dozen zeros."""
    sign, text, exponent = _significant(value)
    if not text:
        return "0"
    minus = "-" if sign else ""
    if 0 <= exponent <= _SHOWN_ZEROS:
        return minus + text + "0" * exponent
    point = len(text) + exponent
    if exponent < 0 and point > 0:
        return f"{minus}{text[:point]}.{text[point:]}"
    if exponent < 0 and -point <= _SHOWN_ZEROS:
        return f"{minus}0.{'0' * -point}{text}"
    mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
    return f"{minus}{mantissa}e{point - 1:+d}"


# Characters next to a number that make it part of something bigger (a fraction, a power, a
# LaTeX group, a decimal comma, a digit group written with spaces or apostrophes): the fast path
# steps aside. A comma group is thousands only when its first group has no leading zero:
# math-verify reads "0,111" and "00,111" as decimals, so the pattern above does not take them.
_UNSAFE_BEFORE = set("/^\\{_*.,'’")
_UNSAFE_AFTER = set("/^\\}_*(,.'’")
_OPERATORS = set("+-−*/^×÷")
_ANSWER_ANCHOR = re.compile(r"(?:final answer|answer)\s*(?:is|:)\s*:?", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\s*\{([^{}]*)\}")
# Markdown bold around an answer ("**18**"); not "3**2", a power.
_BOLD = re.compile(r"(?<![\w*])\*\*([^*\n]+)\*\*(?![\w*])")


def _isolated(region: str, token: NumberToken) -> bool:
    # Any white space (a no-break or thin space groups digits too), not only " ".
    before = region[: token.start].rstrip().rstrip("$").rstrip()
    after = region[token.end :]
    if before and (before[-1] in _UNSAFE_BEFORE or before[-1].isdigit()):
        return False
    if before[-1:] in _OPERATORS:
        return False
    if after[:1] in _UNSAFE_AFTER and after[1:2].isdigit():
        return False
    if after[:1] in _UNSAFE_AFTER - {",", "."}:
        return False
    following = after.lstrip()
    # "3 / 4", "10 - 4": the number is an operand, not the answer.
    if following[:1] in _OPERATORS and following[1:].lstrip(" ")[:1].isalnum():
        return False
    # "18k", "18x" or a digit group written with spaces ("1 000") is more than this number.
    return not (after[:1].isalpha() or following[:1].isdigit())


def plain_answer(text: str) -> Decimal | None:
    """The final number of an answer written the GSM8K way, or None when it is not that simple.

    Where the answer is: after the last ``####``; else inside the last ``\\boxed{}``; else after
    the last "answer is" / "answer:"; else the last number of the text. Markdown bold is read
    through. None (ask math-verify) when that number is a percentage or sits in a fraction,
    power, LaTeX group or digit group, or when the region holds LaTeX commands. ``1.5e3`` is
    1500 (math-verify reads it as 1.5). None too when the box holds more than one number
    (``\\boxed{18, 19}``, ``\\boxed{18 or 19}``): math-verify reads a box whole, so that is a
    set, a tuple or a hedge, never its first number. (After ``####`` the first number is the
    answer, as GSM8K's own grader reads it, whatever follows.)
    """
    if "**" in text:
        text = _BOLD.sub(r"\1", text)
    boxed_region = False
    if "####" in text:
        region, first = text.rsplit("####", 1)[1], True
    elif "\\boxed" in text:
        boxed = _BOXED.findall(text)
        if not boxed or text.count("\\boxed") != len(boxed):
            return None
        region, first, boxed_region = boxed[-1], True, True
    else:
        anchors = list(_ANSWER_ANCHOR.finditer(text))
        if anchors:
            region, first = text[anchors[-1].end() :], True
        else:
            region, first = text, False
    if "\\" in region.replace("\\$", ""):
        return None
    tokens = find_numbers(region)
    if not tokens or (boxed_region and len(tokens) > 1):
        return None
    token = tokens[0] if first else tokens[-1]
    if token.percent or _leading_zero(token) or not _isolated(region, token):
        return None
    return token.value  # None when out of range: math-verify decides
