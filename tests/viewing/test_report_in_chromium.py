"""The HTML report in a real headless browser: Debian's chromium, driven by Playwright.

The page loads from a file with no console error and no request beyond itself, every section
shows, a screenshot is not blank, each plot saves as a PNG that is not blank either, and the
transcripts open and filter. Skipped, with the reason, where chromium or Playwright is absent;
``.ci/run`` installs chromium, so CI always runs it.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import whileai as wai

pytestmark = pytest.mark.plugins

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (the dev group has it)"
)
CHROMIUM = os.environ.get("WHILEAI_CHROMIUM") or shutil.which("chromium")
if CHROMIUM is None:
    pytest.skip(
        "Debian's chromium is not installed (apt-get install chromium; .ci/run does)",
        allow_module_level=True,
    )

#: what the probe of these machines starts chromium with: no sandbox as root, and none of the
#: background connections a closed network refuses
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
#: a PNG, read back in the browser: the share of pixels that are not white, and how many
#: distinct colours it has
PIXELS = """async (data) => {
  const image = new Image();
  await new Promise((ok, fail) => { image.onload = ok; image.onerror = fail; image.src = data; });
  const canvas = document.createElement("canvas");
  canvas.width = image.width; canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const pixels = context.getImageData(0, 0, image.width, image.height).data;
  let inked = 0; const colours = new Set();
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i] < 245 || pixels[i + 1] < 245 || pixels[i + 2] < 245) { inked += 1; }
    if (colours.size < 1000) { colours.add((pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2]); }
  }
  return {width: image.width, height: image.height, inked: inked / (pixels.length / 4),
          colours: colours.size};
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def report(shop_runs: dict[str, Any]) -> Path:
    on, off = shop_runs["on"], shop_runs["off"]
    return wai.html_report(
        on.output,
        shop_runs["root"] / "browser.html",
        baseline=off.output,
        proxy="marker:tool_errors",
    )


@pytest.fixture
def page(browser: Any, report: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 900}, accept_downloads=True)
    opened = context.new_page()
    opened.problems = []
    opened.requests = []
    opened.on(
        "console", lambda m: m.type in ("error", "warning") and opened.problems.append(m.text)
    )
    opened.on("pageerror", lambda e: opened.problems.append(str(e)))
    opened.on("request", lambda r: opened.requests.append(r.url))
    opened.goto(report.as_uri())
    try:
        yield opened
    finally:
        context.close()


def look(page: Any, png: bytes | str) -> dict[str, Any]:
    data = (
        png if isinstance(png, str) else "data:image/png;base64," + base64.b64encode(png).decode()
    )
    result: dict[str, Any] = page.evaluate(PIXELS, data)
    return result


def test_the_page_loads_with_no_error_and_fetches_nothing(page: Any, report: Path) -> None:
    page.wait_for_load_state("load")
    assert page.problems == []
    assert page.requests == [report.as_uri()]
    assert page.title().startswith("whileai report")


def test_every_section_is_there_and_shows(page: Any, report: Path) -> None:
    ids = page.eval_on_selector_all("section", "nodes => nodes.map(n => n.id)")
    # the sections the file holds (test_html_report checks which), with the comparison's
    assert ids == re.findall(r"<section id='([^']+)'", report.read_text(encoding="utf-8"))
    assert "compare" in ids and "transcripts" in ids and len(ids) == 10
    for key in ids:
        section = page.locator(f"section#{key}")
        assert section.is_visible()
        box = section.bounding_box()
        assert box is not None and box["height"] > 40, key
    # every plot has drawn at a real size
    sizes = page.eval_on_selector_all(
        "figure.plot svg", "nodes => nodes.map(n => n.getBoundingClientRect().height)"
    )
    assert len(sizes) >= 5 and min(sizes) > 50


def test_a_screenshot_is_not_blank(page: Any) -> None:
    shot = look(page, page.screenshot(full_page=True))
    assert shot["height"] > 2000  # the whole page, not one screen of it
    assert shot["inked"] > 0.02 and shot["colours"] > 20
    forest = look(page, page.locator("section#compare figure.plot").first.screenshot())
    assert forest["inked"] > 0.02 and forest["colours"] > 5


def test_every_plot_saves_as_a_png_that_is_not_blank(page: Any, tmp_path: Path) -> None:
    count = page.locator("figure.plot svg").count()
    for index in range(count):
        data = page.evaluate("i => whileaiPlotPng(i)", index)
        assert data.startswith("data:image/png;base64,")
        drawn = look(page, data)
        assert drawn["width"] > 300 and drawn["height"] > 50
        assert drawn["inked"] > 0.01 and drawn["colours"] > 3, index
    # the button saves a file, as a person would
    with page.expect_download() as download:
        page.locator("section#pass-at-k button.png").click()
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    assert saved.name == "pass-at-k.png"
    assert saved.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert page.problems == []


def test_transcripts_open_and_filter(page: Any, shop_runs: dict[str, Any]) -> None:
    rows = shop_runs["on"].rows
    first = page.locator("details.rollout").first
    first.locator("summary").click()
    assert first.evaluate("d => d.open") is True
    assert first.locator(".verdict").is_visible()
    task = rows[3]["task_id"]
    page.fill("#transcript-filter", task)
    expected = sum(1 for r in rows if r["task_id"] == task)
    assert page.locator("#transcript-count").inner_text() == f"{expected} shown"
    assert page.locator("details.rollout:visible").count() == expected
    page.fill("#transcript-filter", "")
    page.check("#transcript-failed")
    not_passed = sum(1 for r in rows if r["reward"] != 1)
    assert page.locator("#transcript-count").inner_text() == f"{not_passed} shown"
    assert page.problems == []
