"""The benchmark tables in README.md and docs/*.md are generated from the benchmarks' JSON, never typed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import tables  # noqa: E402


def family_json(tmp_path, finals, starts=(0.6, 0.6, 0.6)):
    runs = [{"setting": "main", "variant": v, "seed": s, "baseline_accuracy": starts[s], "final_accuracy": f,
             "final_accuracy_carry": f - 0.1, "optimizer_steps": 150, "groups_sampled": 4800, "rl_seconds": 40.0}
            for v, per_seed in finals.items() for s, f in enumerate(per_seed)]
    (tmp_path / "grpo_family.json").write_text(json.dumps({"command": "x", "commit": "abc1234", "machine": "m",
                                                           "grpo_steps": 150,
                                                            "runs": runs}))
    return tmp_path


def test_readme_tables_match_the_benchmark_json():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tables.py"), "--check"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr


def test_the_check_catches_a_hand_edited_number(tmp_path):
    readme = tmp_path / "README.md"
    results = family_json(tmp_path, {"GRPO": [0.90, 0.95, 0.97], "RFT": [0.91, 0.93, 0.99]})
    readme.write_text("intro\n<!-- bench:grpo_family -->\n<!-- /bench:grpo_family -->\nend\n")
    fresh = tables.render(readme.read_text(), results)
    assert "**95.0%**" in fresh and "**93.0%**" in fresh  # medians of the seeds
    assert tables.render(fresh, results) == fresh  # stable
    assert tables.render(fresh.replace("**95.0%**", "**96.0%**"), results) == fresh  # a typed number is overwritten


def test_the_check_reads_the_readme_and_every_docs_page_wherever_a_block_stands(tmp_path, capsys):
    from course_lib.trl.trl_translate import mapping_markdown

    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("no tables here\n")
    page = tmp_path / "docs" / "trl.md"
    page.write_text("# TRL\n<!-- bench:trl_map -->\n| typed |\n<!-- /bench:trl_map -->\nend\n")
    assert tables.main(["--check", "--root", str(tmp_path)]) == 1
    assert "docs/trl.md" in capsys.readouterr().err
    assert tables.main(["--root", str(tmp_path)]) == 0  # what make bench runs: rewrites the page
    assert mapping_markdown() in page.read_text() and page.read_text().endswith("end\n")
    assert tables.main(["--check", "--root", str(tmp_path)]) == 0
    page.write_text("# TRL, no block\n")
    assert tables.main(["--check", "--root", str(tmp_path)]) == 1  # nothing checked is not a pass


def test_medians_spread_and_verdicts(tmp_path):
    results = family_json(tmp_path, {"GRPO": [0.90, 0.95, 0.97], "RFT": [0.91, 0.93, 0.99]})
    data = tables.load("grpo_family", results)
    summary = tables.family_summary(data, "main")
    assert summary["GRPO"]["final"] == 0.95 and summary["GRPO"]["per_seed"] == [0.90, 0.95, 0.97]
    assert summary["RFT"]["lift"] == pytest.approx(0.33)
    (line,) = tables.verdicts(data)
    # paired by seed (same start), read by course_lib.run.verdicts
    assert ("main start: GRPO − RFT: -1.0 / +2.0 / -2.0 pts (seeds 0 / 1 / 2); median -1.0, range -2.0 to +2.0; "
            "GRPO ahead on 1 of 3 seeds; within the seed spread") in line
    assert "degenerate" not in line


def test_per_seed_starts_and_a_degenerate_seed_is_flagged(tmp_path):
    results = family_json(tmp_path, {"GRPO": [0.90, 0.95, 0.06], "RFT": [0.91, 0.93, 0.10]}, starts=(0.3, 0.5, 0.05))
    text = tables.grpo_family(results)
    assert "| SFT start | 30.0% | | 30.0% / 50.0% / 5.0% |" in text  # the median hides seed 2; the row does not
    assert "**Degenerate start**: seed 2 starts at 5.0%, below 10.0%" in text
    (line,) = tables.verdicts(tables.load("grpo_family", results))
    assert ("-1.0 / +2.0 / -4.0 pts (seeds 0 / 1 / 2); median -1.0, range -4.0 to +2.0; GRPO ahead on 1 of 3 "
            "seeds" in line)
    assert ("Without the degenerate start (seed 2): GRPO − RFT: -1.0 / +2.0 pts (seeds 0 / 1); median +0.5, range "
            "-1.0 to +2.0; GRPO ahead on 1 of 2 seeds; too few seeds to judge") in line


def test_unknown_block_and_missing_results(tmp_path):
    with pytest.raises(ValueError, match="no renderer"):
        tables.render("<!-- bench:nonsense -->\n<!-- /bench:nonsense -->", tmp_path)
    text = tables.render("<!-- bench:grpo_family -->\n<!-- /bench:grpo_family -->", tmp_path)
    assert "Not measured" in text


def test_trl_side_by_side_table_and_ratio_come_from_the_json(tmp_path):
    cpu = {"course_lib `train_grpo`": [0.1, 0.2, 0.3], "TRL `GRPOTrainer` (bridge)": [0.4, 0.3, 0.5]}
    runs = [{"seed": s, "variant": v, "baseline_accuracy": 0.6, "final_accuracy": f, "lift": f - 0.6,
             "step_seconds": 1.0 + s, "cpu_step_seconds": cpu[v][s], "rl_seconds": 60.0 * (1 + s)}
            for v, finals in {"course_lib `train_grpo`": [0.9, 0.8, 0.85],
                              "TRL `GRPOTrainer` (bridge)": [0.7, 0.95, 0.9]}.items()
            for s, f in enumerate(finals)]
    (tmp_path / "trl_vs_course_grpo.json").write_text(json.dumps(
        {"command": "c", "commit": "abc", "steps": 60, "machine": "m", "seeds": [0, 1, 2], "runs": runs}))
    text = tables.trl_vs_course_grpo(tmp_path)
    assert "90.0% (70.0% / 95.0% / 90.0%)" in text  # TRL's median and per-seed finals
    # per-seed ratios 0.25, 0.67, 0.60: the median 0.60 misses the goal
    assert "CPU seconds per step: median **0.60** (per seed 0.25 / 0.67 / 0.60)" in text and "not met" in text
    for r in runs:
        r["cpu_step_seconds"] = (r["cpu_step_seconds"] / 4 if r["variant"].startswith("course")
                                 else r["cpu_step_seconds"])
    (tmp_path / "trl_vs_course_grpo.json").write_text(json.dumps(
        {"command": "c", "commit": "abc", "steps": 60, "machine": "m", "seeds": [0, 1, 2], "runs": runs}))
    assert "≤ 0.5: met" in tables.trl_vs_course_grpo(tmp_path)


def test_grpo_and_dpo_blocks_say_what_they_ran(tmp_path):
    runs = [{"variant": "GRPO (cpu config)", "seed": 0, "sft_accuracy": 0.5, "final_accuracy": 0.9,
             "control_accuracy": 0.6,
             "rl_seconds": 50.0, "generation_fraction": 0.3}]
    (tmp_path / "grpo.json").write_text(json.dumps({"command": "c", "commit": "abc", "seeds": [0], "runs": runs,
                                                     "unit": "token_mean", "steps": 300}))
    assert "GRPO here: `unit=token_mean`, 300 steps — not the family table's GRPO row" in tables.grpo(tmp_path)
    dpo = [{"variant": v, "seed": 0, "sft_accuracy": 0.5, "final_accuracy": f, "rl_seconds": 18.0}
           for v, f in (("DPO", 0.8), ("DPO + NLL", 0.84), ("NLL only", 0.7))]
    (tmp_path / "dpo.json").write_text(json.dumps({"command": "c", "commit": "abc", "seeds": [0], "runs": dpo}))
    assert "| NLL only | 50.0% (50.0%) | 70.0% (70.0%) | 18 (18) |" in tables.dpo(tmp_path)


def test_rlhf_block_shows_medians_and_each_seed(tmp_path):
    def run(seed, of_ceiling, bon1, bon16, grpo, ppo):
        bon = [{"n": n, "gold": {1: bon1, 8: 0.5, 16: bon16, 64: 0.5}[n], "proxy": 0.0, "kl": n / 4,
                "kl_bound": float(n)}
               for n in (1, 8, 16, 64)]
        over = {"beta": 0.05, "steps": 60, "batch_prompts": 128, "gold_start": 0.5, "gold_peak": 0.6, "gold_end": 0.4,
                "sqrt_kl_peak": 0.5, "sqrt_kl_end": 1.0, "proxy_start": 0.0, "proxy_end": 2.0,
                "shape": "rises then falls"}
        rl = {"GRPO": {"accuracy": grpo, "rl_seconds": 100.0}, "RLOO": {"accuracy": grpo, "rl_seconds": 100.0},
              "PPO": {"accuracy": ppo, "rl_seconds": 150.0, "critic_bytes": 2**20, "bytes": 2**21},
              "GRPO, matched optimiser steps": {"accuracy": ppo - 0.02, "rl_seconds": 120.0, "optimizer_steps": 80},
              "GRPO, PPO's wall-clock": {"accuracy": 0.95, "rl_seconds": 150.0, "optimizer_steps": 60}}
        rm = {"heldout_accuracy": 0.8, "noise_ceiling": 0.9, "of_ceiling": of_ceiling, "heldout_gold_accuracy": 0.85,
              "ece": 0.05, "train_pairs": 8000, "train_seconds": 60.0}
        return {"seed": seed, "sft_accuracy": 0.58, "rm": rm, "bon": bon, "overopt": [over], "rl": rl}

    runs = [run(0, 0.95, 0.5, 0.7, 0.9, 0.8), run(1, 0.85, 0.6, 0.6, 0.9, 0.9), run(2, 0.91, 0.55, 0.65, 0.8, 0.9)]
    (tmp_path / "rlhf.json").write_text(json.dumps({"command": "c", "commit": "abc", "rl_steps": 40,
                                                    "completions_per_step": 256,
                                                     "machine": "m", "seeds": [0, 1, 2], "runs": runs}))
    text = tables.rlhf(tmp_path)
    assert "| **reward model / noise ceiling** (target ≥ 90%) | 91.0% | 95.0% / 85.0% / 91.0% |" in text
    assert "| **best-of-16** gold accuracy | 65.0% | 70.0% / 60.0% / 65.0% |" in text
    assert "| as configured: PPO − GRPO, points | +0.0 | -10.0 / +0.0 / +10.0 |" in text
    # seed 1: best-of-1 = best-of-16 (first)
    assert "| best-of-N: the N with the highest gold | 16 | 16 / 1 / 16 |" in text
    assert "| critic: extra measured memory (weights, grads, AdamW) | 1.00 MiB |" in text
    assert "seed 2: β = 0.05 rises then falls" in text and "at commit abc" in text
    assert "falls by more than 3 points by N = 64 in 2 of 3 seeds" in text  # seed 1 peaks at N = 1
    assert "| best-of-64: √KL exact / √(log N − (N − 1)/N), the bound | 0.50 | 0.50 / 0.50 / 0.50 |" in text
    assert "| GRPO, matched optimiser steps: PPO − this GRPO, points | +2.0 | +2.0 / +2.0 / +2.0 |" in text
    assert "| GRPO, PPO's wall-clock: optimiser steps | 60 | 60 / 60 / 60 |" in text


def test_the_readme_says_once_whether_every_result_ran_the_same_code(tmp_path):
    for name, commit in (("a", "abc1234"), ("b", "abc1234")):
        (tmp_path / f"{name}.json").write_text(json.dumps({"commit": commit, "sources": "d1", "cpu_kernels": "AVX2",
                                                           "runs": []}))
    line = tables.provenance(tmp_path)
    assert line.startswith("Every table below ran the same code: sources digest d1 (") and "at commit abc1234." in line
    assert line.endswith("torch's CPU kernels: AVX2: a, b.\n")
    # the same sources at two commits (e.g. a README edit between two benchmarks) is still one version of the code
    (tmp_path / "b.json").write_text(json.dumps({"commit": "def5678", "sources": "d1", "cpu_kernels": "AVX2",
                                                 "runs": []}))
    assert "at commits abc1234, def5678 (the same sources at each)." in tables.provenance(tmp_path)
    (tmp_path / "c.json").write_text(json.dumps({"runs": []}))  # an old file with no commit or kernel set recorded
    line = tables.provenance(tmp_path)
    assert "**The tables below do not all come from one committed version of the code**" in line
    assert "d1: a, b" in line and "not recorded: c" in line
    assert line.endswith("torch's CPU kernels: AVX2: a, b; not recorded: c.\n")
    # a run whose sources differed from its commit cannot vouch for its code
    for name in ("b", "c"):
        (tmp_path / f"{name}.json").write_text(json.dumps({"commit": "x+changes", "sources": "d1+changes",
                                                           "runs": []}))
    (tmp_path / "a.json").write_text(json.dumps({"commit": "x+changes", "sources": "d1+changes", "runs": []}))
    assert "**The tables below do not all come from one committed version" in tables.provenance(tmp_path)


def test_gpu_table_says_unmeasured_until_a_run_fills_it(tmp_path):
    """No gpu_check.json: the results page says plainly that nothing was measured; with one, the table holds its
    numbers."""
    import json

    import tables

    block = "<!-- bench:gpu_check -->\n<!-- /bench:gpu_check -->"
    assert "**unmeasured**" in tables.render(block, tmp_path)
    run = {"device": "NVIDIA H200", "precision": "bf16 autocast (sm_90)", "wall_seconds": 400.0,
           "command": "python benchmarks/gpu_check.py --save", "commit": "abc1234",
           "trainers": [{"kind": "grpo", "steps": 200, "stopped": False, "train_seconds": 61.5, "accuracy": 0.934,
                         "generated_tokens_per_second": 123456.0, "mfu": 0.00123},
                        {"kind": "rm", "steps": 100, "stopped": False, "train_seconds": 20.0, "accuracy": None,
                         "generated_tokens_per_second": None, "dtype": "fp32", "mfu": 0.0005},
                        {"kind": "ppo", "skipped": "12 s left of --max-seconds"}],
           "instruct_smoke": {"steps": 2, "seconds": 3.0},
           "notebooks": [{"notebook": "08_tiny_gpt_dpo", "returncode": 0, "seconds": 41.2},
                         {"notebook": "16_recipes", "returncode": None, "seconds": 240.0},
                         {"notebook": "17_ai_feedback", "skipped": "0 s left of the notebooks' share"}]}
    (tmp_path / "gpu_check.json").write_text(json.dumps(run))
    text = tables.render(block, tmp_path)
    assert "unmeasured" not in text and "| grpo | 200 | 61.5 | 93.4% | 123,456 | 0.123% |" in text
    assert "| rm | 100 | 20.0 | — | — | 0.050% (fp32) |" in text  # a trainer in another dtype says which
    assert "| ppo | skipped: 12 s left" in text and "NVIDIA H200" in text
    assert "`python benchmarks/gpu_check.py --save` at commit abc1234." in text
    assert ("08_tiny_gpt_dpo passed in 41 s; 16_recipes killed at 240 s; 17_ai_feedback skipped (0 s left of "
            "the notebooks' share)") in text


def test_recipes_block_has_one_row_per_stage_and_names_a_stage_that_did_not_start(tmp_path):
    stage = {"pass@1": 0.5, "sampled_pass@1": 0.25, "pass@8": 0.75, "kl_to_stage_start": 0.25, "cpu_seconds": 10.0}
    runs = [{"variant": "random init", "seed": s, "stage": 0, "kind": "none", "steps": 0, "pass@1": 0.0,
             "sampled_pass@1": 0.001, "pass@8": 0.01} for s in (0, 1)]
    runs += [{"variant": "r1", "seed": s, "stage": 1, "kind": "sft", "steps": 300, **stage} for s in (0, 1)]
    runs += [{"variant": "r1", "seed": s, "stage": 2, "kind": "grpo", "steps": 300, **stage, "pass@1": p,
              "zero_variance_share": 0.5} for s, p in ((0, 0.8), (1, 0.4))]
    runs += [{"variant": "r1-zero", "seed": 0, "stage": 1, "kind": "grpo", "steps": 300, **stage, "pass@1": 0.02,
              "zero_variance_share": 0.99}]
    runs += [{"variant": "r1-zero", "seed": 1, "stopped": {"stage": 1, "kind": "grpo", "reason": "x"}}]
    runs += [{"variant": "weak start", "seed": 0, "stage": 1, "kind": "sft", "steps": 100, **stage}]
    (tmp_path / "recipes.json").write_text(json.dumps({"command": "c", "commit": "abc", "seeds": [0, 1], "runs": runs,
                                                       "machine": "a shared CPU"}))
    text = tables.recipes(tmp_path)
    assert "| random init (untrained) | 0.0% (0.0% / 0.0%) | 0.1% (0.1% / 0.1%) | 1.0% (1.0% / 1.0%) | — |" in text
    assert ("| r1: stage 1 sft (300 steps) | 50.0% (50.0% / 50.0%) | 25.0% (25.0% / 25.0%) | 75.0% (75.0% / 75.0%) "
            "| 0.25 (0.25 / 0.25) | — | — | 10 (10 / 10) |") in text
    assert ("| r1: stage 2 grpo (300 steps) | 60.0% (80.0% / 40.0%) |" in text
            and "| 50.0% (50.0% / 50.0%) | — |" in text)
    assert "r1-zero seed 1: stage 1 (grpo) did not start." in text and "weak start ran on seed(s) 0 only." in text
    # the verdicts are paired by seed: stage 2 over stage 1 is +30 and −10 points
    assert ("r1, pass@1: GRPO (stage 2) − stage 1: +30.0 / -10.0 pts (seeds 0 / 1); median +10.0, range -10.0 to "
            "+30.0; GRPO (stage 2) ahead on 1 of 2 seeds") in text
    # GRPO from the random init reads its start from the untrained row of the same seed (seed 1 stopped: left out)
    assert ("GRPO from the random init (R1-Zero): start pass@1 median 0.0% (per seed 0.0%), pass@8 median 1.0% "
            "(per seed 1.0%); after GRPO pass@1 median 2.0% (per seed 2.0%)") in text
    assert "a shared CPU." in text


def test_recipes_compare_grpo_with_rft_and_the_cold_starts_per_seed():
    """Seed 1's cold start samples more right answers (pass@8) but GRPO gains less there; RFT adds more on seed 1."""
    def row(seed, stage, kind, p1, p8=0.5):
        return {"variant": "r1", "seed": seed, "stage": stage, "kind": kind, "pass@1": p1, "pass@8": p8,
                "zero_variance_share": 0.5}
    runs = [row(0, 1, "sft", 0.1, 0.2), row(1, 1, "sft", 0.1, 0.4), row(0, 2, "grpo", 0.5), row(1, 2, "grpo", 0.2),
            row(0, 3, "rft", 0.6), row(1, 3, "rft", 0.4)]
    lines = tables.recipe_verdicts({"seeds": [0, 1], "runs": runs})
    assert ("- r1: GRPO's pass@1 gain (stage 2) − RFT's (stage 3): +30.0 / -10.0 pts (seeds 0 / 1); median +10.0, "
            "range -10.0 to +30.0; GRPO's pass@1 gain (stage 2) ahead on 1 of 2 seeds; too few seeds to judge (2; a "
            "verdict needs 3); the seed whose cold start sampled the most right answers (seed 1, pass@8 40.0%) did "
            "not have GRPO's largest gain (+10.0 pts)") in lines
    runs[3]["pass@1"] = 0.9  # now seed 1 gains the most from GRPO, and GRPO adds more than RFT on both seeds
    lines = tables.recipe_verdicts({"seeds": [0, 1], "runs": runs})
    assert any("ahead on 2 of 2 seeds" in line and "had GRPO's largest gain (+80.0 pts)" in line for line in lines)


def test_the_trl_mapping_table_is_written_from_the_translation_table(tmp_path):
    """docs/trl.md's course ↔ TRL table comes from course_lib.trl.trl_translate.MAPPING, results or not: a typed row is
    overwritten."""
    from course_lib.trl.trl_translate import mapping_markdown

    block = "<!-- bench:trl_map -->\n| hand | typed | row |\n<!-- /bench:trl_map -->"
    assert tables.render(block, tmp_path) == f"<!-- bench:trl_map -->\n{mapping_markdown()}<!-- /bench:trl_map -->"
    page = (ROOT / "docs" / "trl.md").read_text()
    assert mapping_markdown() in page and "KTOTrainer" in page


def async_run(seed, K, correction, sps, acc, cpu, **extra):
    return {"seed": seed, "max_staleness": K, "correction": correction, "steps": 300, "steps_per_second": sps,
            "cpu_seconds": cpu, "accuracy": acc, "mismatch_kl": None if K == 0 else 0.01 * K,
            "is_ess": None if K == 0 else 1 - 0.05 * K,
            "is_clipped_fraction": None if K == 0 else 0.01 * K, **extra}


def test_async_speed_table_ratio_goal_and_accuracy_come_from_the_json(tmp_path):
    runs = [async_run(0, 0, True, 8.0, 0.84, 37.0), async_run(0, 1, True, 10.0, 0.82, 42.0),
            async_run(1, 0, True, 7.0, 0.95, 41.0), async_run(1, 1, True, 10.5, 0.96, 42.0),
            async_run(2, 0, True, 7.0, 0.94, 43.0), async_run(2, 1, True, 10.5, 0.97, 42.0)]
    meta = {"command": "tinygpt_async.py --staleness 1", "commit": "abc", "config": "cpu", "steps": 300,
            "seeds": [0, 1, 2], "machine": "m", "date": "d"}
    (tmp_path / "async_speed.json").write_text(json.dumps({**meta, "runs": runs}))
    text = tables.async_speed(tmp_path)
    # ratios 1.25, 1.50, 1.50: the median meets the goal, seed 0 does not
    assert "| 0 | 8.00 | 10.00 | 1.25× | 37.0 → 42.0 | 84.0% → 82.0% |" in text
    assert "median **1.50×**, met on the median, reached by 2 of 3 seeds (per seed 1.25× / 1.50× / 1.50×)" in text
    # paired differences −2 / +1 / +3 points (median +1): not one sign on every seed, so within the spread
    assert ("K = 1 − synchronous: -2.0 / +1.0 / +3.0 pts (seeds 0 / 1 / 2); median +1.0, range -2.0 to +3.0; "
            "K = 1 ahead on 2 of 3 seeds; within the seed spread") in text
    assert "idle machine" in text and "`tinygpt_async.py --staleness 1` at commit abc, d (m)." in text
    assert "K = 1 used 98–114% of the synchronous run's CPU seconds, about the same work" in text
    for r in runs:
        r["steps_per_second"] = 8.0 if r["max_staleness"] == 0 else 9.0
    (tmp_path / "async_speed.json").write_text(json.dumps({**meta, "runs": runs}))
    assert "median **1.12×**, not met on the median, reached by 0 of 3 seeds" in tables.async_speed(tmp_path)


def test_async_sweep_table_medians_ranges_and_the_shared_machine(tmp_path):
    runs = [async_run(s, K, c, 5.0, acc, 40.0 + K, sft_accuracy=0.5 + 0.01 * s, load_before=3.0 + s, load_after=6.0)
            for s, accs in enumerate([[0.80, 0.81, 0.60, 0.40], [0.90, 0.89, 0.70, 0.45], [0.85, 0.86, 0.50, 0.50]])
            for (K, c), acc in zip([(0, True), (1, True), (4, True), (4, False)], accs)]
    data = {"benchmark": "async", "command": "tinygpt_async.py --steps 100", "commit": "abc", "config": "cpu",
            "steps": 100, "config_steps": 300, "seeds": [0, 1, 2], "machine": "m", "complete": True, "runs": runs,
            "sft_start": "each seed's own shared start"}
    (tmp_path / "async.json").write_text(json.dumps(data))
    text = tables.async_sweep(tmp_path)
    assert "| 0 | — (synchronous) | 85.0% (80.0%–90.0%) | 80.0% / 90.0% / 85.0% | — | — | — | 40 |" in text
    assert "| 4 | on | 60.0% (50.0%–70.0%) | 60.0% / 70.0% / 50.0% | 0.0400 | 0.80 | 4.0% | 44 |" in text
    assert "| 4 | off | 45.0% (40.0%–50.0%) |" in text
    lines = text.splitlines()
    on, off = (lines.index(next(x for x in lines if x.startswith(f"| 4 | {c}"))) for c in ("on", "off"))
    assert on < off
    assert "100 optimiser steps per run (the config's 300, cut to fit the time this sweep had)" in text
    assert "SFT start per seed 50.0% / 51.0% / 52.0% (each seed's own shared start)" in text
    assert "**The machine was shared** (load average 3.0–6.0 on 2 cores during the runs)" in text
    assert "Incomplete" not in text
    # same seed, same start: staleness against the synchronous run, the correction against the same K without it
    assert ("- K = 4 corrected − synchronous: -20.0 / -20.0 / -35.0 pts (seeds 0 / 1 / 2); median -20.0, range -35.0 "
            "to -20.0; K = 4 corrected ahead on 0 of 3 seeds; beyond the seed spread: synchronous ahead on every "
            "seed") in text
    assert ("- K = 4 with the correction − without: +20.0 / +25.0 / +0.0 pts (seeds 0 / 1 / 2); median +20.0, range "
            "+0.0 to +25.0; K = 4 with the correction ahead on 2 of 3 seeds (1 tied); within the seed spread") in text
    assert ("- K = 1 corrected − synchronous: +1.0 / -1.0 / +1.0 pts" in text
            and "ahead on 2 of 3 seeds; within" in text)
    data.update(complete=False, planned_runs=27)
    (tmp_path / "async.json").write_text(json.dumps(data))
    assert "**Incomplete**: 12 of 27 runs had finished when it stopped." in tables.async_sweep(tmp_path)


def test_ai_feedback_block_reads_both_constitutions_seed_by_seed(tmp_path):
    def run(variant, seed, bias, gold_change):
        return {"variant": variant, "seed": seed, "rules_position_bias": 0.8, "judge_agreement": 0.5,
                "judge_position_bias": bias, "judge_length_bias": 0.9, "rm_heldout_gold_accuracy": 0.55,
                "rm_length_bias": 0.8, "ppo_gold_start": 0.5, "ppo_gold_change": gold_change, "ppo_proxy_change": 0.3,
                "cpu_seconds": 60.0}

    runs = [run("default", 0, 0.79, -0.05), run("default", 1, 0.81, 0.01),
            run("without 'first'", 0, -0.02, -0.02), run("without 'first'", 1, 0.12, -0.01)]
    (tmp_path / "ai_feedback.json").write_text(json.dumps({
        "command": "c", "commit": "abc", "seeds": [0, 1], "runs": runs, "budget": "fast", "judge_steps": 60,
        "rm_steps": 30, "ppo_steps": 8, "window": 3, "machine": "a shared CPU"}))
    text = tables.render("<!-- bench:ai_feedback -->\nold\n<!-- /bench:ai_feedback -->", tmp_path)
    assert "| default | +0.80 (+0.80 / +0.80) | 50.0% (50.0% / 50.0%) | +0.80 (+0.79 / +0.81) |" in text
    assert "| without 'first' | +0.80 (+0.80 / +0.80) | 50.0% (50.0% / 50.0%) | +0.05 (-0.02 / +0.12) |" in text
    assert "- default: the judge's |position bias| < 0.1 on 0 of 2 seeds" in text and "gold fell on 1 of 2" in text
    assert ("- without 'first': the judge's |position bias| < 0.1 on 1 of 2 seeds" in text
            and "gold fell on 2 of 2" in text)
    assert "`fast` budget: the judge 60 steps, the reward model 30, PPO 8 (3-step moving means)" in text


def test_tools_table_reads_medians_and_seeds_from_the_json(tmp_path):
    def run(variant, seed, final, env=True):
        tool = (lambda x: x) if env else (lambda x: None)
        return {"variant": variant, "seed": seed, "steps": 60, "start_accuracy": 0.6, "final_accuracy": final,
                "final_accuracy_carry": final - 0.1, "final_accuracy_no_carry": final + 0.05,
                "start_tool_use_carry": tool(0.02), "final_tool_use_carry": tool(0.5 + seed / 10),
                "call_rate_carry_first": tool(0.05), "call_rate_carry_last": tool(0.4),
                "tool_answer_logprob": tool(-3.0 - seed), "grpo_cpu_seconds": 50.0 + seed,
                "start_cpu_seconds": 10.0 if env and seed == 0 else None}

    runs = [run("no tool", s, f, env=False) for s, f in enumerate([0.8, 0.7, 0.9])]
    runs += [{**run("no tool, same extra SFT", s, f), "call_rate_carry_first": None}
             for s, f in enumerate([0.9, 0.9, 0.9])]
    runs += [run("tool", s, f) for s, f in enumerate([0.95, 0.9, 0.85])]
    runs[-1]["call_rate_carry_last"] = 0.01  # seed 2: the call rate fell
    (tmp_path / "tools.json").write_text(json.dumps(
        {"command": "tinygpt_tools.py", "commit": "abc", "config": "cpu", "grpo_steps": 60, "tool_call": "sum",
         "tool_demos": 50, "tool_sft": 150, "seeds": [0, 1, 2], "runs": runs}))
    text = tables.tools(tmp_path)
    assert ("60 GRPO steps per row (cpu config)" in text
            and "the first 50 carry demonstrations call the tool for the whole sum" in text)
    no_tool = next(line for line in text.splitlines() if line.startswith("| no tool |"))
    assert "80.0% (80.0% / 70.0% / 90.0%)" in no_tool and no_tool.count("| — ") == 5  # no tool columns without a tool
    tool = next(line for line in text.splitlines() if line.startswith("| tool |"))
    assert "90.0% (95.0% / 90.0% / 85.0%)" in tool and "60.0% (50.0% / 60.0% / 70.0%)" in tool
    assert "-4.00 (-3.00 / -4.00 / -5.00)" in tool and "| 51 (50 / 51 / 52) |" in tool  # GRPO's CPU seconds
    assert "at commit abc" in text
    assert "- tool, sampled call rate on carry prompts: last quarter of the steps − first:" in text
    assert "last quarter of the steps ahead on 2 of 3 seeds" in text
    assert ("- held-out accuracy after GRPO: tool − no tool, same extra SFT: +5.0 / +0.0 / -5.0 pts (seeds 0 / 1 / "
            "2); median +0.0, range -5.0 to +5.0; tool ahead on 1 of 3 seeds (1 tied); within the seed "
            "spread.") in text
    assert "- no tool:" not in text  # no call rate without a tool


def test_class_grading_says_measured_for_a_class_of_150_and_extrapolated_below(tmp_path):
    """A class of 150 or more was timed, not extrapolated; a smaller one says how long 150 would take."""
    def write(students: int, per_student: float) -> str:
        run = {"jobs": 2, "students": students, "seconds": students * per_student, "seconds_per_student": per_student,
               "speedup": 1.0, "load_before": 0.5, "load_after": 2.5}
        (tmp_path / "class_grading.json").write_text(json.dumps(
            {"command": "c", "commit": "abc1234", "machine": "m", "class_size": students, "assignment": "module14",
             "runs": [run]}))
        return tables.class_grading(tmp_path)

    full = write(150, 2.3)
    assert ("with 2 jobs it took 5.8 min, within the goal of ≤ 6 min for 150 on 2 cores (measured, not "
            "extrapolated)") in full
    assert "extrapolation" not in full and "not 150" not in full
    assert "over the goal" in write(150, 2.5)  # 6.25 min
    small = write(8, 2.6)
    assert "Measured on a class of 8 (module14, all five notebooks each), not 150" in small
    assert ("would take about 6.5 min (an extrapolation; the goal is ≤ 6 min on 2 cores)" in small
            and "took" not in small)


def test_seeds_side_by_side_table_and_its_goal(tmp_path):
    runs = [{"n_seeds": n, "seed": s, "round": r, "final_accuracy": 0.5 + s / 10 + r / 100}
            for r in (0, 1) for n in (1, 2, 4) for s in range(n)]  # the per-seed accuracies: round 0's
    data = {"command": "tinygpt_seeds.py", "commit": "abc", "config": "cpu", "cores": 2, "steps": 300, "repeats": 2,
            "wall_seconds": {"1": 10.0, "2": 11.0, "4": 23.0}, "cpu_seconds": {"1": 10.0, "2": 20.0, "4": 40.0},
            "runs": runs}
    (tmp_path / "seeds.json").write_text(json.dumps(data))
    text = tables.seeds(tmp_path)
    assert "| 4 | 23.0 | 2.30× | 40.0 | 50.0% / 60.0% / 70.0% / 80.0% |" in text
    assert "**2.30×**, not met on this run's 2 core(s)" in text and "300 GRPO steps per seed" in text
    assert "medians of 2 rounds" in text
    data["wall_seconds"]["4"] = 21.0
    (tmp_path / "seeds.json").write_text(json.dumps(data))
    assert "**2.10×**, met" in tables.seeds(tmp_path)


def test_rendering_runs_no_git_nor_any_command(monkeypatch):
    """Importing the renderer and rendering every table reads files only: the commit a results file
    ran at is recorded by ``writer.record_start`` when a benchmark starts, never read here."""
    import importlib

    def refuse(*args, **kwargs):
        raise AssertionError(f"the renderer ran {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    importlib.reload(tables)
    for name in tables.RENDERERS:
        assert tables.block(name)


def test_the_seeds_benchmark_reports_medians_of_interleaved_rounds(tmp_path, monkeypatch):
    """The benchmark itself, on the toy config: every count runs once per round, the table shows the medians."""
    import functools
    import statistics

    import tinygpt_seeds
    import writer

    from course_lib.trainers.configs import get_config

    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tinygpt_seeds, "get_config", lambda name: get_config("test"))
    monkeypatch.setattr(tinygpt_seeds, "save", functools.partial(writer.save, results=tmp_path))
    monkeypatch.setattr(sys, "argv", ["tinygpt_seeds.py", "--seeds", "0", "1", "--counts", "1", "2", "--steps", "2",
                                      "--repeats", "3"])
    tinygpt_seeds.main()
    data = json.loads((tmp_path / "seeds.json").read_text())
    assert data["repeats"] == 3 and data["steps"] == 2
    for n in ("1", "2"):
        walls, cpus = data["rounds"][n]["wall_seconds"], data["rounds"][n]["cpu_seconds"]
        assert len(walls) == len(cpus) == 3 and data["wall_seconds"][n] == statistics.median(walls)
        assert data["cpu_seconds"][n] == statistics.median(cpus)
    assert [(r["round"], r["n_seeds"], r["seed"]) for r in data["runs"]] == [
        (k, 1, 0) if i == 0 else (k, 2, i - 1) for k in range(3) for i in range(3)]  # the counts interleaved
    text = tables.seeds(tmp_path)
    assert "medians of 3 rounds, the counts interleaved" in text
    assert f"| 2 | {data['wall_seconds']['2']:.1f} | " in text and f" | {data['cpu_seconds']['2']:.1f} | " in text


def test_the_verdicts_one_seed_notebooks_print_read_each_benchmark_seed_by_seed(tmp_path):
    dpo = [{"variant": v, "seed": s, "sft_accuracy": 0.5, "final_accuracy": f, "rl_seconds": 18.0}
           for v, per_seed in (("DPO", (0.70, 0.72, 0.74)), ("DPO + NLL", (0.76, 0.71, 0.80)),
                               ("NLL only", (0.80, 0.81, 0.84)), ("KTO", (0.71, 0.73, 0.75)))
           for s, f in enumerate(per_seed)]
    lines = tables.dpo_verdicts({"seeds": [0, 1, 2], "runs": dpo}, 500)
    assert [line.split(":")[0] for line in lines] == ["- DPO − its SFT start", "- DPO + NLL − NLL only",
                                                      "- DPO + NLL − DPO", "- KTO − DPO"]
    assert lines[0].endswith("beyond the seed spread, by more than 6.3 pts: DPO ahead on every seed")  # +20, +22, +24
    assert "-4.0 / -10.0 / -4.0 pts" in lines[1] and "ahead on 0 of 3 seeds; within the seed spread" in lines[1]
    assert "ahead on 3 of 3 seeds; within the seed spread" in lines[3]  # +1 on every seed: below the noise
    hacking = [{"seed": s, "reward": w, "start": {"accuracy": 0.3, "loose_accuracy": 0.35},
                "final": {"accuracy": a, "loose_accuracy": la}}
               for s in range(3) for w, a, la in (("loose", 0.1 + 0.01 * s, 0.6), ("strict", 0.31, 0.33))]
    lines = tables.hacking_verdicts({"n_heldout": 200, "runs": hacking})
    assert lines[0].startswith("- loose-checker run, strict held-out at the end − at the start: -20.0 / -19.0 / "
                               "-18.0")
    assert lines[0].endswith("beyond the seed spread, by more than 10.0 pts: at the start ahead on every seed")
    assert "+1.0 / +1.0 / +1.0 pts" in lines[1] and lines[1].endswith("within the seed spread")
    assert "+50.0 / +49.0 / +48.0 pts" in lines[2]
    frontier = [{"seed": s, "placement": p, "beta": b, "accuracy": 0.8, "kl": kl}
                for s in range(3) for p, b, kl in (("none", 0.0, 1.0), ("loss", 0.2, 0.5 + 0.1 * s),
                                                   ("reward", 0.2, 0.6))]
    lines = tables.kl_frontier_verdicts({"runs": frontier}, 500)
    assert len(lines) == 5 and "+0.0 / +0.0 / +0.0 pts" in lines[0] and "(3 tied)" in lines[0]
    assert "-0.500 / -0.400 / -0.300 nats" in lines[1] and "β = 0 ahead on every seed" in lines[1]
    assert lines[4].startswith("- KL(π‖π_ref): k3 in the loss, β = 0.2 − k1 in the reward, β = 0.2: "
                               "-0.100 / +0.000 / +0.100 nats")
    trl = [{"seed": s, "variant": v, "baseline_accuracy": 0.5, "final_accuracy": f}
           for v, finals in (("course_lib `train_grpo`", (0.9, 0.8, 0.85)),
                             ("TRL `GRPOTrainer` (bridge)", (0.7, 0.95, 0.9)))
           for s, f in enumerate(finals)]
    tools = [{"variant": v, "seed": s, "final_accuracy": 0.8 + d * s, "tool_answer_logprob": lp}
             for s in range(3) for v, d, lp in (("tool, every carry demo", 0.0, -12.0),
                                                ("tool, every carry demo, env tokens in the loss", 0.01, -3.0 + s))]
    lines = tables.masking_verdicts({"runs": tools}, 500)
    assert "+9.00 / +10.00 / +11.00 nats" in lines[0] and "env tokens in the loss ahead on every seed" in lines[0]
    assert "+0.0 / +1.0 / +2.0 pts" in lines[1] and lines[1].endswith("(1 tied); within the seed spread")
    lines = tables.trl_verdicts({"runs": trl}, 500)
    assert lines[2] == ("- course_lib − TRL: +20.0 / -15.0 / -5.0 pts (seeds 0 / 1 / 2); median -5.0, range "
                        "-15.0 to +20.0; course_lib ahead on 1 of 3 seeds; within the seed spread")
