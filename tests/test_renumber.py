"""tools/renumber.py: the mapping is one-to-one and never chains, applying it twice changes nothing,
and no tracked file keeps an old stem (the script and this test excepted)."""

from __future__ import annotations

import subprocess

import pytest
from conftest import ROOT

from tools import renumber
from tools.renumber import MAPPING, apply, leftovers, transform


def test_mapping_is_one_to_one_and_never_chains():
    assert len(set(MAPPING.values())) == len(MAPPING)
    assert not set(MAPPING) & set(MAPPING.values()), "a new stem that is an old stem would move again"
    new = sorted(MAPPING.values())
    assert len({s.split("_")[0] for s in new}) == len(new), "two new notebooks share a number"
    with pytest.raises(ValueError, match="also old stems"):
        renumber._check_mapping({"03_a": "04_a", "04_a": "05_a"})
    with pytest.raises(ValueError, match="onto one new stem"):
        renumber._check_mapping({"03_a": "05_a", "04_a": "05_a"})
    with pytest.raises(ValueError, match="not notebook stems"):
        renumber._check_mapping({"three": "04_a"})


def test_the_course_is_numbered_in_teaching_order_after_the_rename():
    stems = sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))
    numbers = [s.split("_")[0] for s in stems]
    assert all(n.isdigit() for n in numbers), f"a notebook keeps a lettered number: {stems}"
    assert len(set(numbers)) == len(numbers), f"two notebooks share a number: {stems}"
    assert not set(stems) & set(MAPPING), "an old stem is still a notebook"


def test_transform_rewrites_whole_stems_in_one_pass_and_is_idempotent():
    text = (
        "see [07 Tiny GPT: the GRPO family](07_tiny_gpt_grpo.ipynb), `12_rl_as_a_system` then 14_recipes;\n"
        "def test_10_graduating_to_trl_runs(): execute('10_graduating_to_trl')\n"
        "x_07_tiny_gpt_grpox stays (glued to letters); 07_tiny_gpt_grpo_runs is the stem + a suffix\n"
        "| [09 The passport](notebooks/09_the_passport.ipynb) | b |\n"
        "| [02 DPO margins](notebooks/02_dpo_margins.ipynb) | a |\n"
        "| [08b The RLHF route](notebooks/08b_the_rlhf_route.ipynb) | c |\n"
    )
    once = transform(text)
    assert once == (
        "see [09 Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb), `14_rl_as_a_system` then 16_recipes;\n"
        "def test_18_graduating_to_trl_runs(): execute('18_graduating_to_trl')\n"
        "x_07_tiny_gpt_grpox stays (glued to letters); 09_tiny_gpt_grpo_runs is the stem + a suffix\n"
        "| [02 DPO margins](notebooks/02_dpo_margins.ipynb) | a |\n"
        "| [12 The RLHF route](notebooks/12_the_rlhf_route.ipynb) | c |\n"
        "| [13 The passport](notebooks/13_the_passport.ipynb) | b |\n"
    )
    assert transform(once) == once
    title = "# # 07 · The GRPO family\n# see 07_tiny_gpt_grpo.ipynb\n"
    assert transform(title, stem="09_tiny_gpt_grpo") == "# # 09 · The GRPO family\n# see 09_tiny_gpt_grpo.ipynb\n"


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_apply_moves_pairs_rewrites_files_and_a_second_run_changes_nothing(tmp_path):
    (tmp_path / "notebooks").mkdir()
    py = "# %% [markdown]\n# Next: [07 GRPO](07_tiny_gpt_grpo.ipynb) and [08 Hacking](08_reward_hacking.ipynb).\n"
    (tmp_path / "notebooks" / "06_tiny_gpt_dpo.py").write_text(py)
    import jupytext

    jupytext.write(jupytext.reads(py, fmt="py:percent"), tmp_path / "notebooks" / "06_tiny_gpt_dpo.ipynb")
    (tmp_path / "Makefile").write_text("lab:\n\tjupyter lab notebooks/11_closing.ipynb\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    first = apply(tmp_path)
    assert sorted(first["moved"]) == ["notebooks/06_tiny_gpt_dpo.ipynb → notebooks/08_tiny_gpt_dpo.ipynb",
                                      "notebooks/06_tiny_gpt_dpo.py → notebooks/08_tiny_gpt_dpo.py"]
    assert (tmp_path / "notebooks" / "08_tiny_gpt_dpo.py").read_text() == (
        "# %% [markdown]\n# Next: [09 GRPO](09_tiny_gpt_grpo.ipynb) and [11 Hacking](11_reward_hacking.ipynb).\n")
    assert "11_reward_hacking.ipynb" in (tmp_path / "notebooks" / "08_tiny_gpt_dpo.ipynb").read_text()
    assert (tmp_path / "Makefile").read_text() == "lab:\n\tjupyter lab notebooks/19_closing.ipynb\n"
    snapshot = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert apply(tmp_path) == {"moved": [], "changed": []}
    assert snapshot == {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert leftovers(tmp_path)["old stems"] == []


def test_no_tracked_file_keeps_an_old_stem():
    assert leftovers(ROOT)["old stems"] == []
