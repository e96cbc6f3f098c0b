"""The page around the sections: one self-contained HTML file, its style and its script inline.

Nothing on the page is fetched: no CDN, no font, no image by address. The script does two
things: saves any plot as a PNG (the SVG drawn onto a canvas) and filters the transcripts.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import attrs


@attrs.frozen
class Section:
    """One part of the report: its anchor, heading and HTML body."""

    key: str
    heading: str
    body: str


STYLE = """
body { font-family: system-ui, -apple-system, "DejaVu Sans", sans-serif; color: #1f2933;
       margin: 0 auto; max-width: 1100px; padding: 0 24px 48px; line-height: 1.45; }
header { border-bottom: 2px solid #0072b2; padding: 16px 0 8px; margin-bottom: 8px; }
h1 { font-size: 1.5em; margin: 0 0 4px; } h2 { margin-top: 32px; font-size: 1.2em; }
nav a { margin-right: 12px; font-size: 0.9em; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 0.9em; }
th, td { border: 1px solid #e5e7eb; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f4f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #92400e; background: #fffbeb; border-left: 3px solid #f59e0b; padding: 4px 8px;
        margin: 4px 0; font-size: 0.9em; }
.muted { color: #6b7280; }
figure.plot { margin: 8px 0 16px; }
figure.plot svg { display: block; max-width: 100%; height: auto; }
figure.plot button { font-size: 0.8em; margin-top: 2px; }
details.rollout { border: 1px solid #e5e7eb; border-radius: 4px; margin: 6px 0; padding: 4px 8px; }
details.rollout summary { cursor: pointer; }
details.rollout.pass summary::before { content: "PASS "; color: #047857; font-weight: bold; }
details.rollout.fail summary::before { content: "FAIL "; color: #b91c1c; font-weight: bold; }
details.rollout.unscored summary::before { content: "UNSCORED "; color: #6b7280; font-weight: bold; }
.step { margin: 4px 0 4px 8px; padding: 4px 8px; border-left: 3px solid #d1d5db; }
.step.assistant { border-color: #0072b2; } .step.user { border-color: #009e73; }
.step.tool { border-color: #e69f00; } .step .role { font-weight: bold; font-size: 0.85em; }
.fault { color: #b91c1c; font-weight: bold; }
pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0; font-size: 0.85em; }
.verdict { background: #f3f4f6; padding: 4px 8px; margin-top: 6px; }
.cm td { width: 90px; text-align: center; }
"""

SCRIPT = """
(function () {
  "use strict";
  function plots() { return Array.prototype.slice.call(document.querySelectorAll("figure.plot svg")); }
  // A plot as a PNG data URL: the SVG (standalone, sized, fonts inline) drawn onto a canvas.
  window.whileaiPlotPng = function (index, scale) {
    var svg = plots()[index];
    if (!svg) { return Promise.reject(new Error("no plot " + index)); }
    scale = scale || 2;
    var width = svg.width.baseVal.value, height = svg.height.baseVal.value;
    var text = new XMLSerializer().serializeToString(svg);
    var url = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
    return new Promise(function (resolve, reject) {
      var image = new Image();
      image.onload = function () {
        var canvas = document.createElement("canvas");
        canvas.width = width * scale; canvas.height = height * scale;
        var context = canvas.getContext("2d");
        context.scale(scale, scale);
        context.drawImage(image, 0, 0, width, height);
        resolve(canvas.toDataURL("image/png"));
      };
      image.onerror = function () { reject(new Error("the plot did not render")); };
      image.src = url;
    });
  };
  document.querySelectorAll("figure.plot button.png").forEach(function (button) {
    button.addEventListener("click", function () {
      var index = plots().indexOf(button.closest("figure").querySelector("svg"));
      window.whileaiPlotPng(index).then(function (data) {
        var link = document.createElement("a");
        link.href = data; link.download = button.getAttribute("data-name") + ".png";
        document.body.appendChild(link); link.click(); link.remove();
      });
    });
  });
  var search = document.getElementById("transcript-filter");
  var failedOnly = document.getElementById("transcript-failed");
  function filter() {
    var words = (search ? search.value : "").toLowerCase();
    var onlyFailed = failedOnly ? failedOnly.checked : false;
    var shown = 0;
    document.querySelectorAll("details.rollout").forEach(function (item) {
      var keep = (!words || item.textContent.toLowerCase().indexOf(words) >= 0) &&
                 (!onlyFailed || !item.classList.contains("pass"));
      item.style.display = keep ? "" : "none";
      if (keep) { shown += 1; }
    });
    var count = document.getElementById("transcript-count");
    if (count) { count.textContent = shown + " shown"; }
  }
  if (search) { search.addEventListener("input", filter); }
  if (failedOnly) { failedOnly.addEventListener("change", filter); }
})();
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def figure(svg: str, name: str, caption: str = "") -> str:
    """A plot with its caption and a button that saves it as ``<name>.png``."""
    cap = f"<figcaption class='muted'>{esc(caption)}</figcaption>" if caption else ""
    return (
        f"<figure class='plot' data-name='{esc(name)}'>{svg}{cap}"
        f"<button class='png' type='button' data-name='{esc(name)}'>Save as PNG</button></figure>"
    )


def notes(texts: Sequence[str]) -> str:
    return "".join(f"<p class='note'>{esc(t)}</p>" for t in texts)


def html_table(
    header: Sequence[str], rows: Sequence[Sequence[object]], numeric: bool = True
) -> str:
    """A table; cells after the first are right-aligned numbers when ``numeric``."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = " class='num'" if numeric and i > 0 else ""
            cells.append(f"<td{cls}>{esc(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render(title: str, subtitle: str, sections: Sequence[Section]) -> str:
    """The whole page."""
    links = "".join(f"<a href='#{esc(s.key)}'>{esc(s.heading)}</a>" for s in sections)
    parts = [
        f"<section id='{esc(s.key)}' data-section='{esc(s.key)}'><h2>{esc(s.heading)}</h2>"
        f"{s.body}</section>"
        for s in sections
    ]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        # nothing on this page may be fetched: the policy says so to the browser as well
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
        f"<header><h1>{esc(title)}</h1><div class='muted'>{esc(subtitle)}</div>"
        f"<nav>{links}</nav></header>{''.join(parts)}<script>{SCRIPT}</script></body></html>\n"
    )
