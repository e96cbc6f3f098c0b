"""Rows as Arrow columns (Parquet, a ``datasets.Dataset``), read back as they were written.

Arrow gives each column one type. Inferred from rows, a nested field becomes a struct of
every key any row holds: a shop run's ``world_state`` is keyed by order ids, so 20,000 rows
made a struct of tens of thousands of fields (a Parquet export took minutes and gigabytes),
and every row read back carried every other row's keys as None. So a column keeps an Arrow
type only when all its values are of one scalar kind (text, a boolean, an integer that fits
64 bits, or a number); any other column (a dict or list in any row, or kinds that differ) is
written as each value's JSON text, and the file's metadata names those columns
(:data:`JSON_COLUMNS_KEY`) so :func:`decoded` reads them back to the values written.

The one thing a column cannot keep is a key a row lacks: it reads back as None.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from whileai.schema.jsonline import STDLIB

#: the Arrow schema's metadata key whose value (a JSON list) names the columns of JSON text
JSON_COLUMNS_KEY = b"whileai.json_columns"

_INT64 = (-(2**63), 2**63 - 1)


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if _INT64[0] <= value <= _INT64[1] else "json"
    if isinstance(value, float):
        return "number"
    return "json"


class RowColumns:
    """The columns of the rows :meth:`add` was shown, in the order their keys first appear,
    each with the kinds of value it held."""

    def __init__(self) -> None:
        self._kinds: dict[str, set[str]] = {}

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]]) -> RowColumns:
        columns = cls()
        for record in records:
            columns.add(record)
        return columns

    def add(self, record: Mapping[str, Any]) -> None:
        kinds = self._kinds
        for name, value in record.items():
            seen = kinds.get(name)
            if seen is None:
                seen = kinds[name] = set()
            if value is not None:
                seen.add(_kind(value))

    @property
    def json_columns(self) -> list[str]:
        return [name for name, kinds in self._kinds.items() if _is_json(kinds)]

    def schema(self, pa: Any) -> Any:
        """The Arrow schema every record fits once :meth:`encoded`."""
        types = {
            "text": pa.string(),
            "boolean": pa.bool_(),
            "integer": pa.int64(),
            "number": pa.float64(),
        }
        fields = []
        for name, kinds in self._kinds.items():
            if _is_json(kinds):
                kind = pa.string()
            elif not kinds:
                kind = pa.null()
            elif kinds == {"integer", "number"}:
                kind = pa.float64()
            else:
                (only,) = kinds
                kind = types[only]
            fields.append(pa.field(name, kind))
        return pa.schema(fields, metadata={JSON_COLUMNS_KEY: json.dumps(self.json_columns)})

    def encoded(self, record: Mapping[str, Any], json_columns: Iterable[str]) -> dict[str, Any]:
        """``record`` with the values of ``json_columns`` (the list :attr:`json_columns`
        gave) as JSON text; None stays None."""
        out = dict(record)
        for name in json_columns:
            value = out.get(name)
            if value is not None:
                out[name] = STDLIB.encode(value)
        return out


def _is_json(kinds: set[str]) -> bool:
    return "json" in kinds or (len(kinds) > 1 and kinds != {"integer", "number"})


def decoded(
    records: Iterable[dict[str, Any]], metadata: Mapping[bytes, bytes] | None
) -> list[dict[str, Any]]:
    """Records read from an Arrow table whose schema ``metadata`` names its JSON columns, with
    those columns' values read back from their text."""
    named = (metadata or {}).get(JSON_COLUMNS_KEY)
    columns = json.loads(named) if named else []
    out = []
    for record in records:
        for name in columns:
            text = record.get(name)
            if text is not None:
                record[name] = json.loads(text)
        out.append(record)
    return out
