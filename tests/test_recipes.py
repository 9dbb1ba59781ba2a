"""Recipes (course_lib.run.recipes): a recipe of one stage is that trainer's run, a recipe resumed at a
stage boundary is the uninterrupted one, bad stages are refused with the list, and a stage that cannot start
stops the recipe with its reason and keeps the stages before it. Toy budgets on the ``test`` config (CPU)."""

from __future__ import annotations

import json

import pytest
import torch

from course_lib.__main__ import main
from course_lib.run import recipes
from course_lib.run.passport import passport
from course_lib.run.pipeline import build_policy, run
from course_lib.tinygpt.evaluation import sampled_eval
from course_lib.tinygpt.runtime import Interrupted, clear_stop, load_checkpoint, request_stop
from course_lib.trainers.configs import get_config

STAGES = "sft,grpo,rft:steps=2,grpo:steps=2:temperature=1.2"
TIMES = ("seconds", "rl_seconds", "update_seconds", "gen_seconds", "other_seconds", "tokens_per_second", "cpu_seconds",
         "gen_cpu_seconds", "update_cpu_seconds")


def rows(path):
    return [{k: v for k, v in json.loads(line).items() if k not in TIMES} for line in path.read_text().splitlines()]


def numbers(entry):
    return {k: v for k, v in entry.items() if k not in TIMES}


def weights(path):
    return load_checkpoint(path)["model"]


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    out = tmp_path_factory.mktemp("recipe") / "full"
    return out, recipes.run_recipe(STAGES, get_config("test"), out, show_progress=False, verbose=False, threads=1)


def test_a_recipe_runs_its_stages_and_writes_one_folder_and_passport_per_stage(full):
    out, summary = full
    assert [s["kind"] for s in summary["finished"]] == ["sft", "grpo", "rft", "grpo"]
    assert summary["stopped"] is None and summary["recipe"] == "custom" and summary["source"] is None
    for i, kind in enumerate(["sft", "grpo", "rft", "grpo"]):
        folder = out / f"stage_{i + 1}_{kind}"
        assert {p.name for p in folder.iterdir()} == {"policy.pt", "metrics.jsonl", "summary.json", "passport.json"}
        pp = json.loads((folder / "passport.json").read_text())
        assert pp["kind"] == kind and pp["recipe"]["stage"] == f"{i + 1} of 4"
    assert summary["finished"][3]["overrides"] == {"steps": 2, "temperature": 1.2}
    stage_4 = json.loads((out / "stage_4_grpo" / "passport.json").read_text())
    assert stage_4["data_and_policy"]["generated_by"].endswith("1.2")
    rft = summary["finished"][2]
    kept = [r["kept_fraction"] for r in rows(out / "stage_3_rft" / "metrics.jsonl")]
    assert len(kept) == 2 and rft["acceptance_rate"] == pytest.approx(sum(kept) / 2)
    for entry in summary["finished"]:
        assert 0 <= entry["sampled_pass@1"] <= entry["pass@8"] <= 1
        assert entry["entropy"] > 0 and 1 <= entry["completion_length"] <= 4
    first = summary["finished"][0]
    # stage 1 starts at the first policy: one measurement
    assert first["kl_to_stage_start"] == first["kl_to_first_policy"]
    assert json.loads((out / "recipe.json").read_text()) == summary


def test_stages_sft_then_grpo_are_exactly_train_grpo(full, tmp_path):
    out, summary = full
    cfg = get_config("test")
    run("grpo", cfg, tmp_path / "grpo", show_progress=False, verbose=False, threads=1)
    assert rows(out / "stage_1_sft" / "metrics.jsonl") == rows(tmp_path / "grpo" / "sft_metrics.jsonl")
    assert rows(out / "stage_2_grpo" / "metrics.jsonl") == rows(tmp_path / "grpo" / "metrics.jsonl")
    mine, theirs = weights(out / "stage_2_grpo" / "policy.pt"), weights(tmp_path / "grpo" / "checkpoint.pt")
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs)
    final = json.loads((tmp_path / "grpo" / "summary.json").read_text())["final_accuracy"]
    assert summary["finished"][1]["pass@1"] == final


def test_a_recipe_of_one_stage_is_that_trainers_run(tmp_path):
    cfg = get_config("test")
    summary = recipes.run_recipe("sft", cfg, tmp_path / "recipe", show_progress=False, verbose=False, threads=1)
    ran = run("sft", cfg, tmp_path / "sft", show_progress=False, verbose=False, threads=1)
    assert rows(tmp_path / "recipe" / "stage_1_sft" / "metrics.jsonl") == rows(tmp_path / "sft" / "metrics.jsonl")
    assert summary["finished"][0]["pass@1"] == ran["final_accuracy"]
    mine, theirs = weights(tmp_path / "recipe" / "stage_1_sft" / "policy.pt"), weights(tmp_path / "sft" / "sft.pt")
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs)


def test_a_recipe_resumed_at_a_stage_boundary_or_after_ctrl_c_is_the_uninterrupted_one(full, tmp_path):
    out, summary = full
    part = recipes.run_recipe(STAGES, get_config("test"), tmp_path, until=1, show_progress=False, verbose=False,
                              threads=1)
    assert [s["kind"] for s in part["finished"]] == ["sft"] and not (tmp_path / "stage_2_grpo").exists()
    request_stop()  # Ctrl-C during stage 2: it stops after its first step, and is rerun from its start
    try:
        with pytest.raises(Interrupted):
            recipes.run_recipe(None, None, tmp_path, resume=True, show_progress=False, verbose=False, threads=1)
    finally:
        clear_stop()
    assert len(rows(tmp_path / "stage_2_grpo" / "metrics.jsonl")) == 1
    resumed = recipes.run_recipe(None, None, tmp_path, resume=True, show_progress=False, verbose=False, threads=1)
    assert [numbers(e) for e in resumed["finished"]] == [numbers(e) for e in summary["finished"]]
    assert rows(tmp_path / "stage_4_grpo" / "metrics.jsonl") == rows(out / "stage_4_grpo" / "metrics.jsonl")
    mine, theirs = weights(tmp_path / "stage_4_grpo" / "policy.pt"), weights(out / "stage_4_grpo" / "policy.pt")
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs)


def test_a_stage_that_cannot_start_stops_the_recipe_and_keeps_the_stages_before_it(tmp_path, capsys):
    # from the random initialisation (one GRPO step, all groups at reward 0) RFT's first rollout accepts nothing
    code = main(["train", "recipe", "--stages", "grpo:steps=1,rft,grpo", "--config", "test", "--out", str(tmp_path),
                 "--no-progress", "--threads", "1"])
    assert code == 1
    assert "stage 2 (rft) could not start: rejection sampling accepts nothing" in capsys.readouterr().err
    summary = json.loads((tmp_path / "recipe.json").read_text())
    assert summary["stopped"]["stage"] == 2 and [s["kind"] for s in summary["finished"]] == ["grpo"]
    assert summary["finished"][0]["zero_variance_share"] == 1.0
    assert (tmp_path / "stage_1_grpo" / "policy.pt").is_file() and not (tmp_path / "stage_2_rft").exists()


def test_a_failed_rollout_worker_ends_a_recipe_with_an_error_not_a_traceback(tmp_path, capsys, monkeypatch):
    from course_lib.tinygpt import rollout

    def boom(*args, **kwargs):  # the worker is forked: it imports this from course_lib.tinygpt.rollout
        raise RuntimeError("sampling exploded in the worker")

    monkeypatch.setattr(rollout, "collect_rollouts", boom)
    code = main(["train", "recipe", "--stages", "grpo:steps=2:max_staleness=1", "--config", "test", "--out",
                 str(tmp_path), "--no-progress", "--threads", "1"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: the rollout worker failed") and "sampling exploded" in err


@pytest.mark.parametrize(("spec", "message"), [
    ("r2", "unknown stage 'r2'; stages are one of ('pretrain', 'sft', 'dpo', 'grpo', 'kto', 'ppo', 'rft'), "),
    ("sft,orpo", "unknown stage 'orpo' (ORPO starts from the base model by definition"),
    ("sft,foo", "recipes one of ('r1', 'r1-zero')"),
    ("sft,rm", "unknown stage 'rm' (a reward model trains no policy)"),
    ("sft,judge", "unknown stage 'judge' (a judge trains no policy)"),
    ("grpo:nope=1", "grpo has no option 'nope'; its options: "),
    ("grpo:steps=many", "stage option 'steps' takes a int; got 'many'"),
    ("sft:model.n_layer=2", "cannot change between stages"),
    ("sft:steps", "must read key=value"),
    ("grpo:beta=-1", "grpo.beta must be a finite number >= 0"),
    ("", "unknown stage ''"),
])
def test_bad_stages_are_refused_with_the_accepted_values(spec, message, tmp_path):
    with pytest.raises(ValueError, match=None) as err:
        recipes.run_recipe(spec, get_config("test"), tmp_path, show_progress=False, verbose=False)
    assert message in str(err.value)
    assert not (tmp_path / "recipe.json").exists()


def test_cli_refusals(tmp_path, capsys):
    assert main(["train", "recipe", "r9", "--config", "test", "--out", str(tmp_path)]) == 2
    assert "unknown stage 'r9'" in capsys.readouterr().err
    assert main(["train", "recipe", "--config", "test", "--out", str(tmp_path)]) == 2
    assert "give a recipe" in capsys.readouterr().err
    assert main(["train", "recipe", "--resume", str(tmp_path / "nothing")]) == 2
    assert "no recipe to resume" in capsys.readouterr().err
    (tmp_path / "stages.json").write_text(json.dumps([{"kind": "sft", "steps": 5}, {"kind": "grpo", "nope": 1}]))
    assert main(["train", "recipe", "--stages", str(tmp_path / "stages.json"), "--config", "test", "--out",
                 str(tmp_path / "run")]) == 2
    assert "grpo has no option 'nope'" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_named_recipes_scale_with_the_config():
    name, stages = recipes.resolve("r1", get_config("cpu"))
    assert name == "r1" and [s["kind"] for s in stages] == ["sft", "grpo", "rft", "grpo"]
    assert stages[0] == {"kind": "sft", "task.n_demos": 200, "steps": 300}
    cfg = recipes.stage_config(get_config("cpu"), stages[2])
    assert cfg.grpo.steps == 100 and cfg.task.n_demos == 2000  # RFT reads GRPO's section
    assert recipes.resolve("r1-zero", get_config("cpu")) == ("r1-zero", [{"kind": "grpo"}])
    with pytest.raises(ValueError, match="a recipe needs at least one stage"):
        recipes.parse_stages([])


def test_sampled_eval_and_the_rft_passport():
    cfg = get_config("test")
    task, model = build_policy(cfg, device="cpu")
    state = torch.get_rng_state()
    a, b = sampled_eval(model, task, k=4, seed=3), sampled_eval(model, task, k=4, seed=3)
    assert a == b and torch.equal(state, torch.get_rng_state())  # seeded, and training's RNG untouched
    assert 0 <= a["pass@1"] <= a["pass@k"] <= 1 and a["k"] == 4
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        sampled_eval(model, task, k=0)
    pp = passport(cfg, "rft")
    assert pp["kind"] == "rft" and "six_choices" not in pp and "1[reward >= 1]" in pp["optimisation"]["advantage"]


def test_digit_text_is_digits_and_an_end_and_never_the_task():
    task, _ = build_policy(get_config("test"), device="cpu")
    ids, attn, loss_mask = recipes.digit_text(task, 400, torch.Generator().manual_seed(0))
    again = recipes.digit_text(task, 400, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip((ids, attn, loss_mask), again))  # the generator decides it
    tok, width = task.tokenizer, task.prompt_length + task.answer_length
    assert ids.shape == (400, width) and (ids[:, 0] == tok.bos_token_id).all()
    texts = [tok.decode(row[1:], skip_special_tokens=False) for row in ids.tolist()]
    lengths = [len(t.split("<eos>")[0]) for t in texts]
    assert all(t.split("<eos>")[0].isdigit() and t.count("<eos>") == 1 for t in texts)
    assert set(lengths) == set(range(1, width - 1))  # every length from 1 to width − 2
    assert torch.equal(attn, (ids != tok.pad_token_id).long())
    # the loss covers the real tokens from the answer's position on, <eos> included
    assert (loss_mask[:, : task.prompt_length] == 0).all()
    assert torch.equal(loss_mask[:, task.prompt_length:], attn[:, task.prompt_length:])
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        recipes.digit_text(task, 0, torch.Generator())


def test_a_pretrain_stage_learns_digit_text_from_its_sft_options_and_says_so(tmp_path):
    summary = recipes.run_recipe("pretrain:steps=30,grpo:steps=1", get_config("test"), tmp_path, show_progress=False,
                                 verbose=False, threads=1)
    assert [s["kind"] for s in summary["finished"]] == ["pretrain", "grpo"]
    losses = [r["loss"] for r in rows(tmp_path / "stage_1_pretrain" / "metrics.jsonl")]
    assert len(losses) == 30 and sum(losses[-5:]) < sum(losses[:5])  # the sft section's steps; the loss falls
    pp = json.loads((tmp_path / "stage_1_pretrain" / "passport.json").read_text())
    assert pp["kind"] == "pretrain" and "480 documents of plain digit text" in pp["data_and_policy"]["examples"]
    assert pp["recipe"]["starts_from"] == "the random initialisation"
    first = summary["finished"][0]
    assert first["kl_to_first_policy"] == first["kl_to_stage_start"] > 0  # stage 1 starts at the first policy


def test_a_recipe_can_start_from_given_weights_and_resume_from_them(full, tmp_path):
    out, _ = full
    sft = weights(out / "stage_1_sft" / "policy.pt")
    spec, cfg = "grpo:steps=1,grpo:steps=1", get_config("test")
    whole = recipes.run_recipe(spec, cfg, tmp_path / "whole", init=sft, init_name="the SFT stage", show_progress=False,
                               verbose=False, threads=1, kl_samples=2)
    first = weights(tmp_path / "whole" / "first_policy.pt")
    assert all(torch.equal(first[k], sft[k]) for k in sft)
    assert whole["starts_from"] == "the SFT stage" and whole["kl_samples"] == 2
    pp = json.loads((tmp_path / "whole" / "stage_1_grpo" / "passport.json").read_text())
    assert pp["recipe"]["starts_from"] == "the SFT stage"
    recipes.run_recipe(spec, cfg, tmp_path / "part", init=sft, init_name="the SFT stage", until=1,
                       show_progress=False, verbose=False, threads=1, kl_samples=2)
    resumed = recipes.run_recipe(None, None, tmp_path / "part", resume=True, show_progress=False, verbose=False,
                                 threads=1)
    assert [numbers(e) for e in resumed["finished"]] == [numbers(e) for e in whole["finished"]]
    with pytest.raises(ValueError, match="give no init"):
        recipes.run_recipe(None, None, tmp_path / "part", resume=True, init=sft)
    _, big = build_policy(get_config("cpu"), device="cpu")
    with pytest.raises(ValueError, match="init must be a model or state dict of config 'test'"):
        recipes.run_recipe(spec, cfg, tmp_path / "bad", init=big, show_progress=False, verbose=False)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ValueError, match="kl_samples must be an integer >= 1"):
        recipes.run_recipe(spec, cfg, tmp_path / "bad", kl_samples=0)
