"""The layer the whole core shares: the row model, the one export, the one file reader and
writer, the one "rows from anything" source, and the report records every call returns.

Nothing here imports from the rest of whileai (``tests/test_layers.py`` keeps it so), so
simulations, judging, ranking and measure all build on it alike.

- :mod:`whileai.schema.records`: Task, Rollout, Judgment, Marker and the flat row they make
- :mod:`whileai.schema.export`: ``export_row``, the one way a row leaves memory
- :mod:`whileai.schema.reserved`: reserved keys out of a value, in any encoding it holds them
- :mod:`whileai.schema.answer_key`: a row's answer key, masked by value wherever the run wrote it
- :mod:`whileai.schema.secrets`: the backends' secrets out of everything a run writes
- :mod:`whileai.schema.files`: ``read_jsonl``, the row writers, the sidecar
- :mod:`whileai.schema.source`: ``row_source`` / ``rows_of``, rows from anything a user passes
- :mod:`whileai.schema.rowlist`: ``RowList``, the exported rows a run hands back
- :mod:`whileai.schema.report`: ``Report``, the base of every printed result
"""
