"""Q5's run report, drawn per student id: the sentence bank and the draw (the locked cell
``q5_report``), the key (the solution region of ``q5_passport``), grading against the submitter's id.

The fast tests read the notebooks; ``test_pipeline_*`` grade a scratch course with nbgrader in the
sandbox (marked slow, like tests/test_class_pipeline.py).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
import shutil
import subprocess
import sys
from collections import Counter

import nbformat
import pytest
from conftest import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from instructor import grading  # noqa: E402

ASSIGNMENT = "module14"
NOTEBOOK = "q5_passport"
SOLUTION = ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
RELEASE = ROOT / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
ALLOWED = {"feedback_source": ("human", "learned_judge", "rules", "environment"),
           "reward_granularity": ("per_completion", "per_step"),
           "data_timing": ("offline", "on_policy", "off_policy"),
           "kl_placement": ("none", "in_reward", "in_loss"),
           "averaging_unit": ("prompt", "completion", "token"),
           "zero_variance": ("kept", "zero_advantage", "dropped", "resampled"),
           "loop": ("synchronous", "one_step_off", "asynchronous")}
ROLES = ("policy", "old_policy", "reference", "critic", "reward_model")
# The report released before the variants (one of them: the report of an empty id).
KESTREL = (
    'Run report: "Kestrel-Math-7B", stage 2. Training starts from our supervised checkpoint, which also serves as '
    "the frozen reference. Each step draws 128 competition-style maths problems and samples 16 solutions per "
    "problem from the *current* model. A solution earns 1 if its final boxed answer matches the stored answer "
    "after normalisation by a fixed script, and 0 otherwise; there is no learned judge and no human in the loop, "
    "and nothing is scored before the answer is complete. Rewards are standardised within each group of 16. "
    "Problems whose 16 solutions all earn the same reward are removed from the batch, and new problems are "
    "sampled until the batch is full again. Each batch is used for two optimiser steps with a clipped probability "
    "ratio against the model that generated it, and is then discarded. We add a KL penalty to the reference (k3 "
    "estimator, coefficient 0.001) directly to the loss rather than to the reward. The loss is summed over every "
    "completion token in the batch and divided by the total number of those tokens. There is no value model. "
    "Generation and training run on the same GPUs: the trainer waits for all 2,048 solutions before updating, "
    "and generation resumes only with the new weights.")


@pytest.fixture(scope="module")
def ns() -> dict:
    """The solution notebook's cells run once: the bank and draw (q5_report) and the key (passport_for)."""
    return grading.reference_namespace(SOLUTION)


def _passport(ns, choice) -> dict:
    out = ns["passport_for"](choice)
    return {**out, "roles": tuple(sorted(out["roles"]))}


def test_every_drawable_report_is_coherent(ns):
    """Exhaustive: every combination the draw can give reads as one run, and its passport follows
    from the words (a reference iff the report names one, a critic iff a value model, ...)."""
    assert len(ns["COMBINATIONS"]) == len({tuple(c.values()) for c in ns["COMBINATIONS"]}) > 1000
    for choice in ns["COMBINATIONS"]:
        text = " ".join(ns["REPORT"].format(**{k: v for s, i in choice.items() for k, v in ns["BANK"][s][i].items()})
                        .split())
        p = ns["passport_for"](choice)
        assert set(p) == set(ALLOWED) | {"roles"}, p
        assert all(p[f] in values for f, values in ALLOWED.items()), p
        roles = p["roles"]
        assert len(set(roles)) == len(roles) and set(roles) <= set(ROLES) and "policy" in roles, roles
        assert ("reference" in roles) == ("frozen reference" in text) == (p["kl_placement"] != "none"), text
        assert ("critic" in roles) == ("value model trained alongside" in text), text
        assert ("reward_model" in roles) == ("reward model" in text) == (p["feedback_source"] == "learned_judge")
        assert ("old_policy" in roles) == ("clipped probability ratio" in text), text
        if "*current* model" in text:  # fresh samples: never a queue or a buffer
            assert p["data_timing"] == "on_policy" and "buffer" not in text, text
        if "fixed script" in text:  # an answer checker scores finished answers
            assert p["reward_granularity"] == "per_completion", text
        if p["reward_granularity"] == "per_step":  # step rewards are used as such, never summed and standardised
            assert "standardised" not in text and "value model trained alongside" in text, text
        if "no special treatment" in text:  # "kept" never meets group standardisation (0 / 0)
            assert "standardised" not in text, text


def test_each_sentence_means_exactly_one_value(ns):
    """Each field's value is decided by one slot of the bank: the same sentence, the same value,
    whatever else the report says; and there are >= 3 alternatives per field (>= 2 for granularity)."""
    combos = ns["COMBINATIONS"]
    for field in ALLOWED:
        deciding = [slot for slot in ns["SLOTS"]
                    if all(len(values) == 1 for values in _values_by_alternative(ns, combos, slot, field).values())]
        assert len(deciding) >= 1, field
        slot = deciding[0]
        values = {v for vs in _values_by_alternative(ns, combos, slot, field).values() for v in vs}
        assert len(values) >= 2, (field, values)
        assert len(ns["BANK"][slot]) >= (2 if field in ("reward_granularity", "data_timing") else 3), field


def _values_by_alternative(ns, combos, slot, field) -> dict:
    out: dict = {}
    for choice in combos:
        out.setdefault(choice[slot], set()).add(ns["passport_for"](choice)[field])
    return out


def test_the_draw_is_per_id_deterministic_and_rarely_shared(ns, request):
    assert ns["report_text"]("") == KESTREL  # the released report, and what the solution answers with no id
    assert ns["report_choice"]("  JSmith4 ") == ns["report_choice"]("jsmith4")
    ids = [f"student{i:03d}" for i in range(300)]
    drawn = Counter(tuple(ns["report_choice"](s).values()) for s in ids)
    assert len(drawn) > 250  # 300 ids, ~1,900 combinations: few repeats
    combos = ns["COMBINATIONS"]
    counts = Counter(tuple(sorted(_passport(ns, c).items())) for c in combos)
    share = sum((k / len(combos)) ** 2 for k in counts.values())
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print(f"\nQ5 variants: {len(combos)} reports, {len(counts)} distinct passports; two random students "
              f"share a whole passport with probability {share:.5f}")
    assert len(counts) >= 500 and share < 0.005
    said = re.search(r"([\d,]+) reports give ([\d,]+) distinct passports; two random students share a whole"
                     r"\s+passport with\s+probability (0\.\d+)", (ROOT / "instructor" / "README.md").read_text())
    assert said, "instructor/README.md no longer says how many reports and passports Q5 has"
    assert (int(said[1].replace(",", "")), int(said[2].replace(",", ""))) == (len(combos), len(counts))
    assert float(said[3]) == pytest.approx(share, abs=5e-5)


def test_the_reference_reads_the_submitters_report(ns):
    for student in ("alice", "bob", " Carol "):
        ref = grading.reference_namespace(SOLUTION, grading.reference_id_cells(ASSIGNMENT, student))
        assert ref["passport"] == ns["passport_for"](ns["report_choice"](student))
    alice = grading.reference_namespace(SOLUTION, grading.reference_id_cells(ASSIGNMENT, "alice"))["passport"]
    bob = grading.reference_namespace(SOLUTION, grading.reference_id_cells(ASSIGNMENT, "bob"))["passport"]
    assert alice != bob
    assert grading.reference_id_cells(ASSIGNMENT, "") == {}


@pytest.mark.parametrize("typed, matches, flag, says", [
    (None, False, False, "no student id was typed"),
    ('student_id = ""', False, False, "no student id was typed"),
    ("student_id = 42", False, False, "a plain string is needed"),
    ('student_id = "bob"', False, True, "you answered the report of id 'bob'; graded against yours, 'alice'"),
    ('student_id = " ALICE "', True, False, None),
    ('student_id = "bob"\nstudent_id = "alice"', True, False, None),
])
def test_typed_id_against_the_submitter(typed, matches, flag, says):
    nb = nbformat.read(str(RELEASE), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "q5_student_id")
    if typed is not None:
        cell.source = typed
    got = grading.id_check(ASSIGNMENT, nb, "alice")
    assert (got["matches"], got["flag"]) == (matches, flag), got
    assert (got["notice"] is None) if says is None else says in got["notice"], got


def test_the_release_shows_the_report_but_never_the_key(ns):
    """The bank and the draw are released (a locked cell); the key is not, in any released file."""
    release = nbformat.read(str(RELEASE), as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in release.cells}
    assert cells["q5_report"].metadata["nbgrader"]["locked"] and "BANK = {" in cells["q5_report"].source
    assert "KEY" not in cells["q5_passport"].source and "passport_for" not in cells["q5_passport"].source
    mappings = {f"{q}{field}{q}: {q}{value}{q}" for field, values in ALLOWED.items() for value in values
                for q in "\"'"}
    mappings |= {f"{q}roles{q}: [{q}{role}{q}]" for role in ROLES for q in "\"'"} | {"KEY = {", "passport_for("}
    for path in sorted((ROOT / "exercises").rglob("*")):
        if path.is_file():
            text = path.read_text(errors="replace").replace('\\"', '"')
            assert not [m for m in mappings if m in text], path
    # Run All of the release: the report cell prints a message without an id, and never raises
    namespace: dict = {}
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        for source in grading.code_cells(release):
            try:
                exec(source, namespace)  # noqa: S102 - the release's own cells
            except NotImplementedError:  # the answer cells' stub, as in every released notebook
                pass
    assert "No student id yet: type your student id" in shown.getvalue()
    namespace["student_id"] = "jsmith4"
    with contextlib.redirect_stdout(shown):
        exec(cells["q5_report"].source, namespace)  # noqa: S102
    assert ns["report_text"]("jsmith4") in " ".join(shown.getvalue().split())


# ------------------------------------------------------------------------------ the real pipeline


def _with_cells(nb, **sources):
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in sources:
            cell.source = sources[grade_id]
    return nb


@pytest.fixture(scope="module")
def graded_course():
    from grading_course import grading_env, released_course

    env = grading_env()
    course = released_course("passport-", ASSIGNMENT, env)
    ns = grading.reference_namespace(course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    own = {s: ns["passport_for"](ns["report_choice"](s)) for s in ("alice", "bob", "carol", "dave")}
    assert own["alice"] != own["bob"] and own["alice"] != own["carol"] and own["alice"] != own["dave"]
    release = course / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"

    def submit(student, typed, passport):
        nb = _with_cells(nbformat.read(str(release), as_version=4), q5_student_id=f"student_id = {typed!r}",
                         q5_passport=f"passport = {passport!r}", q5_undisclosed_answer="Not disclosed.")
        dest = course / "submitted" / student / ASSIGNMENT
        dest.mkdir(parents=True)
        nbformat.write(nb, str(dest / f"{NOTEBOOK}.ipynb"))

    submit("alice", "alice", own["alice"])         # honest
    submit("bob", " Bob ", own["bob"])             # honest, id typed with spaces and a capital
    submit("carol", "alice", own["alice"])         # a verbatim copy of alice's notebook
    submit("dave", "dave", own["alice"])           # alice's passport under his own id
    # the solution notebook itself, with its own id typed in: honest for that id
    sol = _with_cells(nbformat.read(str(course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"), as_version=4),
                      q5_student_id='student_id = "erin"')
    (course / "submitted" / "erin" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(sol, str(course / "submitted" / "erin" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"))

    def autograde(*args):
        run = subprocess.run([sys.executable, "-m", "instructor.autograde", "--jobs", "1", *args], cwd=course,
                             env=env, capture_output=True, text=True, timeout=1800)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        return json.loads((course / "grades" / ASSIGNMENT / "report.json").read_text())["students"]

    first = autograde()
    again = autograde("--all", "--student", "carol")
    yield {"course": course, "first": first, "again": again, "own": own}
    shutil.rmtree(course, ignore_errors=True)


def _q5_score(res) -> float:
    return res["notebooks"][NOTEBOOK]["code_score"]


@pytest.mark.slow
def test_pipeline_honest_students_score_8_on_their_own_reports(graded_course):
    first = graded_course["first"]
    for student in ("alice", "bob", "erin"):
        assert _q5_score(first[student]) == 8, (student, first[student]["verdicts"])
        assert not any("answered the report" in p for p in first[student]["problems"]), first[student]["problems"]
        assert first[student]["flags"] == [], first[student]["flags"]  # the locked report cell is no flag


@pytest.mark.slow
def test_pipeline_a_friends_passport_scores_less_and_a_friends_id_is_flagged(graded_course):
    first, own = graded_course["first"], graded_course["own"]
    for student in ("carol", "dave"):
        same = sum(own["alice"][k] == own[student][k] if k != "roles" else
                   sorted(own["alice"][k]) == sorted(own[student][k]) for k in own["alice"])
        assert _q5_score(first[student]) == same < 8, (student, first[student]["verdicts"])
    carol = first["carol"]
    notice = "you answered the report of id 'alice'; graded against yours, 'carol'"
    assert carol["status"] == "review" and any(notice in p for p in carol["problems"]), carol["problems"]
    assert not any("answered the report" in p for p in first["dave"]["problems"])  # his own id, a wrong reading
    graded_nb = nbformat.read(str(graded_course["course"] / "autograded" / "carol" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"),
                              as_version=4)
    id_cell = next(c for c in graded_nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "q5_student_id")
    assert any(notice in o.get("text", "") for o in id_cell.outputs), id_cell.outputs


@pytest.mark.slow
def test_pipeline_a_regrade_reads_the_same_report(graded_course):
    first, again = graded_course["first"]["carol"], graded_course["again"]["carol"]
    assert _q5_score(again) == _q5_score(first)
    assert again["verdicts"][NOTEBOOK] == first["verdicts"][NOTEBOOK]


def test_the_bank_draws_from_every_alternative(ns):
    """No alternative of the bank is dead: each appears in some drawable report."""
    for slot in ns["SLOTS"]:
        used = {c[slot] for c in ns["COMBINATIONS"]}
        assert used == set(range(len(ns["BANK"][slot]))), slot
    assert list(itertools.islice(ns["COMBINATIONS"], 1))[0] == dict.fromkeys(ns["SLOTS"], 0)
