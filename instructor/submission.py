"""Rebuild a submitted notebook around the release's cells, so that nothing a student did to the
notebook's structure can break grading for them or anyone else.

nbgrader's own sanitising step trusts the submitted notebook's nbgrader metadata: a test cell pasted
twice (JupyterLab copies the metadata) left a cell with emptied metadata that failed validation; a
deleted test cell earned nothing; corrupted metadata failed the whole notebook. ``rebuild`` instead
reads the submission as plain JSON and keeps only what the student owns:

- cells are matched to the release by their ``grade_id`` (only when the metadata is a dict with a
  string id and the cell type matches); an answer cell keeps the student's source with the
  release's metadata, every other release cell (tests, set-up, written instructions) is the
  release's own cell;
- a second copy of a release cell is dropped (of an answer cell: kept as the student's own code);
- a cell whose metadata is broken or whose id the release does not know is the student's own cell:
  it runs, without nbgrader metadata;
- a release cell missing from the submission is put back where the release has it (a missing
  answer cell comes back empty, so it cannot shadow code the student wrote elsewhere);
- a locked cell (tests, set-up, given numbers, instructions) whose source the student changed is
  the release's again, and the change is reported as tampering (nbgrader's checksums, which a
  student can forge, are not what decides);
- a notebook whose answer cells are all as released is reported: nothing was answered;
- a file that is not JSON, JSON nested too deep to read, or JSON without a list of cells, cannot
  be rebuilt: 0 points for it.

Every change is reported (``problems``), so the instructor sees exactly what happened and why.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import nbformat

from instructor.collect import parse_canvas_name, release_name

EMPTY_ANSWER = {"code": "# (this answer cell was missing from the submission)", "markdown": "(answer cell missing)"}


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata")
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
    return gid if isinstance(gid, str) and gid else None


def _source(cell) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def _is_answer(cell) -> bool:
    return bool(cell.metadata.get("nbgrader", {}).get("solution"))


def _plain(cell_type: str, source: str):
    if cell_type == "code":
        return nbformat.v4.new_code_cell(source)
    if cell_type == "raw":
        return nbformat.v4.new_raw_cell(source)
    return nbformat.v4.new_markdown_cell(source)


def rebuild(raw: bytes, release) -> tuple[object | None, list[str]]:
    """(clean notebook, problems) for a submitted file's bytes; (None, [reason]) if hopeless."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return None, [f"is not a notebook (not JSON: {str(err)[:120]}): 0 points for it"]
    except RecursionError:
        return None, ["is not a notebook this course can read (its JSON is nested deeper than Python reads, "
                      "which no notebook Jupyter writes is): 0 points for it"]
    if isinstance(data, dict) and isinstance(data.get("nbformat"), int) and data["nbformat"] < 4:
        return None, [f"is not a notebook this course grades (nbformat {data['nbformat']}, from IPython 3 or older; "
                      "save it again in Jupyter, which writes nbformat 4): 0 points for it"]
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        return None, ["is not a notebook (no list of cells): 0 points for it"]
    by_id = {_grade_id(c): c for c in release.cells if _grade_id(c)}
    out, used, problems = [], set(), []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            problems.append(f"cell {index + 1} is not a notebook cell: ignored")
            continue
        gid, kind, source = _grade_id(cell), cell["cell_type"], _source(cell)
        meta = cell.get("metadata")
        if gid in by_id and by_id[gid].cell_type == kind and gid not in used:
            ref = copy.deepcopy(by_id[gid])
            if _is_answer(ref):
                ref.source = source
            elif source.rstrip() != ref.source.rstrip():
                problems.append(f"tampering: locked cell {gid} was edited; the release's version ran instead")
            if kind == "code":
                ref.outputs, ref.execution_count = [], None
            out.append(ref)
            used.add(gid)
            continue
        if gid in by_id and gid in used:
            if _is_answer(by_id[gid]):
                problems.append(f"a second copy of answer cell {gid} runs as your own code")
                out.append(_plain(kind, source))
            else:
                problems.append(f"a second copy of cell {gid} was removed (only the release's copy runs)")
            continue
        if gid in by_id:
            problems.append(f"cell {gid} changed type to {kind}: it runs as your own code")
        elif gid:
            problems.append(f"cell id {gid!r} is not in the assignment: it runs as your own code")
        elif isinstance(meta, dict) and "nbgrader" in meta and meta["nbgrader"] not in ({}, None):
            problems.append(f"cell {index + 1} had broken nbgrader metadata: it runs as your own code")
        out.append(_plain(kind, source))
    # put back what is missing, after the release cell that precedes it
    for position, ref in enumerate(release.cells):
        gid = _grade_id(ref)
        if not gid or gid in used:
            continue
        cell = copy.deepcopy(ref)
        if _is_answer(cell):
            cell.source = EMPTY_ANSWER.get(cell.cell_type, "")
            problems.append(f"answer cell {gid} was missing: graded as empty")
        else:
            problems.append(f"cell {gid} was missing: put back from the release")
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        before = [_grade_id(c) for c in release.cells[:position] if _grade_id(c) in used]
        at = 0
        if before:
            at = next(i for i, c in enumerate(out) if _grade_id(c) == before[-1]) + 1
        out.insert(at, cell)
        used.add(gid)
    answers = [c for c in release.cells if _grade_id(c) and _is_answer(c)]
    edited = [c for c in out if _grade_id(c) and _is_answer(c)
              and c.source.rstrip() not in (by_id[_grade_id(c)].source.rstrip(), EMPTY_ANSWER.get(c.cell_type))]
    if answers and not edited:
        problems.append("nothing answered: every answer cell is as released")
    nb = nbformat.v4.new_notebook(cells=out, metadata=copy.deepcopy(release.metadata))
    for index, cell in enumerate(nb.cells):  # ids must be unique and valid
        cell["id"] = f"cell-{index}"
    nbformat.validate(nb)
    return nb, problems


def file_hashes(folder: Path) -> dict[str, str]:
    """{notebook file: sha256 of its bytes} for one submission folder."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.ipynb"))}


def stage(submitted: Path, release_dir: Path, staged: Path) -> tuple[dict[str, str], list[str]]:
    """Rebuild every notebook of one student's submission folder into ``staged``.

    Returns ({notebook file: sha of the submitted bytes}, problems). A file named as the LMS names
    it (``smithjohn_12345_678901_q1_bradley_terry-1.ipynb``, instructor/collect.py) stands for the
    release notebook in its name; of several files for one notebook, the release's own name wins,
    then the newest resubmission. Files that are not one of the release's notebooks are reported
    and left out; so are notebooks that cannot be rebuilt.
    """
    staged.mkdir(parents=True, exist_ok=True)
    expected = {p.name: p for p in sorted(release_dir.glob("*.ipynb"))}
    hashes, problems = file_hashes(submitted), []
    chosen: dict[str, Path] = {}
    rank = lambda p: (p.name in expected, (parse_canvas_name(p.name) or {}).get("attempt", 0), p.name)  # noqa: E731
    for path in sorted(submitted.glob("*.ipynb")):
        target = release_name(path.name, set(expected))
        if target is None:
            problems.append(f"{path.name} ignored: not one of the assignment's notebooks ({', '.join(expected)})")
        elif target in chosen:
            older = min(chosen[target], path, key=rank)
            chosen[target] = max(chosen[target], path, key=rank)
            problems.append(f"{older.name} ignored: {chosen[target].name} is a newer copy of {target}")
        else:
            chosen[target] = path
    for target, path in sorted(chosen.items()):
        if path.name != target:
            problems.append(f"{path.name} graded as {target} (a file name from the LMS)")
        nb, notes = rebuild(path.read_bytes(), nbformat.read(str(expected[target]), as_version=4))
        problems += [f"{path.name} {note}" if nb is None else f"{path.name}: {note}" for note in notes]
        if nb is not None:
            nbformat.write(nb, str(staged / target))
    missing = [name for name in expected if name not in chosen]
    if missing:
        problems.append(f"not submitted (0 points): {', '.join(missing)}")
    if (submitted / "timestamp.txt").exists():
        (staged / "timestamp.txt").write_bytes((submitted / "timestamp.txt").read_bytes())
    return hashes, problems
