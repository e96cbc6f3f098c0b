"""A report in a notebook: the same table as its text, escaped, in a monospace block."""

from __future__ import annotations

import html

import whileai as wai


def test_a_report_renders_in_a_notebook_as_its_own_text_escaped() -> None:
    rows = [
        {"prompt": "Is 1 < 2?", "final_text": "yes", "task_id": f"t{i}", "reward": r}
        for i in range(3)
        for r in (1.0, 1.0, 0.0, 1.0)
    ]
    report = wai.pass_at(rows)
    shown = report._repr_html_()
    assert shown.startswith('<div class="whileai-report"')
    inside = shown.split("<pre", 1)[1].split(">", 1)[1].rsplit("</pre>", 1)[0]
    assert "pass@1" in inside
    assert html.unescape(inside) == str(report)


def test_markup_in_a_report_is_shown_not_run() -> None:
    import attrs

    from whileai.schema.report import Report

    @attrs.define
    class Note(Report):
        title = "note <script>"
        text: str

        def _lines(self) -> list[str]:
            return [self.text]

    shown = Note("reward < 0.5 & <b>bold</b>")._repr_html_()
    assert "<script>" not in shown and "<b>" not in shown
    assert "reward &lt; 0.5 &amp; &lt;b&gt;bold&lt;/b&gt;" in shown
