"""Build the rendered course: every lecture notebook executed, converted to a static HTML site.

Committed notebooks carry no outputs, so the repository's web page shows no figure and no number.
``make site`` runs each notebook in ``notebooks/`` on a fresh kernel with the full budget (what a
student runs) and converts it with nbconvert's ``lab`` template into ``_site/``, with an index page
in course-map order; ``make site FAST=1`` (``--fast``, ``COURSE_FAST=1``) is CI's quick build. Every
page says which budget produced its outputs. The ``docs/*.md`` pages are rendered into
``_site/docs/`` (``build_docs``) and linked from the index.

Executed notebooks are cached per budget in ``.site-cache/`` under a key made of the notebook's file,
every ``course_lib`` source and the benchmark results it shows (``cache_key``), so a rebuild runs
only the notebooks whose inputs changed; a line per notebook says whether it ran (and in how long)
or came from the cache.

Simplifications, said out loud:
- nbconvert, not a book framework: one page per notebook, an index, nothing else to learn. The
  docs pages go through ``markdown-it-py`` (CommonMark and tables; Jupytext's own parser), barely
  styled; a link to a repository file that is not a page points at the file on GitHub.
- No JavaScript from the network. MathJax comes from the ``jupyter-server-mathjax`` package and is
  copied next to the pages; require.js and the widget renderer are not loaded at all.
- Widgets are shown as their state when execution ended, not live: each control becomes a line
  ("β = 0.10") and each ``Output`` widget the outputs it had captured (figures, printed lines).
  Moving a slider needs a kernel: the page says so and links to the notebook.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import os
import re
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import nbformat
from markdown_it import MarkdownIt
from nbclient import NotebookClient
from nbconvert import HTMLExporter
from traitlets.config import Config

from course_lib.lesson.colab import BRANCH, REPO_URL, colab_url, notebook_path
from tools import cpu_kernels

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LIBRARY = ROOT / "course_lib"
BENCHMARKS = ROOT / "benchmarks"  # 09 and 11 read results files and render them with tables.py
DOCS = ROOT / "docs"
CACHE = ROOT / ".site-cache"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MATHJAX_URL = "_static/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
# jupyter-server-mathjax ships the STIX-Web fonts only (as the classic notebook configured them)
MATHJAX_FONTS = ('<script type="text/x-mathjax-config">MathJax.Hub.Config({"HTML-CSS": '
                 '{availableFonts: [], imageFont: null, preferredFont: null, webFont: "STIX-Web"}});'
                 "</script>")
CONTROL_VALUE = ("Slider", "Text", "Checkbox", "Progress", "BoundedFloat", "BoundedInt")
CONTROL_CHOICE = ("Dropdown", "ToggleButtons", "RadioButtons", "Select")


def notebook_names() -> list[str]:
    """Every lecture notebook, in course-map order (the file names sort in teaching order)."""
    return sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))


def budget_name(fast: bool) -> str:
    return "fast" if fast else "full"


def execute(name: str, *, fast: bool, timeout: int = 1800) -> nbformat.NotebookNode:
    """Run a notebook on a fresh kernel from its own folder, keeping the widgets' final state.

    The kernel inherits this process's environment with ``COURSE_FAST`` set to the budget asked
    for (and removed for the full budget, so a ``COURSE_FAST=1`` shell cannot leak into it).
    """
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    saved = os.environ.get("COURSE_FAST")
    if fast:
        os.environ["COURSE_FAST"] = "1"
    else:
        os.environ.pop("COURSE_FAST", None)
    try:
        with tempfile.TemporaryDirectory(prefix="nbk") as sockets:  # IPC: no TCP port races
            client = NotebookClient(
                nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                resources={"metadata": {"path": str(NOTEBOOKS)}},
                config=Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/k"}}),
            )
            client.execute()
    finally:
        if saved is None:
            os.environ.pop("COURSE_FAST", None)
        else:
            os.environ["COURSE_FAST"] = saved
    return nb


def cache_key(name: str, budget: str) -> str:
    """What an executed notebook depends on: its own file, the library's sources, the benchmark results
    it names (and ``tables.py`` when it imports it), the budget and torch's CPU kernel set
    (``tools/cpu_kernels.py``: another set rounds differently, so it is another run)."""
    digest = hashlib.sha256(f"{budget} {os.environ.get('ATEN_CPU_CAPABILITY', 'default')}".encode())
    notebook = (NOTEBOOKS / f"{name}.ipynb").read_bytes()
    digest.update(notebook)
    text = notebook.decode("utf-8")
    read = sorted(p for p in (BENCHMARKS / "results").glob("*.json") if p.name in text)
    if "from tables import" in text:
        read += [BENCHMARKS / "tables.py", BENCHMARKS / "goals.py"]
    for source in sorted(LIBRARY.rglob("*.py")):
        digest.update(str(source.relative_to(LIBRARY)).encode())
        digest.update(source.read_bytes())
    for source in read:
        digest.update(str(source.relative_to(BENCHMARKS)).encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def executed_notebook(name: str, *, fast: bool, cache: Path | None) -> tuple[nbformat.NotebookNode, str]:
    """The notebook run at this budget, from the cache when its inputs are unchanged; and how."""
    budget = budget_name(fast)
    key = cache_key(name, budget)
    cached = cache / budget / f"{name}.ipynb" if cache is not None else None
    if cached is not None and cached.exists():
        nb = nbformat.read(cached, as_version=4)
        meta = nb.metadata.get("course_site", {})
        if meta.get("key") == key:
            return nb, f"from the cache (ran {meta['seconds']:.1f} s on {meta['executed_at']})"
    start = time.perf_counter()
    nb = execute(name, fast=fast)
    seconds = time.perf_counter() - start
    nb.metadata["course_site"] = {
        "key": key, "budget": budget, "seconds": round(seconds, 1),
        "executed_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")
        nbformat.write(nb, partial)
        partial.replace(cached)  # a build stopped half-way never leaves a truncated cache entry
    return nb, f"executed in {seconds:.1f} s"


BUDGET_NOTE = {
    "full": "Outputs from the full budget: what a student sees after running this notebook with "
            "<code>make lab</code>.",
    "fast": "Outputs from CI's quick budget (<code>COURSE_FAST=1</code>): the same lesson with "
            "smaller runs than a student's, so the numbers differ from a full run.",
}


def budget_banner(nb: nbformat.NotebookNode, fast: bool) -> str:
    meta = nb.metadata.get("course_site", {})
    budget = meta.get("budget", budget_name(fast))
    when = (f" Executed {meta['executed_at']} in {meta['seconds']:.0f} s."
            if "seconds" in meta else "")
    return f'<p class="course-budget" data-budget="{budget}">{BUDGET_NOTE[budget]}{when}</p>'


def _output_html(out: dict) -> str:
    data = out.get("data", {})
    if out.get("output_type") == "stream":
        return f"<pre>{html.escape(out.get('text', ''))}</pre>"
    if "image/png" in data:
        return f'<img src="data:image/png;base64,{data["image/png"].strip()}" alt="figure">'
    if "text/html" in data:
        return data["text/html"]
    if "text/plain" in data:
        return f"<pre>{html.escape(data['text/plain'])}</pre>"
    return ""


def _widget_html(model_id: str, states: dict, seen: set) -> str:
    """One widget, as the reader would have seen it when execution ended."""
    if model_id in seen or model_id not in states:
        return ""
    seen.add(model_id)
    name, state = states[model_id]["model_name"], states[model_id]["state"]
    label = html.escape(str(state.get("description", "")))
    children = [c.removeprefix("IPY_MODEL_") for c in state.get("children", [])]
    if children:
        return "".join(_widget_html(c, states, seen) for c in children)
    if name == "OutputModel":
        return "".join(_output_html(o) for o in state.get("outputs", []))
    if name in ("HTMLModel", "HTMLMathModel"):
        return f"<div>{state.get('value', '')}</div>"
    if name == "LabelModel":
        return f"<div>{html.escape(str(state.get('value', '')))}</div>"
    if any(k in name for k in CONTROL_CHOICE):
        labels, index = state.get("_options_labels", []), state.get("index")
        value = labels[index] if isinstance(index, int) and index < len(labels) else ""
        return f'<div class="widget-snapshot-control">{label} <b>{html.escape(str(value))}</b></div>'
    if any(k in name for k in CONTROL_VALUE):
        value = state.get("value")
        if isinstance(value, float):
            value = f"{value:.{_decimals(state)}f}"
        return f'<div class="widget-snapshot-control">{label} <b>{html.escape(str(value))}</b></div>'
    return ""


def _decimals(state: dict) -> int:
    match = re.search(r"\.(\d+)f", str(state.get("readout_format", "")))
    return int(match.group(1)) if match else 2


def snapshot_widgets(nb: nbformat.NotebookNode, links: str) -> int:
    """Replace every widget view by a static snapshot of its final state; return how many."""
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    count = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for i, out in enumerate(cell.get("outputs", [])):
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                continue
            body = _widget_html(view["model_id"], states, set())
            note = (f'<p class="widget-snapshot-note">Interactive in the notebook, shown here as it '
                    f'stood after the run. To move it: {links}.</p>')
            cell.outputs[i] = nbformat.v4.new_output(
                "display_data", data={"text/html": f'<div class="widget-snapshot">{note}{body}</div>'}
            )
            count += 1
    nb.metadata.pop("widgets", None)
    return count


def _link_pages(body: str) -> str:
    """Links between notebooks point at their pages: ``02_dpo_margins.ipynb`` → ``.html``, and
    ``../docs/x.md`` at the docs page ``docs/x.html``."""
    body = re.sub(r'href="\.\./docs/([\w.-]+)\.md(#[^"]*)?"',
                  lambda m: f'href="docs/{m.group(1)}.html{m.group(2) or ""}"', body)
    return re.sub(r'href="(?:\.\./notebooks/|notebooks/|\./)?([\w.-]+)\.ipynb(#[^"]*)?"',
                  lambda m: f'href="{m.group(1)}.html{m.group(2) or ""}"', body)


def doc_page_name(path: Path) -> str:
    """A docs page's HTML name: ``docs/README.md`` is the docs index, ``x.md`` is ``x.html``."""
    return "index.html" if path.name == "README.md" else f"{path.stem}.html"


def doc_href(target: str) -> str:
    """A link in a docs page as the site's ``docs/`` folder reads it: another docs page or a
    notebook's page, the README as the site's index, any other repository file on GitHub."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
        return target
    path, _, anchor = target.partition("#")
    anchor = f"#{anchor}" if anchor else ""
    if "/" not in path and path.endswith(".md"):
        return doc_page_name(Path(path)) + anchor
    if path == "../README.md":
        return "../index.html"
    notebook = re.fullmatch(r"\.\./notebooks/([\w.-]+)\.ipynb", path)
    if notebook:
        return f"../{notebook.group(1)}.html{anchor}"
    repository_path = Path(os.path.normpath(Path("docs") / path)).as_posix()
    if repository_path.startswith(".."):
        raise ValueError(f"a docs link leaves the repository: {target!r}")
    return f"{REPO_URL}/blob/{BRANCH}/{repository_path}{anchor}"


def render_doc(markdown: str) -> tuple[str, str]:
    """A docs page as an HTML page and its title (its first ``# `` heading)."""
    headings = [line[2:].strip() for line in markdown.splitlines() if line.startswith("# ")]
    title = headings[0].replace("`", "") if headings else "Learning from Feedback"
    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    body = re.sub(r'href="([^"]*)"',
                  lambda m: f'href="{html.escape(doc_href(html.unescape(m.group(1))))}"', body)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)} · Learning from Feedback</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;line-height:1.5}}
table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:0.2rem 0.4rem;vertical-align:top}}</style>
</head><body data-course-page="docs">
<nav class="course-nav"><a href="../index.html">← Course map</a> ·
<a href="index.html">Documentation</a></nav>
{body}</body></html>
"""
    return page, title


def build_docs(out: Path, docs: Path = DOCS) -> list[tuple[str, str]]:
    """Render every ``docs/*.md`` into ``out/docs/``; (page, title) per page, the docs index first."""
    (out / "docs").mkdir(parents=True, exist_ok=True)
    entries = []
    for path in sorted(docs.glob("*.md"), key=lambda p: (p.name != "README.md", p.name)):
        page, title = render_doc(path.read_text(encoding="utf-8"))
        (out / "docs" / doc_page_name(path)).write_text(page, encoding="utf-8")
        entries.append((f"docs/{doc_page_name(path)}", title))
    return entries


def _title(nb: nbformat.NotebookNode, name: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if match:
                return match.group(1).strip()
    return name


def render(nb: nbformat.NotebookNode, name: str, *, fast: bool) -> tuple[str, str]:
    path = notebook_path(name)
    links = (f'<code>make lab</code>, or <a href="{colab_url(path)}">open it in Colab</a> '
             f'(<a href="{REPO_URL}/blob/{BRANCH}/{path}">source</a>)')
    snapshot_widgets(nb, links)
    exporter = HTMLExporter(template_name="lab", embed_images=True)
    exporter.mathjax_url = MATHJAX_URL
    exporter.require_js_url = ""
    exporter.jquery_url = ""
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": _title(nb, name)}})
    body = re.sub(r'<script src=""></script>\s*', "", body)
    body = body.replace('<script src="' + MATHJAX_URL, MATHJAX_FONTS + '\n<script src="' + MATHJAX_URL, 1)
    body = body.replace("<body", '<body data-course-page="' + name + '"', 1)
    nav = '<nav class="course-nav"><a href="index.html">← Course map</a></nav>' + budget_banner(nb, fast)
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + nav, body, count=1)
    return _link_pages(body), _title(nb, name)


def index_page(entries: list[tuple[str, str]], *, fast: bool,
               docs: list[tuple[str, str]] = ()) -> str:
    rows = "\n".join(f'<li><a href="{name}.html">{html.escape(title)}</a></li>' for name, title in entries)
    doc_rows = "\n".join(f'<li><a href="{href}">{html.escape(title)}</a></li>'
                         for href, title in docs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Learning from Feedback</title>
<style>body{{font-family:system-ui,sans-serif;max-width:48rem;margin:2rem auto;line-height:1.5}}</style>
</head><body data-course-page="index">
<h1>Learning from Feedback</h1>
<p>The executed course: every lecture notebook with its figures and numbers. To run and change
them, use <code>make lab</code> or the Colab badges in the repository's README.</p>
<p class="course-budget" data-budget="{budget_name(fast)}">{BUDGET_NOTE[budget_name(fast)]}</p>
<ol>
{rows}
</ol>
<h2>Documentation</h2>
<ul class="course-docs">
{doc_rows}
</ul>
</body></html>
"""


def copy_mathjax(out: Path) -> None:
    import jupyter_server_mathjax

    src = Path(jupyter_server_mathjax.__file__).parent / "static"
    dest = out / "_static" / "mathjax"
    if not dest.exists():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.md", "LICENSE*"))


def build(out: Path, *, fast: bool, executed: Path | None = None, names: list[str] | None = None,
          cache: Path | None = None) -> list[Path]:
    """Write the site into ``out``.

    Each notebook comes from ``executed`` when it holds one (the test suite's copies, run at the
    FAST budget), else from ``cache`` when its inputs are unchanged, else from a fresh run.
    """
    out.mkdir(parents=True, exist_ok=True)
    copy_mathjax(out)
    entries, pages = [], []
    names = names or notebook_names()
    for i, name in enumerate(names, 1):
        given = executed / f"{name}.ipynb" if executed else None
        if given is not None and given.exists():
            nb, how = nbformat.read(given, as_version=4), "already executed"
        else:
            print(f"[{i}/{len(names)}] {name} ({budget_name(fast)} budget) ...", flush=True)
            nb, how = executed_notebook(name, fast=fast, cache=cache)
        print(f"[{i}/{len(names)}] {name}: {how}", flush=True)
        body, title = render(nb, name, fast=fast)
        page = out / f"{name}.html"
        page.write_text(body, encoding="utf-8")
        entries.append((name, title))
        pages.append(page)
    docs = build_docs(out)
    (out / "index.html").write_text(index_page(entries, fast=fast, docs=docs), encoding="utf-8")
    return pages


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="_site", help="output folder (default: %(default)s)")
    parser.add_argument("--fast", action="store_true",
                        help="run with COURSE_FAST=1 (CI's quick budget); default: the full budget")
    parser.add_argument("--executed", default=None,
                        help="folder of already executed notebooks to reuse (NAME.ipynb)")
    parser.add_argument("--cache", default=str(CACHE),
                        help="folder of executed notebooks kept between builds (default: %(default)s)")
    parser.add_argument("--no-cache", action="store_true", help="run every notebook afresh")
    args = parser.parse_args(argv)
    cpu_kernels.pin()  # the kernels inherit it: the same kernels the tests' recorded lessons ran on
    start = time.perf_counter()
    pages = build(Path(args.out), fast=args.fast, executed=Path(args.executed) if args.executed else None,
                  cache=None if args.no_cache else Path(args.cache))
    print(f"({time.perf_counter() - start:.0f} s in all)")
    print(f"wrote {len(pages)} pages and index.html to {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
