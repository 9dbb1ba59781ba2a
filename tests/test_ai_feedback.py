"""AI feedback (course_lib.trainers.judge, course_lib.run.ai_feedback): principles on hand pairs, the swap test
from both orders, config errors, a tiny end-to-end run on the `test` config (judge → its labels → reward model →
PPO), and ``train judge`` through the command line: trained, saved, resumed, in ``--help`` and the passport."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from course_lib.run.ai_feedback import fit_reward_model_on_judge, judge_labels, notebook_budget, rl_against
from course_lib.tinygpt.task import AdditionTask, TaskConfig
from course_lib.trainers.configs import PPOConfig, get_config, validate
from course_lib.trainers.judge import (
    BIASED,
    PRINCIPLES,
    UNBIASED_POSITION,
    JudgeConfig,
    constitution_labels,
    constitution_text,
    fit_judge,
    judge_inputs,
    label_pair,
    length_split,
    measure_judge,
    principles_judge,
    swap_test,
    verdicts,
)
from course_lib.trainers.trainer import TrainContext


@pytest.fixture(scope="module")
def task():
    return AdditionTask(TaskConfig(digits=2, n_demos=10, n_heldout=10))


def hand_pairs(task, rows):
    """Pairs from ``(a, b, text_A, text_B, gold_prefers_A)``; a text ending in '…' is cut off (no <eos>)."""
    tok = task.tokenizer

    def ids(a, b, text):
        cut = text.endswith("…")
        body = tok.convert_tokens_to_ids(list(text.rstrip("…"))) + ([] if cut else [tok.eos_token_id])
        row = task.encode_prompts([(a, b)])[0].tolist() + body
        return row + [tok.pad_token_id] * (task.prompt_length + 6 - len(row))

    return {"a_ids": torch.tensor([ids(a, b, x) for a, b, x, _, _ in rows]),
            "b_ids": torch.tensor([ids(a, b, y) for a, b, _, y, _ in rows]),
            "gold": torch.tensor([g for *_, g in rows]), "pairs": [(a, b) for a, b, *_ in rows], "n_pairs": len(rows),
            "n_prompts": len(rows)}


# 07+58 = 65 (carry: the flawed teacher writes 55); 45+58 = 103 (flawed: 93); 12+30 = 42 (no carry)
HAND = [
    (7, 58, "65", "55", True),     # carry error: same last digit, same length -> only "first" decides
    (7, 58, "55", "65", False),    # the same pair swapped
    (45, 58, "93", "103", False),  # the longer answer is right
    (12, 30, "42", "4", True),     # the longer answer is right, and only it has the right last digit
    (12, 30, "142", "42", False),  # the longer answer is wrong; both end in 2
    (12, 30, "42", "42…", True),   # cut off
]


def test_principles_label_hand_pairs(task):
    data = hand_pairs(task, HAND)
    labels, who = constitution_labels(task, data, BIASED)
    assert labels.tolist() == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert who == ["first", "first", "longer", "ones", "longer", "finished"]
    # without "first" the carry errors are ties; "correct" agrees with gold everywhere
    assert constitution_labels(task, data, UNBIASED_POSITION)[0].tolist() == [0.5, 0.5, 0.0, 1.0, 1.0, 1.0]
    assert constitution_labels(task, data, ("correct",))[0].tolist() == [float(g) for *_, g in HAND]
    assert label_pair(("shorter", "first"), 103, ("93", True), ("103", True)) == (1.0, "shorter")
    assert label_pair(("ones",), 65, ("55", True), ("65", True)) == (0.5, None)
    assert constitution_text(("ones", "first")).splitlines() == [
        f"1. {PRINCIPLES['ones'].sentence}  [ones]", f"2. {PRINCIPLES['first'].sentence}  [first]"]


def test_swap_test_is_computed_from_both_orders(task):
    data = hand_pairs(task, HAND)
    always_first = lambda a, b: torch.ones(a.shape[0])  # noqa: E731
    assert swap_test(always_first, data)["position_bias"] == 1.0
    assert swap_test(always_first, data)["flip_rate"] == 1.0  # every verdict on the answers flips with the order
    gold = principles_judge(task, ("correct",))
    s = swap_test(gold, data)
    assert s["position_bias"] == 0.0 and s["flip_rate"] == 0.0 and s["p_first"] == 0.5
    # the biased constitution prefers the first shown on 5 of 6 pairs in the order given (labels above)
    # and on 3 of 6 swapped: P(first) = 8/12
    ab = constitution_labels(task, data, BIASED)[0]
    ba = constitution_labels(task, {**data, "a_ids": data["b_ids"], "b_ids": data["a_ids"]}, BIASED)[0]
    assert ba.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    s = swap_test(principles_judge(task, BIASED), data)
    assert s["p_first"] == pytest.approx((ab.sum() + ba.sum()).item() / 12) == pytest.approx(8 / 12)
    assert s["position_bias"] == pytest.approx(2 * 8 / 12 - 1)
    assert s["flip_rate"] == pytest.approx(2 / 6)  # the carry pair in both of its orders
    # without the position rule the carry pairs are ties in both orders: no bias, and a tie is no flip
    s = swap_test(principles_judge(task, UNBIASED_POSITION), data)
    assert (s["position_bias"], s["flip_rate"]) == (0.0, 0.0)
    assert measure_judge(principles_judge(task, UNBIASED_POSITION), task, data)["ties"] == pytest.approx(2 / 6)
    # a judge that looks only at the first slot's answer, asked once: no swap, no measurement
    with pytest.raises(ValueError, match="one probability per pair"):
        swap_test(lambda a, b: torch.ones(a.shape[0], 2), data)


def test_length_split_and_measure(task):
    data = hand_pairs(task, HAND)
    longer = principles_judge(task, ("longer", "first"))
    split = length_split(task, data, verdicts(longer(data["a_ids"], data["b_ids"])))
    assert (split["n_longer_right"], split["n_longer_wrong"]) == (2, 1)
    assert split["length_bias"] == 1.0  # always right when the longer is right, always wrong otherwise
    m = measure_judge(principles_judge(task, BIASED), task, data)
    assert m["agreement"] == pytest.approx(4 / 6)  # wrong on the swapped carry pair and on 12+30 = 142
    assert m["length_bias"] == 1.0


def test_agreement_and_biases_are_measured_on_decided_pairs_with_the_tie_rate(task):
    data = hand_pairs(task, HAND)
    never = measure_judge(lambda a, b: torch.full((a.shape[0],), 0.5), task, data)  # a judge that never decides
    assert never["ties"] == 1.0 and never["decided"] == 0
    for key in ("agreement", "agreement_carry", "both_orders_agreement", "length_bias"):
        assert never[key] != never[key], key  # nan: nothing decided, nothing to agree with (not 0.5)
    # without "first" the two carry pairs are ties: the rules are right on every pair they decide
    m = measure_judge(principles_judge(task, UNBIASED_POSITION), task, data)
    assert (m["ties"], m["decided"]) == (pytest.approx(2 / 6), 4)
    assert m["agreement"] == 0.75 and m["agreement_carry"] == 1.0  # wrong only on 12+30 = 142 (the longer)
    assert (m["n_longer_right"], m["n_longer_wrong"], m["length_bias"]) == (2, 1, 1.0)


def test_one_tie_rule_the_judges_labels_keep_no_tie(task):
    data = hand_pairs(task, HAND)
    p = torch.tensor([0.5, 0.9, 0.1, 0.5, 0.8, 0.5])
    out = judge_labels(lambda a, b: p, data, tie_margin=0.0)  # an exact 0.5 is a tie, not "B better"
    assert out["n_pairs"] == 3 and out["label"].tolist() == [True, False, True]
    assert out["pairs"] == [data["pairs"][i] for i in (1, 2, 4)]
    assert (verdicts(p, 0.0) != 0).tolist() == [False, True, True, False, True, False]


def test_judge_inputs_put_each_answer_in_its_slot(task):
    data = hand_pairs(task, HAND[:1])
    ids = judge_inputs(task, data["a_ids"][:, :10], data["b_ids"], slot=6)
    p, tok = task.prompt_length, task.tokenizer
    assert ids.shape == (1, p + 13)
    assert tok.decode(ids[0, p : p + 6].tolist()).startswith("65")
    assert tok.decode(ids[0, p + 6 : p + 12].tolist()).startswith("55") and int(ids[0, -1]) == tok.eos_token_id
    with pytest.raises(ValueError, match="slot of 4 tokens"):
        judge_inputs(task, data["a_ids"], data["b_ids"], slot=4)


def test_judge_labels_abstain_and_mark_errors(task):
    data = hand_pairs(task, HAND)
    out = judge_labels(lambda a, b: torch.tensor([0.55, 0.9, 0.1, 0.95, 0.8, 0.5]), data, tie_margin=0.1)
    assert out["n_pairs"] == 4 and out["abstained"] == pytest.approx(2 / 6)
    assert out["label"].tolist() == [True, False, True, True] and out["flipped"].tolist() == [True, False, False, True]
    with pytest.raises(ValueError, match="abstained on every pair"):
        judge_labels(lambda a, b: torch.full((a.shape[0],), 0.5), data, tie_margin=0.1)


@pytest.mark.parametrize("overrides, message", [
    ({"principles": ("ones", "kindness")},
     r"judge.principles holds unknown principles \['kindness'\]; accepted: .*'first'"),
    ({"principles": ()}, "judge.principles must be a non-empty list"),
    ({"principles": "ones"}, "judge.principles must be a non-empty list"),
    ({"principles": ("ones", "ones")}, "names a principle twice"),
    ({"init": "random"}, r"judge.init must be one of \('sft', 'scratch'\)"),
    ({"tie_margin": 0.5}, r"judge.tie_margin must be a finite number in \[0, 0.5\)"),
    ({"steps": -1}, "judge.steps must be an integer >= 0"),
    ({"samples_per_prompt": 1}, "judge.samples_per_prompt must be an integer >= 2"),
])
def test_bad_config_names_the_field_and_the_accepted_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        JudgeConfig(**overrides)


def test_notebook_budget_is_fast_or_full_and_fast_is_smaller():
    (judge_f, rm_f, ppo_f, window_f), (judge, rm, ppo, window) = notebook_budget("fast"), notebook_budget("full")
    assert judge_f.steps < judge.steps and rm_f.steps < rm.steps and ppo_f.steps < ppo.steps and window_f <= window
    assert notebook_budget("full")[0] is not judge  # fresh configs: a notebook may change its copy
    with pytest.raises(ValueError, match=r"budget must be one of \('fast', 'full'\); got 'huge'"):
        notebook_budget("huge")


@pytest.fixture(scope="module")
def tiny_run():
    """The `test` config end to end: SFT, the judge, the reward model on its labels, four PPO steps."""
    from course_lib.run.pipeline import sft_policy

    cfg = get_config("test")
    task, policy, _ = sft_policy(cfg, TrainContext(show_progress=False), seed=0, device="cpu")
    jc = cfg.judge
    fit = fit_judge(policy, task, jc, seed=0)
    fixed = fit_judge(policy, task, dataclasses.replace(jc, principles=UNBIASED_POSITION), seed=0,
                      data=fit["train"], heldout=fit["heldout"])
    rm = fit_reward_model_on_judge(policy, task, fit["judge_fn"], cfg.rm, tie_margin=jc.tie_margin, seed=0)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    rows, trained = rl_against(policy, task, rm["model"], PPOConfig(steps=2, batch_prompts=8, max_completion_length=4,
                                                                    eval_every=2), seed=0)
    return {"fit": fit, "fixed": fixed, "rm": rm, "rows": rows, "policy": policy, "before": before, "trained": trained}


def test_tiny_end_to_end(tiny_run):
    fit, fixed, rm = tiny_run["fit"], tiny_run["fixed"], tiny_run["rm"]
    m = fit["metrics"]
    assert len(fit["log"]) == get_config("test").judge.steps and fit["targets"].shape == (fit["train"]["n_pairs"],)
    assert 0 <= m["agreement"] <= 1 and -1 <= m["position_bias"] <= 1 and 0 <= m["flip_rate"] <= 1
    # the rules themselves: without "first" every rule is symmetric in A and B (no position bias); with it,
    # exactly the pairs the others leave tied go to the first shown, so the bias equals that share of ties
    assert fixed["rules"]["position_bias"] == 0.0
    assert fit["rules"]["position_bias"] == pytest.approx(fixed["rules"]["ties"])
    assert fixed["train"] is fit["train"] and torch.equal(fixed["targets"] == 0.5, torch.tensor(
        [who is None for who in fixed["decided_by"]]))
    assert rm["metrics"]["train_pairs"] == rm["train"]["n_pairs"] > 0
    assert 0 <= rm["metrics"]["heldout_gold_accuracy"] <= 1
    assert rm["metrics"]["rm_n_longer_right"] + rm["metrics"]["rm_n_longer_wrong"] <= rm["heldout"]["n_pairs"]
    assert [r["step"] for r in tiny_run["rows"]] == [1, 2]
    assert all(0 <= r["gold"] <= 1 and r["length"] > 0 for r in tiny_run["rows"])
    # rl_against trains a copy: the policy it was given is untouched
    assert all(torch.equal(v, tiny_run["before"][k]) for k, v in tiny_run["policy"].state_dict().items())
    assert any(not torch.equal(v, tiny_run["before"][k]) for k, v in tiny_run["trained"].state_dict().items())


# ---- ``train judge``: the registered trainer, through the command line ------------------------------------------
def _cli(*argv) -> int:
    from course_lib.__main__ import main

    return main(["train", "judge", "--config", "test", "--no-progress", "--threads", "1", *argv])


def _rows(out) -> list[dict]:
    """The judge's metrics rows without their timings."""
    import json

    return [{k: v for k, v in json.loads(line).items() if k != "update_seconds"}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def judge_run(tmp_path_factory):
    """``train judge --config test`` through the command line (its SFT stage, then 20 judge steps)."""
    out = tmp_path_factory.mktemp("judge") / "run"
    assert _cli("--out", str(out)) == 0
    return out


def test_train_judge_trains_measures_saves_the_judge_and_writes_its_passport(judge_run):
    import json

    from transformers import GPT2ForSequenceClassification

    from course_lib.run.pipeline import build_policy, load_sft_checkpoint, rl_generator
    from course_lib.trainers.judge import PairJudge, judge_pairs
    from course_lib.trainers.reward_model import quiet_bars
    from course_lib.trainers.utilisation import run_flops

    cfg = get_config("test")
    summary = json.loads((judge_run / "summary.json").read_text())
    measured = summary["judge"]
    assert summary["kind"] == "judge" and summary["steps"] == cfg.judge.steps == measured["steps"]
    assert summary["final_accuracy"] == summary["sft_accuracy"]  # it trains no policy
    assert measured["principles"] == list(BIASED) and measured["train_pairs"] > 0 and measured["heldout_pairs"] > 0
    assert measured["judge"]["decided"] > 0 and 0 <= measured["judge"]["agreement"] <= 1
    assert measured["constitution"]["agreement"] == 1.0  # the rules decide every pair right on these pairs
    assert sum(measured["decided_by"].values()) == pytest.approx(1.0)
    # its passport: the constitution's text, its steps and pairs, its measurements against gold
    pp = json.loads((judge_run / "passport.json").read_text())
    assert pp["kind"] == "judge" and pp["reward_contract"]["constitution"] == constitution_text(BIASED).splitlines()
    assert pp["optimisation"]["steps"] == f"{cfg.judge.steps} steps of 16 pairs at learning rate 0.0006"
    assert pp["judge"]["data"].startswith(f"{measured['train_pairs']} training pairs from 64 prompts")
    assert f"on {measured['judge']['decided']} decided pairs" in pp["judge"]["judge"]
    rows = _rows(judge_run)
    assert [r["step"] for r in rows] == list(range(1, 21)) and [r["step"] for r in rows if "heldout_gold_agreement"
                                                                  in r] == [10, 20]
    assert run_flops("judge", cfg, rows, vocab=len(AdditionTask(cfg.task).tokenizer)) > 0
    # the saved judge is the trained one: measured again on the run's held-out pairs, the same numbers
    info = json.loads((judge_run / "judge.json").read_text())
    assert info["metrics"] == measured and info["constitution"] == pp["reward_contract"]["constitution"]
    task, policy = build_policy(cfg, device="cpu")
    policy.load_state_dict(load_sft_checkpoint(judge_run / "sft.pt", cfg)["model"])
    rl_generator(0)  # the pipeline seeds torch's sampling so before every stage
    _, heldout = judge_pairs(policy, task, cfg.judge, seed=0)
    with quiet_bars():
        judge = GPT2ForSequenceClassification.from_pretrained(judge_run)
    again = measure_judge(PairJudge(judge, task, cfg.judge.max_completion_length), task, heldout, cfg.judge.tie_margin)
    assert json.dumps(again) == json.dumps(measured["judge"])


def test_train_judge_resumes_after_a_stop_to_the_uninterrupted_numbers(judge_run, tmp_path, monkeypatch):
    """A stop request after step 5 checkpoints (the pairs, the judge, its optimiser and batch generator); the resumed
    run ends with the uninterrupted run's rows and measurements (the same SFT policy, ``--sft-checkpoint``)."""
    import json

    from course_lib.run.pipeline import run
    from course_lib.tinygpt import runtime
    from course_lib.trainers import trainer

    real_loop = trainer.train_loop

    def stopping_loop(name, step_fn, ctx, **kwargs):
        def step_then_stop(step):
            row = step_fn(step)
            if name == "judge" and step == 4:
                runtime.request_stop()
            return row

        return real_loop(name, step_then_stop, ctx, **kwargs)

    out, kw = tmp_path / "stopped", {"device": "cpu", "show_progress": False, "verbose": False, "threads": 1}
    monkeypatch.setattr(trainer, "train_loop", stopping_loop)
    with pytest.raises(runtime.Interrupted) as stop:
        run("judge", get_config("test"), out, sft_checkpoint=str(judge_run / "sft.pt"), **kw)
    assert (stop.value.stage, stop.value.step) == ("judge", 5) and not (out / "judge.json").exists()
    runtime.clear_stop()
    monkeypatch.setattr(trainer, "train_loop", real_loop)
    resumed = run("judge", None, out, resume=True, **kw)
    whole = json.loads((judge_run / "summary.json").read_text())
    assert resumed["steps"] == whole["steps"] == 20 and _rows(out) == _rows(judge_run)
    keep = ("judge", "constitution", "decided_by", "train_pairs", "heldout_pairs")
    assert json.dumps({k: resumed["judge"][k] for k in keep}) == json.dumps({k: whole["judge"][k] for k in keep})


def test_train_judge_is_in_the_help_and_a_bad_constitution_is_refused_by_name(capsys, tmp_path):
    from course_lib.__main__ import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "judge" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train", "judge", "--help"])
    text = capsys.readouterr().out
    assert "--principles NAME [NAME ...]" in text and "--tie-margin" in text and "finished, ones, longer" in text
    assert _cli("--out", str(tmp_path / "bad"), "--principles", "ones", "kindness") == 2
    err = capsys.readouterr().err
    assert "judge.principles holds unknown principles ['kindness']; accepted: ('correct', 'finished'" in err
    assert not (tmp_path / "bad").exists()  # refused before any training
    cfg = get_config("test")
    cfg.judge.principles = ("ones", "ones")
    with pytest.raises(ValueError, match="judge.principles names a principle twice"):
        validate(cfg)
