# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (course)
#     language: python
#     name: python3
# ---

# %% tags=["colab-setup"]
# Set-up: does nothing where the course is installed (make lab). On Colab or any
# fresh runtime it installs course_lib from the course repository, keeps the
# runtime's own torch, and picks the device.
import importlib
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("course_lib") is None:
    source = os.environ.get(
        "COURSE_LIB_SOURCE",
        "git+https://github.com/learning-from-feedback/learning-from-feedback.git@main",
    )
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    # Colab runs pip as root; this silences pip's warning about it.
    env = {**os.environ, "PIP_ROOT_USER_ACTION": "ignore"}
    subprocess.run([*pip, "--no-deps", source], check=True, env=env)
    extras = ["tqdm>=4.66", "transformers>=5.15,<6"]
    subprocess.run([*pip, *extras], check=True, env=env)
    importlib.invalidate_caches()

from course_lib.tinygpt.device import on_colab, resolve_device

DEVICE = resolve_device("auto")
print(f"device: {DEVICE.type} · Colab: {'yes' if on_colab() else 'no'}")

# %% [markdown]
# # 00 · Start here
#
# **Learning from Feedback** is a notebook course on what post-training methods actually compute:
# **reward models** (networks that score an answer, fitted to comparisons with Bradley–Terry), DPO and its
# relatives, RLOO and GRPO, DAPO and Dr. GRPO, and reinforcement learning with verifiable rewards (**RLVR**:
# a program checks each answer). It follows the Module 14 lecture; every worked
# example of the lecture appears here as a number you can recompute and move with a slider. Each method
# is cited, with a link to its primary source, in the notebook that first teaches it; the
# [closing notebook](19_closing.ipynb) lists every source on one timeline.
#
# After this notebook you will be able to
#
# 1. open every notebook of the course, locally (`make lab`) or on Colab;
# 2. tell which device (CUDA GPU, Apple MPS or CPU) your runtime gives the course, and which versions it runs;
# 3. find the one place in `course_lib` where each formula lives.
#
# The cell above is the same in every notebook. Where the course is already installed it only prints
# the device; on a fresh Colab runtime it first installs `course_lib`.

# %% [markdown]
# ## The course map
#
# The cell below shows the map: every notebook, the sections of the lecture it follows and what you do
# there, then when to do the graded assignment (questions Q1–Q5) and the coding lab. It comes from
# `course_lib.lesson.course_map`, the one source of the course map in the README too.

# %%
from IPython.display import Markdown

from course_lib.lesson.course_map import notebook_map

Markdown(notebook_map())

# %% [markdown]
# The § numbers point to the sections of the Module 14 lecture for readers who have it. You do not need it:
# every idea the course uses, and every idea the assignment grades, is explained in the notebooks.
#
# The notebooks up to [Memory and rollout budgets](07_memory_and_rollout_budgets.ipynb), and
# [The passport](13_the_passport.ipynb), run in seconds on any laptop. The tiny-GPT notebooks (from
# [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb) on, including the β sweep of
# [The KL term](10_the_kl_term.ipynb)) train a small model live: minutes on a CPU, faster on a GPU.

# %% [markdown]
# ## Running the course
#
# **On your own machine.** From the repository root:
#
# ```bash
# make lab    # first time: creates .venv and installs everything; then opens JupyterLab here
# make test   # runs the test suite (it also executes every notebook)
# ```
#
# **On Colab.** Use the "Open in Colab" links in the README, or *File → Open notebook → GitHub* and
# paste the repository address. Choose *Runtime → Change runtime type → GPU* for the last section of
# [Graduating to TRL](18_graduating_to_trl.ipynb), which trains a real instruct model; the tiny-GPT notebooks also put
# their model on the GPU when there is one (tested on a CPU only: no GPU has run them yet). Then run the first cell: it
# installs `course_lib` without touching Colab's own PyTorch build, and reports the device it found.
#
# **How the notebooks are stored.** Each notebook is a pair: a `.py` file in the "percent" format
# (the source of truth, easy to diff and review) and the `.ipynb` you open. `make sync` rebuilds the
# `.ipynb` from the `.py` after an edit; a test fails when the two drift apart.

# %% [markdown]
# ## Environment check
#
# `course_lib.tinygpt.device.environment_report` collects versions and hardware in one dictionary. The device
# rule is the one every trainer in the course uses: CUDA when present, then Apple's MPS, else the CPU.

# %%
import torch

from course_lib.tinygpt.device import environment_report, resolve_device

report = environment_report()
width = max(len(key) for key in report)
for key, value in report.items():
    print(f"{key:<{width}}  {value}")

# %%
device = resolve_device("auto")
x = torch.randn(256, 256, device=device)
checksum = float((x @ x.T).trace().cpu() / (x.pow(2).sum().cpu()))  # trace(XXᵀ) = ‖X‖²
print(f"a matrix product on {device.type}: trace(XXᵀ)/‖X‖² = {checksum:.4f} (should be 1.0000)")

# %% [markdown]
# If `device` says `cpu` on Colab, the runtime has no GPU attached: the exact notebooks do not need one, and
# the tiny-GPT notebooks still run, only slower.

# %% [markdown]
# ## Where the formulas live
#
# Each formula of the lecture has exactly one home in `course_lib`; the notebooks derive it step by step
# for teaching and then call the library to check themselves. The tiny GPT trains with the same functions.
#
# | module | lecture § (pointer) | examples |
# |---|---|---|
# | `course_lib.formulas.preference` | §3, §5–§8 | `bt_probability`, `win_rate_to_gap`, `reward_model_loss`, `dpo_terms`, `ipo_loss`, `simpo_loss`, `orpo_loss`, `kto_loss` |
# | `course_lib.formulas.advantages` | §9, §12 | `grpo_advantages`, `rloo_advantages`, `dr_grpo_advantages`, `zero_variance_groups`, `zero_variance_probability`, `baseline_gradient` |
# | `course_lib.formulas.policy_loss` | §9, §12 | `clipped_surrogate`, `aggregate`, `kl_estimate` |
# | `course_lib.formulas.budgets` | §10–§11 | `stage_memory_gib`, `rollout_generation_seconds`, `update_seconds` |
#
# `course_lib.lesson.explore` holds the widgets the notebooks share (the *Predict* questions and the explorers).
#
# A first taste: each line below is one worked example, computed by the library; the notebook in brackets
# derives it.

# %%
from course_lib.formulas.advantages import zero_variance_probability
from course_lib.formulas.budgets import stage_memory_gib
from course_lib.formulas.preference import bt_probability, dpo_terms

taste = {
    "P(win) for a score gap of 1 (Bradley–Terry)": f"{bt_probability(1.0):.3f}",
    "DPO loss of pair I (DPO margins)": f"{dpo_terms(-12.0, -11.5, -13.0, -10.8, beta=0.1).loss:.4f}",
    "P(zero-variance group), p=0.3, G=8 (group baselines)": f"{zero_variance_probability(0.3, 8):.4f}",
    "PPO persistent memory, 8.03B params (budgets)": f"{stage_memory_gib(8.03e9, 'ppo'):.1f} GiB",
}
for name, value in taste.items():
    print(f"{name:<54} {value}")

# %% [markdown]
# ## Check yourself
#
# 1. The report says `device  cpu` on Colab. What do you change, and which notebooks care?
#    <details><summary>Answer</summary>
#    Runtime → Change runtime type → a GPU, then rerun the first cell. The last section of
#    [Graduating to TRL](18_graduating_to_trl.ipynb) needs it; the tiny-GPT notebooks put their model on
#    it (whether they run faster there is not measured: their steps are small, see
#    [Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb), section 7); the others are small exact calculations.
#    </details>
# 2. You edited `notebooks/02_dpo_margins.py`. What keeps the `.ipynb` in step?
#    <details><summary>Answer</summary>
#    `make sync` (Jupytext) rewrites the paired notebook; the test suite fails if you forget.
#    </details>
# 3. Why does the set-up cell not install PyTorch on Colab?
#    <details><summary>Answer</summary>
#    Colab ships a PyTorch build that matches its GPU driver. Reinstalling torch would download a large
#    wheel and could replace the CUDA build with one that does not see the GPU.
#    </details>
