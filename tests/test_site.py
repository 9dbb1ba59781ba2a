"""The rendered course (``make site``): built from executed notebooks, checked in headless Chromium.

The site is built once per session with ``tools.build_site`` under ``COURSE_FAST=1``. Notebooks
that the notebook tests already executed in this session are reused from
``test-artifacts/executed/`` (conftest's ``keep_executed``); any other is executed here. Checks:
a page per notebook and an index in course-map order; no script from the network; every internal
link resolves; in Chromium every page loads without a failed request, MathJax renders the math
it finds (no "Math Processing Error"), every figure is non-blank and shown at >= 90% of its
natural width, and widget snapshots show their readouts.
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import EXECUTED, SESSION_START, report_line

from tools.build_site import build, notebook_names

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory, matplotlib_ready) -> Path:
    """The site, from this session's executed copies only (never a stale one from an earlier run)."""
    fresh = tmp_path_factory.mktemp("executed")
    for nb in EXECUTED.glob("*.ipynb"):
        if nb.stat().st_mtime >= SESSION_START:
            shutil.copy2(nb, fresh / nb.name)
    out = tmp_path_factory.mktemp("site")
    build(out, fast=True, executed=fresh)
    return out


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.scripts = [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        if tag == "script" and attrs.get("src"):
            self.scripts.append(attrs["src"])


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def test_a_page_per_notebook_and_an_index_in_course_order(site):
    names = notebook_names()
    assert names == sorted(names) and len(names) >= 9
    for name in names:
        assert (site / f"{name}.html").exists(), f"no page for {name}"
    index = _parse(site / "index.html")
    assert [h.removesuffix(".html") for h in index.hrefs if not h.startswith("docs/")] == names
    assert "docs/index.html" in index.hrefs and (site / "docs" / "index.html").exists()


def test_internal_links_resolve_and_no_script_comes_from_the_network(site):
    for page in [*site.glob("*.html"), *site.glob("docs/*.html")]:
        parsed = _parse(page)
        for src in parsed.scripts:
            assert not re.match(r"https?://", src), f"{page.name} loads {src} from the network"
            assert (site / src.split("?")[0]).exists(), f"{page.name}: missing script {src}"
        for href in parsed.hrefs:
            if re.match(r"(https?:|mailto:)", href) or href.startswith("#"):
                continue
            target = page.parent / href.split("#")[0]
            assert target.exists(), f"{page.name} links to {href}, which the site does not have"


def test_every_page_names_the_budget_its_outputs_came_from(site):
    for page in site.glob("*.html"):
        assert 'class="course-budget" data-budget="fast"' in page.read_text(encoding="utf-8"), page.name


def test_no_page_shows_an_error_or_a_warning(site):
    for page in site.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" not in text, page.name
        assert "data-mime-type=\"application/vnd.jupyter.stderr\"" not in text, page.name
        assert not re.search(r"<torch\._C\.Generator object|<torch\._C\.Generator at", text), page.name


PAGE_CHECK = """() => {
  const imgs = [...document.querySelectorAll('.jp-OutputArea img, .widget-snapshot img')];
  const figures = imgs.map(img => {
    const c = document.createElement('canvas');
    c.width = Math.min(img.naturalWidth, 400); c.height = Math.min(img.naturalHeight, 300);
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0, c.width, c.height);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let inked = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (d[i + 3] > 0 && (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200)) inked++;
    }
    return {natural: img.naturalWidth, shown: img.getBoundingClientRect().width, inked: inked / (d.length / 4)};
  });
  return {
    figures,
    math: document.querySelectorAll('.MathJax, .MathJax_Display, .MathJax_CHTML').length,
    mathErrors: document.querySelectorAll('.MathJax_Error, merror').length
      + (document.body.innerText.includes('Math Processing Error') ? 1 : 0),
    tex: [...document.querySelectorAll('.jp-RenderedMarkdown')].some(
      el => /\\$[^$\\n]+\\$|\\\\\\(|\\\\\\[/.test(el.innerText)),
    snapshots: [...document.querySelectorAll('.widget-snapshot')].map(s => s.innerText.length),
  };
}"""


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (.ci/run installs it)")
def test_pages_render_in_chromium(site, artifacts_dir, request, pw_session):
    shots = artifacts_dir / "site"
    shots.mkdir(exist_ok=True)
    figures = math = 0
    browser = pw_session.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        failed: list[str] = []
        page.on("requestfailed", lambda r: failed.append(r.url) if not r.url.startswith("about:") else None)
        for html in sorted(site.glob("*.html")):
            failed.clear()
            page.goto(html.as_uri())
            if html.name != "index.html":
                page.wait_for_function("() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0"
                                       " && MathJax.Hub.queue.running === 0", timeout=60_000)
            result = page.evaluate(PAGE_CHECK)
            page.screenshot(path=str(shots / f"{html.stem}.png"))
            assert not failed, f"{html.name}: failed requests {failed}"
            assert result["mathErrors"] == 0, f"{html.name}: MathJax could not render some math"
            assert not result["tex"], f"{html.name}: TeX left unrendered in the text"
            math += result["math"]
            for i, fig in enumerate(result["figures"]):
                assert fig["natural"] > 0, f"{html.name}: figure {i} did not load"
                assert fig["inked"] > 0.002, f"{html.name}: figure {i} is blank"
                assert fig["shown"] >= 0.9 * min(fig["natural"], 1000), (
                    f"{html.name}: figure {i} shown at {fig['shown']:.0f}px of {fig['natural']}px")
            assert all(n > 0 for n in result["snapshots"]), f"{html.name}: an empty widget snapshot"
            figures += len(result["figures"])
    finally:
        browser.close()
    assert math > 0, "no formula was rendered anywhere on the site (the regularised objective notebook shows TeX)"
    report_line(request.config, f"site: {len(list(site.glob('*.html')))} pages, {figures} figures and {math} formulas "
                                "checked in Chromium")
