"""The coding lab (lab14): its solutions, its release, and the training check that grades it.

The lab's functions are taken from the solution notebook's answer cells; the classic bugs — a sign
flip, a log-prob that forgets the mask, a wrong averaging unit, an average that ignores the mask —
are made by editing that source, so each test fails if the solution changes under it. Fast tests
run one step of each run (``one_step``) on an untrained model; the slow ones run the full DPO and
GRPO checks from the cached SFT baseline and assert what the grader decides for each submission.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import replace

import nbformat
import pytest
import torch
from conftest import ROOT, report_line

from course_lib.run import lab_check
from course_lib.run.lab_check import LabConfig, in_process_remote, one_step, pack, unpack

SOLUTION = ROOT / "solutions" / "lab14" / "lab_training_loop.ipynb"
RELEASE = ROOT / "exercises" / "lab14" / "lab_training_loop.ipynb"

MUTANTS = {
    "sign_dpo": ("z = beta * ((policy[:n]", "z = -beta * ((policy[:n]"),
    "sign_grpo": ("    return -aggregate(objective", "    return aggregate(objective"),
    "no_mask_logprobs": ("token_logps = torch.where(mask > 0, token_logps, torch.zeros_like(token_logps))", "pass"),
    "unit_token_as_sequence": ("        return totals.sum() / lengths.sum()",
                               "        return (totals / lengths).mean()"),
    "aggregate_ignores_mask": ("totals = (values * mask).sum(-1)", "totals = values.sum(-1)"),
}
# which run each bug enters (the other run never calls the broken line)
FAILS = {"sign_dpo": "dpo", "sign_grpo": "grpo", "no_mask_logprobs": "dpo",
         "unit_token_as_sequence": "grpo", "aggregate_ignores_mask": "grpo"}


def _answer_code(path) -> str:
    nb = nbformat.read(str(path), as_version=4)
    keep = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("grade_id") == "lab_setup"):
            keep.append(cell.source)
    return "\n\n".join(keep)


def _namespace(code: str) -> dict:
    ns: dict = {}
    exec(compile(code, "<lab answers>", "exec"), ns)  # noqa: S102 - the course's own solution
    return ns


def _mutant(name: str) -> dict:
    old, new = MUTANTS[name]
    code = _answer_code(SOLUTION)
    assert code.count(old) == 1, f"mutant {name}: the solution no longer contains {old!r}"
    return _namespace(code.replace(old, new))


@pytest.fixture(scope="module")
def solution() -> dict:
    return _namespace(_answer_code(SOLUTION))


# ---- the door: plain data only ---------------------------------------------------------------
def test_pack_round_trips_floats_and_ints():
    x = torch.randn(2, 3, 4)
    assert torch.equal(unpack(pack(x), "x", shape=(2, 3, 4)), x)
    ids = torch.tensor([[1, 2], [3, 4]])
    assert torch.equal(unpack(pack(ids), "ids", dtype="int64"), ids)
    assert json.loads(json.dumps(pack(x))) == pack(x)


@pytest.mark.parametrize("bad, message", [
    ("not a dict", "encoded array"),
    ({"t": "array", "shape": [2], "kind": "f"}, "encoded array"),
    ({"t": "list", "shape": [2], "kind": "f", "v": [0.0, 0.0]}, "encoded array"),
    ({**pack(torch.zeros(2)), "kind": "i"}, "kind"),
    ({**pack(torch.zeros(2)), "shape": [3]}, "shape"),
    ({**pack(torch.zeros(2)), "shape": [2.0]}, "malformed"),
    ({**pack(torch.zeros(2)), "shape": [1]}, "do not fill"),
    ({**pack(torch.zeros(2)), "v": [0.0, "0"]}, "must hold numbers"),
    ({**pack(torch.zeros(2)), "v": [0.0, True]}, "must hold numbers"),
    ({**pack(torch.zeros(2)), "v": [0.0, 10**400]}, "finite"),
    (pack(torch.tensor([1.0, math.nan])), "NaN"),
    (pack(torch.tensor([1.0, math.inf])), "NaN or inf"),
])
def test_unpack_refuses_anything_else(bad, message):
    with pytest.raises(ValueError, match=message):
        unpack(bad, "the gradient", shape=(2,) if message == "shape" else None)


def test_plain_float_refuses_objects():
    class Sneaky(float):
        pass

    with pytest.raises(ValueError, match="loss"):
        lab_check.plain_float(Sneaky(1.0), "loss")
    with pytest.raises(ValueError, match="loss"):
        lab_check.plain_float(math.inf, "loss")


def test_remote_reports_the_students_exception():
    release = _namespace(_answer_code(RELEASE))
    answer = in_process_remote(release)("dpo", {"logits": pack(torch.zeros(2, 3, 15)),
                                                "input_ids": pack(torch.zeros(2, 3, dtype=torch.long)),
                                                "completion_mask": pack(torch.zeros(2, 3, dtype=torch.long)),
                                                "ref_token_logps": pack(torch.zeros(2, 2)), "beta": 1.0})
    assert answer == {"error": "NotImplementedError: "}


def test_one_step_rejects_an_unknown_run(solution):
    with pytest.raises(ValueError, match="run must be one of 'dpo', 'grpo'"):
        one_step("ppo", in_process_remote(solution))


# ---- one step of each run: the solution agrees, each bug is caught where it enters ------------
@pytest.mark.parametrize("run", ["dpo", "grpo"])
def test_solution_follows_the_objective_for_one_step(solution, run):
    assert one_step(run, in_process_remote(solution)) is None


@pytest.mark.parametrize("run", ["dpo", "grpo"])
def test_release_stubs_fail_one_step(run):
    why = one_step(run, in_process_remote(_namespace(_answer_code(RELEASE))))
    assert why is not None and "NotImplementedError" in why


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_bug_fails_the_run_it_enters(name):
    ns = _mutant(name)
    for run in ("dpo", "grpo"):
        why = one_step(run, in_process_remote(ns))
        if run == FAILS[name]:
            assert why is not None, f"{name} should fail the {run} step"
            assert "loss was" in why or "gradient differs" in why, why
        else:
            assert why is None, f"{name} does not enter the {run} run, yet: {why}"


def test_wrong_advantages_are_named(solution):
    ns = dict(solution)
    exec("def group_advantages(rewards, group_size, scale='group'):\n"  # noqa: S102
         "    r = torch.as_tensor(rewards, dtype=torch.float32)\n"
         "    return r - r.mean()\n", ns)
    why = one_step("grpo", in_process_remote(ns))
    assert why == "group_advantages gave other advantages than the configured baseline"


def test_a_loss_without_gradient_is_caught(solution):
    ns = dict(solution)
    exec("_right = grpo_loss\n"  # noqa: S102
         "def grpo_loss(*args):\n"
         "    return _right(*args).detach()\n", ns)
    why = one_step("grpo", in_process_remote(ns))
    assert why is not None and "gradient differs" in why


def test_the_lab_runs_are_the_librarys_sections_with_the_labs_values(solution):
    """One home: a lab value is set once, in its library section; the lab's rules apply on top."""
    lab = LabConfig()
    assert (lab.sft.steps, lab.dpo.beta, lab.grpo.num_iterations, lab.scale) == (600, 1.0, 2, "group")
    short = LabConfig(max_completion_length=5, sft=replace(lab.sft, steps=7))
    assert short.dpo.max_completion_length == short.grpo.max_completion_length == 5 and short.sft.eval_every == 7
    dr = LabConfig(grpo=replace(lab.grpo, advantage="dr_grpo"))
    assert dr.scale == "none" and one_step("grpo", in_process_remote(solution), dr) is None
    with pytest.raises(ValueError, match=r"grpo.advantage must be one of \('grpo', 'dr_grpo'\)"):
        LabConfig(grpo=replace(lab.grpo, advantage="rloo"))


def test_both_runs_step_through_the_librarys_loop_on_a_tiny_budget(solution):
    """The full runs' path (library SFT, pairs, rollouts, train_loop, evaluation) in ~10 s: a tiny setup,
    not cached; no accuracy gain asked (min_gain < 0), only the verdict's shape and where a bug stops it."""
    lab = LabConfig()
    cfg = LabConfig(sft=replace(lab.sft, steps=100), dpo=replace(lab.dpo, pair_prompts=128, steps=2),
                    grpo=replace(lab.grpo, steps=1, batch_prompts=4), min_gain=-1.0)
    setup = lab_check.prepare(cfg)
    assert setup.pairs["n_pairs"] >= cfg.dpo.batch_size // 4 and 0 <= setup.baseline_accuracy < 0.5
    for run, steps in (("dpo", cfg.dpo.steps), ("grpo", cfg.grpo.steps)):
        verdict = lab_check.RUNS[run](in_process_remote(solution), setup)
        assert verdict["passed"] and verdict["steps"] == steps, verdict
        assert verdict["accuracy_before"] == setup.baseline_accuracy and verdict["accuracy_after"] is not None
    bad = lab_check.dpo_run(in_process_remote(_mutant("sign_dpo")), setup)
    # at step 1 the policy is the reference: the loss is log 2 either way and the flipped gradient points back
    assert not bad["passed"] and bad["accuracy_after"] is None
    assert bad["reason"] == "step 1: the gradient differs from the configured objective's (cosine -1.000)", bad


# ---- the release --------------------------------------------------------------------------------
def test_release_has_stubs_not_solutions():
    text = RELEASE.read_text()
    assert "BEGIN SOLUTION" in SOLUTION.read_text() and "BEGIN SOLUTION" not in text
    assert "torch.where(mask > 0" not in text and "F.logsigmoid(z)" not in text
    nb = nbformat.read(str(RELEASE), as_version=4)
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert len(answers) == 5 and all("raise NotImplementedError()" in c.source for c in answers)
    points = sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells
                 if c.metadata.get("nbgrader", {}).get("grade"))
    assert points == 24
    for cell in nb.cells:
        assert cell.cell_type == "markdown" or not cell.outputs


def test_lab_text_states_the_configured_runs():
    """The notebook's description of the two runs is LabConfig's, not a second copy that drifts."""
    cfg = LabConfig()
    intro = nbformat.read(str(SOLUTION), as_version=4).cells[0].source
    for fragment in (f"{cfg.dpo.steps} steps of {cfg.dpo.batch_size} offline pairs",
                     f"β = {cfg.dpo.beta:g}",
                     f"{cfg.grpo.steps} steps of {cfg.grpo.batch_prompts} prompts × G = {cfg.grpo.num_generations}",
                     f"μ = {cfg.grpo.num_iterations} inner epochs",
                     f"ε_low = {cfg.grpo.epsilon}", f"ε_high = {cfg.grpo.epsilon_high}",
                     f"unit `{cfg.grpo.unit}`", f'`scale="{cfg.scale}"`',
                     f"L_max = {cfg.max_completion_length}",
                     f"at least {cfg.min_gain * 100:.0f} points"):
        assert fragment in intro, fragment


# ---- the full training check, as the grader runs it ------------------------------------------
@pytest.fixture(scope="module")
def setup(request):
    start = time.time()
    prepared = lab_check.prepare(LabConfig(), ROOT / "test-artifacts" / "lab-cache")
    report_line(request.config, f"lab check: SFT baseline and pairs ready in {time.time() - start:.1f} s "
                                f"(baseline {prepared.baseline_accuracy:.1%}, {prepared.pairs['n_pairs']} pairs)")
    return prepared


@pytest.mark.slow
def test_solution_trains_the_tiny_gpt(solution, setup, request):
    for run in ("dpo", "grpo"):
        verdict = lab_check.RUNS[run](in_process_remote(solution), setup)
        report_line(request.config, f"lab check {run}: {verdict['reason']} in {verdict['seconds']:.1f} s")
        assert verdict["passed"], verdict
        assert verdict["accuracy_after"] - verdict["accuracy_before"] >= setup.config.min_gain


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_bug_loses_the_training_points_of_its_run(name, setup):
    """Stopped by the objective check, before any held-out accuracy. Which step shows a bug can depend on
    the draw: a mean that ignores the mask gives the right loss and gradient on a batch where every
    informative group's completions have one length (the advantages of a group sum to zero)."""
    verdict = lab_check.RUNS[FAILS[name]](in_process_remote(_mutant(name)), setup)
    assert not verdict["passed"] and verdict["accuracy_after"] is None, verdict
    assert re.match(r"step [1-3]: (the loss was|the gradient differs)", verdict["reason"]), verdict["reason"]


@pytest.mark.slow
def test_accuracy_alone_catches_a_sign_flip(setup):
    """Without the objective check (rtol huge), a flipped DPO sign still fails: accuracy falls."""
    loose = lab_check.LabSetup(LabConfig(rtol=1e9), setup.task, setup.sft_state,
                               setup.baseline_accuracy, setup.pairs)
    verdict = lab_check.dpo_run(in_process_remote(_mutant("sign_dpo")), loose)
    assert not verdict["passed"] and verdict["accuracy_after"] < verdict["accuracy_before"], verdict
