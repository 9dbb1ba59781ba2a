"""The docs pages in the rendered site (``tools.build_site.build_docs``), no notebook executed:
every ``docs/*.md`` becomes ``_site/docs/NAME.html`` with its tables, and every link on it
resolves to a site page, a notebook's page or the repository on GitHub; the README, which sends a
reader to these pages, stays within 15 KB and its links resolve. ``tests/test_site.py`` checks the
whole site, notebooks included, in Chromium."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from conftest import ROOT

from course_lib.lesson.colab import BRANCH, REPO_URL
from tools.build_site import _link_pages, build_docs, doc_href, index_page, notebook_names


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    return out, build_docs(out)


def test_every_docs_page_is_rendered_with_its_title_and_the_index_links_them(site):
    out, entries = site
    sources = sorted((ROOT / "docs").glob("*.md"))
    assert len(entries) == len(sources) >= 8 and entries[0] == ("docs/index.html", "Documentation")
    for href, title in entries:
        text = (out / href).read_text(encoding="utf-8")
        assert f"<h1>{title}</h1>" in text.replace("<code>", "").replace("</code>", "")
    index = index_page([("00_start_here", "Start here")], fast=True, docs=entries)
    assert all(f'href="{href}"' in index for href, _ in entries)


def test_tables_and_generated_blocks_come_through(site):
    out, _ = site
    results = (out / "docs" / "results.html").read_text(encoding="utf-8")
    assert results.count("<table>") >= 10 and "<!-- bench:grpo_family -->" in results
    assert "<table>" in (out / "docs" / "course-map.html").read_text(encoding="utf-8")


def test_every_link_on_a_docs_page_resolves_in_the_site_or_points_at_the_repository(site):
    out, _ = site
    pages = {f"{name}.html" for name in notebook_names()} | {"index.html"}
    repository = f"{REPO_URL}/blob/{BRANCH}/"
    for page in (out / "docs").glob("*.html"):
        parser = _Page()
        parser.feed(page.read_text(encoding="utf-8"))
        for href in parser.hrefs:
            if href.startswith(repository):
                assert (ROOT / href.removeprefix(repository).split("#")[0]).exists(), href
            elif not re.match(r"(https?:|mailto:|#)", href):
                target = (page.parent / href.split("#")[0]).resolve()
                sibling = target.parent == out.resolve() and target.name in pages
                assert target.exists() or sibling, f"{page.name} links to {href}: not in the site"
                assert target.suffix == ".html", f"{page.name}: {href} is not a page of the site"


def test_doc_links_map_to_pages_and_a_link_out_of_the_repository_is_refused():
    assert doc_href("results.md#seeds") == "results.html#seeds"
    assert doc_href("README.md") == "index.html"
    assert doc_href("../README.md#course-map") == "../index.html"
    assert doc_href("../notebooks/09_tiny_gpt_grpo.ipynb") == "../09_tiny_gpt_grpo.html"
    assert doc_href("../instructor/README.md") == f"{REPO_URL}/blob/{BRANCH}/instructor/README.md"
    assert doc_href("https://example.org/x.md") == "https://example.org/x.md"
    with pytest.raises(ValueError, match="leaves the repository"):
        doc_href("../../elsewhere.md")
    # notebook 00's map links the instructor's guide from notebooks/: the site has it in docs/
    assert _link_pages('<a href="../docs/instructors.md">') == '<a href="docs/instructors.html">'


def test_the_readme_stays_a_five_minute_read_and_its_links_resolve():
    readme = ROOT / "README.md"
    assert readme.stat().st_size <= 15_000, "the README holds what it is, set-up, the map, the CLI and where next"
    links = re.findall(r"\]\(([^)\s]+)\)", readme.read_text(encoding="utf-8"))
    local = [link.split("#")[0] for link in links if not re.match(r"(https?:|mailto:|#)", link)]
    assert len(local) > 20  # the notebooks of the map and the docs pages
    assert [link for link in local if not (ROOT / link).exists()] == []
