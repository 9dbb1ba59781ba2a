"""Renumber the notebooks in teaching order: the one home of the old stem → new stem mapping.

``python tools/renumber.py`` (from the repository root, in the course venv) does, in one pass:

1. ``git mv`` both files of each pair ``notebooks/OLD.py`` / ``notebooks/OLD.ipynb`` to the new stem
   (pairs already moved are skipped; a target that already exists beside its source is an error);
2. rewrites every full old stem in every tracked text file to its new stem — links, Colab badges,
   tests, README, site builder, ``course_lib``, benchmarks, Makefile. Stems are matched whole
   (number *and* name, not glued to a letter or digit), all at once, so ``12_rl_as_a_system`` →
   ``14_rl_as_a_system`` can never be rewritten again as ``14_recipes`` → ``16_recipes`` would;
3. renumbers each notebook's title (``# 07 · …`` in ``notebooks/09_tiny_gpt_grpo.py`` → ``# 09 · …``) and
   link texts that start with a notebook number, ``[07 Tiny GPT: …](07_tiny_gpt_grpo.ipynb)``
   → ``[09 Tiny GPT: …](09_tiny_gpt_grpo.ipynb)``, from the stem the link points at;
4. sorts the rows of every markdown table whose rows each start with a link to a notebook (the
   course maps) into teaching order;
5. regenerates the ``.ipynb`` of every notebook whose ``.py`` changed (``jupytext``), keeping pairs in sync.

Every step is a function of the files' present state and the mapping, so a second run changes
nothing: the lead re-runs it after merging branches that still use the old names. No new stem is an
old stem (checked at import), which is what makes one pass safe. ``--check`` changes nothing and
lists what is left for a person: old stems still present, and prose that names a notebook by its
number ("notebook 07", "notebooks 06–08"), which no script can rewrite safely — write a link instead.

This file and ``tests/test_renumber.py`` are the only files allowed to keep old stems.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# old stem → new stem. ``02b_the_kl_term`` was split in two (03_the_regularised_objective and
# 10_the_kl_term, both created under their new names); a leftover reference to it means the KL
# term's trainer-side half, where the penalty's estimators, placement and β sweep now live.
MAPPING: dict[str, str] = {
    "02b_the_kl_term": "10_the_kl_term",
    "03_group_baselines": "04_group_baselines",
    "03b_from_advantages_to_an_update": "05_from_advantages_to_an_update",
    "04_baseline_bias_enumeration": "06_baseline_bias_enumeration",
    "05_memory_and_rollout_budgets": "07_memory_and_rollout_budgets",
    "06_tiny_gpt_dpo": "08_tiny_gpt_dpo",
    "07_tiny_gpt_grpo": "09_tiny_gpt_grpo",
    "08_reward_hacking": "11_reward_hacking",
    "08b_the_rlhf_route": "12_the_rlhf_route",
    "09_the_passport": "13_the_passport",
    "12_rl_as_a_system": "14_rl_as_a_system",
    "13_environments_and_tools": "15_environments_and_tools",
    "14_recipes": "16_recipes",
    "15_ai_feedback": "17_ai_feedback",
    "10_graduating_to_trl": "18_graduating_to_trl",
    "11_closing": "19_closing",
}
STEM = re.compile(r"^\d\d[a-z]?_[a-z0-9_]+$")
# the files that keep old stems on purpose: the mapping's home and its test
EXEMPT = {"tools/renumber.py", "tests/test_renumber.py"}


def _check_mapping(mapping: dict[str, str]) -> None:
    bad = [s for s in [*mapping, *mapping.values()] if not STEM.match(s)]
    if bad:
        raise ValueError(f"not notebook stems (NN_name): {bad}")
    if len(set(mapping.values())) != len(mapping):
        raise ValueError("two old stems map onto one new stem")
    chained = set(mapping) & set(mapping.values())
    if chained:
        raise ValueError(f"new stems that are also old stems (a second run would move them again): {sorted(chained)}")


_check_mapping(MAPPING)


def stem_pattern(stems) -> re.Pattern:
    """Whole stems only: not preceded or followed by a letter or digit (``test_07_…`` still matches)."""
    alternatives = "|".join(re.escape(s) for s in sorted(stems, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9])({alternatives})(?![A-Za-z0-9])")


OLD = stem_pattern(MAPPING)
# a link whose text starts with a notebook number and whose target is a notebook (.ipynb or the site's .html)
NUMBERED_LINK = re.compile(r"\[(\d\d[a-z]?)( [^\]\n]*\]\((?:[^)\s]*/)?(\d\d[a-z]?)_[a-z0-9_]+\.(?:ipynb|html)\))")
# a table row (optionally inside a py:percent comment) whose first cell is a link to a notebook
TABLE_ROW = re.compile(r"^(# )?\| \[[^\]\n]*\]\((?:[^)\s]*/)?(\d\d[a-z]?_[a-z0-9_]+)\.(?:ipynb|html)\)")
PROSE = re.compile(r"\bnotebooks? \d\d[a-z]?\b|\b\d\d[a-z]? §\d|\(\d\d[a-z]\)|\bnotebooks \d\d[a-z]?[–-]\d\d", re.I)


def rewrite_stems(text: str, mapping: dict[str, str] = MAPPING) -> str:
    pattern = OLD if mapping is MAPPING else stem_pattern(mapping)
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def renumber_link_texts(text: str) -> str:
    return NUMBERED_LINK.sub(lambda m: f"[{m.group(3)}{m.group(2)}", text)


def sort_map_tables(text: str) -> str:
    """Sort each run of consecutive notebook-link table rows by the stem of their first link."""
    lines = text.split("\n")
    out, run = [], []

    def flush():
        out.extend(sorted(run, key=lambda line: TABLE_ROW.match(line).group(2)) if len(run) > 1 else run)
        run.clear()

    for line in lines:
        if TABLE_ROW.match(line):
            run.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out)


TITLE = re.compile(r"^# # \d\d[a-z]? · ", re.M)


def transform(text: str, mapping: dict[str, str] = MAPPING, stem: str | None = None) -> str:
    """``stem``: the notebook the text is the source of; its title ``# NN · …`` takes the stem's number."""
    text = sort_map_tables(renumber_link_texts(rewrite_stems(text, mapping)))
    if stem is not None:
        text = TITLE.sub(f"# # {stem.split('_')[0]} · ", text, count=1)
    return text


def tracked_text_files(root: Path = ROOT) -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True).stdout
    files = []
    for name in names.decode().split("\0"):
        path = root / name
        if not name or name in EXEMPT or not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def move_pairs(root: Path = ROOT, mapping: dict[str, str] = MAPPING) -> list[str]:
    moved = []
    for old, new in mapping.items():
        for ext in (".py", ".ipynb"):
            src, dst = root / "notebooks" / f"{old}{ext}", root / "notebooks" / f"{new}{ext}"
            if not src.exists():
                continue
            if dst.exists():
                raise FileExistsError(f"{dst.relative_to(root)} exists beside {src.relative_to(root)}: merge by hand")
            subprocess.run(["git", "mv", str(src), str(dst)], cwd=root, check=True)
            moved.append(f"{src.relative_to(root)} → {dst.relative_to(root)}")
    return moved


def sync_pair(py: Path) -> None:
    """Write the .ipynb from its .py, keeping the committed cell ids (jupytext would draw new ones)."""
    import jupytext
    import nbformat

    ipynb = py.with_suffix(".ipynb")
    nb = jupytext.read(py)
    if ipynb.exists():
        old = nbformat.read(ipynb, as_version=4)
        if len(old.cells) == len(nb.cells):
            for cell, before in zip(nb.cells, old.cells):
                if "id" in before:
                    cell["id"] = before["id"]
    jupytext.write(nb, ipynb, fmt="ipynb")


def apply(root: Path = ROOT, mapping: dict[str, str] = MAPPING) -> dict[str, list[str]]:
    moved = move_pairs(root, mapping)
    changed = []
    for path in tracked_text_files(root):
        if path.suffix == ".ipynb" and path.with_suffix(".py").exists() and path.parent.name == "notebooks":
            continue  # regenerated from its .py below
        text = path.read_text(encoding="utf-8")
        notebook = path.suffix == ".py" and path.parent == root / "notebooks"
        new = transform(text, mapping, path.stem if notebook else None)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(str(path.relative_to(root)))
    for py in sorted((root / "notebooks").glob("*.py")):
        ipynb = py.with_suffix(".ipynb")
        if str(py.relative_to(root)) in changed or any(m.endswith(ipynb.name) for m in moved) or (
                ipynb.exists() and OLD.search(ipynb.read_text(encoding="utf-8"))):
            sync_pair(py)
            changed.append(str(ipynb.relative_to(root)))
    return {"moved": moved, "changed": changed}


def leftovers(root: Path = ROOT) -> dict[str, list[str]]:
    """Old stems still present, and prose naming a notebook by number (for a person to turn into links)."""
    stems, prose = [], []
    for path in tracked_text_files(root):
        rel = path.relative_to(root)
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OLD.search(line):
                stems.append(f"{rel}:{i}: {line.strip()[:140]}")
            if path.suffix != ".ipynb" and PROSE.search(line):
                prose.append(f"{rel}:{i}: {line.strip()[:140]}")
    return {"old stems": stems, "numbered prose": prose}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list what is left for a person")
    args = parser.parse_args(argv)
    if not args.check:
        result = apply()
        print(f"moved {len(result['moved'])} files, rewrote {len(result['changed'])}")
        for line in result["moved"]:
            print("  moved", line)
    left = leftovers()
    for kind, lines in left.items():
        if lines:
            print(f"{kind} ({len(lines)}):")
            print("\n".join(f"  {line}" for line in lines))
    return 1 if left["old stems"] else 0


if __name__ == "__main__":
    sys.exit(main())
