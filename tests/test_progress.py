"""Progress bars in an executed notebook: the saved output is the bar's final state, not its first "0%"."""

from __future__ import annotations

import nbformat
from conftest import ROOT
from nbclient import NotebookClient
from tqdm.notebook import tqdm as notebook_tqdm

from course_lib.tinygpt.runtime import progress


def test_an_executed_notebook_saves_the_finished_bar_not_its_first_frame():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from course_lib.tinygpt.runtime import progress\n"
        "bar = progress(5, 'demo')\n"
        "for _ in range(5):\n"
        "    bar.update(1)\n"
        "bar.close()\n"
        "print(type(bar).__name__)")]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = nb.cells[0].outputs
    texts = [o["data"]["text/plain"] for o in outputs if o["output_type"] == "display_data"]
    assert len(texts) == 1 and texts[0].startswith("demo: 100%") and "5/5" in texts[0]
    assert not any("0%|" in t and "100%" not in t for t in texts)
    assert outputs[-1]["text"].strip() == "_NotebookBar"  # Jupyter's widget bar, not the terminal one


def test_outside_jupyter_the_bar_is_plain_tqdm_and_disabled_bars_do_nothing(capsys):
    bar = progress(3, "quiet", enabled=False)
    bar.update(3)
    bar.close()
    assert not isinstance(bar, notebook_tqdm) and capsys.readouterr().err == ""


def test_a_grpo_progress_bar_names_the_run(capsys):
    """Notebook 09's DAPO run is a train_grpo call: its bar says DAPO, not grpo[grpo]."""
    import dataclasses

    import torch

    from course_lib.tinygpt.model import build_model
    from course_lib.tinygpt.task import AdditionTask
    from course_lib.trainers.configs import get_config
    from course_lib.trainers.grpo import train_grpo

    cfg = get_config("test")
    task = AdditionTask(cfg.task)
    g = dataclasses.replace(cfg.grpo, steps=1, eval_every=100)
    for name, label in ((None, "grpo[grpo]"), ("DAPO", "DAPO")):
        torch.manual_seed(0)
        train_grpo(build_model(cfg.model, task.tokenizer), task, g, generator=torch.Generator().manual_seed(0),
                   eval_fn=lambda m: {"accuracy": 0.0}, name=name)
        bar = capsys.readouterr().err
        assert bar.lstrip("\r").startswith(f"{label}: "), bar
