"""The static HTML report: one self-contained file per run, plots as inline SVG."""

from whileai.viewing.build import html_report

__all__ = ["html_report"]
