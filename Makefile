# Learning from Feedback — two commands set everything up on a fresh machine (Python 3.11+):
#   make lab    JupyterLab on the course (creates .venv on first use)
#   make test   the whole test suite (creates .venv on first use); first installs the system packages
#               its tests need (bubblewrap, chromium) when it can, else stops with the command to type
# Instructor targets: make assignment | roster CSV=f | collect | autograde [STUDENT=id] [JOBS=n] [REDRAW=1] |
#   formgrader [PORT=n] | feedback | grades | student-repo DEST=dir (see docs/instructors.md);
#   each takes ASSIGNMENT=module14 (default), systems14 or lab14.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
# This machine and CI take the CPU wheel on disk; the package itself only asks for a range.
TORCH_PIN ?= torch==2.13.0
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: venv lab test lint sync bench site colab-check assignment roster collect autograde formgrader feedback grades \
        similarity student-repo clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[dev,lab,trl]" "$(TORCH_PIN)"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (course)" >/dev/null
	touch $(STAMP)

# Students' JupyterLab: nbgrader's Validate button, none of its instructor tools, no news pop-up, each
# lecture notebook listed once (instructor/lab_config); git leaves out what the lab saves (tools/strip_outputs.py).
lab: $(STAMP)
	$(PY) -m tools.strip_outputs --install
	JUPYTER_CONFIG_DIR="$(CURDIR)/instructor/lab_config/student" PATH="$(CURDIR)/$(BIN):$$PATH" \
	  $(BIN)/jupyter lab --notebook-dir=. $(ROOT_FLAG) notebooks/00_start_here.ipynb

# Two workers (pytest-xdist); tests/conftest.py groups the files that must share one worker and
# starts the longest first (no reordering by test count). `pytest tests/x.py` alone stays serial.
test:
	bash tools/system_packages.sh test
	@$(MAKE) --no-print-directory venv
	$(BIN)/ruff check .
	$(PY) -m pytest -n 2 --dist loadgroup --no-loadscope-reorder

lint: $(STAMP)
	$(BIN)/ruff check .

# Re-pair every lecture notebook from its py:percent source (the .py is the source of truth),
# after refreshing each notebook's first cell from course_lib/lesson/colab.py (the Colab set-up cell);
# then rewrite the course map in README.md and docs/ from course_lib/lesson/course_map.py, and the module map
# in docs/library.md from course_lib's docstrings.
sync: $(STAMP)
	$(PY) -m course_lib.lesson.colab notebooks/*.py
	$(BIN)/jupytext --sync notebooks/*.py
	$(PY) -m tools.course_map
	$(PY) -m tools.module_map

# The rendered course in _site/: every notebook executed with the full budget (what a student runs;
# FAST=1: CI's quick budget) and converted to HTML. Executed notebooks are cached in .site-cache/, so
# a rebuild runs only the notebooks whose file, course_lib or shown benchmark results changed.
site: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m tools.build_site $(if $(filter 1,$(FAST)),--fast,) --out _site

# Every lecture notebook on Colab's package versions (tools/colab_versions.txt), course_lib installed by
# the notebook's own set-up cell, at COURSE_FAST=1: tools/colab_check.json (NB="00_start_here
# 09_tiny_gpt_grpo": only those, results to test-artifacts/). tests/test_colab.py runs 00, 01, 05 and 09.
colab-check: $(STAMP)
	$(PY) -m tools.colab_check $(if $(NB),--notebooks $(NB) --out test-artifacts/colab_check.json,)

# Every benchmark writes benchmarks/results/<name>.json; tables.py renders the tables in docs/ from them.
# run_all.py re-runs the benchmarks whose results do not record the code now checked out (--status: which).
bench: $(STAMP)
	$(PY) benchmarks/run_all.py $(BENCH)
	$(PY) benchmarks/tables.py

# Instructor workflow for a graded assignment, ASSIGNMENT=module14 | systems14 | lab14
# (docs/instructors.md). nbgrader shells out to `alembic`, so the environment's bin/ goes first on PATH.
ASSIGNMENT ?= module14
NBG_PATH := PATH="$(CURDIR)/$(BIN):$$PATH"
# $(call shq,VALUE): VALUE as one shell word, whatever it holds (STUDENT='x;touch /tmp/P' runs nothing)
shq = '$(subst ','\'',$(1))'

assignment: $(STAMP)
	$(NBG_PATH) $(BIN)/nbgrader generate_assignment $(call shq,$(ASSIGNMENT)) --force

# The class list from Canvas's gradebook export (CSV=path): gradebook students and roster.csv.
roster: $(STAMP)
	$(if $(CSV),,$(error CSV=path/to/canvas_export.csv is required))
	$(NBG_PATH) $(PY) -m instructor.roster import "$(CSV)"

# A Canvas "Download Submissions" zip in downloaded/$(ASSIGNMENT)/archive/ -> submitted/ (instructor/collect.py).
collect: $(STAMP)
	$(NBG_PATH) $(BIN)/nbgrader zip_collect $(call shq,$(ASSIGNMENT)) --force

# New and changed submissions (STUDENT=id: that one; REGRADE=1: everyone), sandboxed (bubblewrap),
# JOBS at once (default: the machine's cores, os.cpu_count(); not nproc, which follows OMP_NUM_THREADS);
# REDRAW=1 draws new hidden inputs instead of the stored seeds.
autograde:
	bash tools/system_packages.sh autograde
	@$(MAKE) --no-print-directory venv
	$(NBG_PATH) $(PY) -m instructor.autograde --assignment $(call shq,$(ASSIGNMENT)) $(if $(JOBS),--jobs $(call shq,$(JOBS)),) \
	  $(if $(STUDENT),--student $(call shq,$(STUDENT)),) $(if $(REGRADE),--all,) $(if $(REDRAW),--redraw,)

# Hand grading: JupyterLab with nbgrader's formgrader (Nbgrader → Formgrader), as root or a user.
# On a headless server: make formgrader PORT=8890 (no browser; open the printed URL through an SSH tunnel).
formgrader: $(STAMP)
	JUPYTER_CONFIG_DIR="$(CURDIR)/instructor/lab_config/formgrader" $(NBG_PATH) \
	  $(BIN)/jupyter lab --notebook-dir=. $(ROOT_FLAG) --ServerApp.default_url=/formgrader \
	  $(if $(PORT),--ServerApp.port=$(PORT) --ServerApp.open_browser=False --ServerApp.ip=127.0.0.1,)

# feedback/<student>/$(ASSIGNMENT)/*.html, one process per student within time and memory limits
# (instructor/feedback.py): a page that cannot be made is a short page saying so. STUDENT=id: that one.
feedback: $(STAMP)
	$(NBG_PATH) $(PY) -m instructor.feedback --assignment $(call shq,$(ASSIGNMENT)) $(if $(JOBS),--jobs $(call shq,$(JOBS)),) \
	  $(if $(STUDENT),--student $(call shq,$(STUDENT)),)

# grades/$(ASSIGNMENT)/grades.csv (every student) and canvas.csv (Canvas's import file, from the roster).
grades: $(STAMP)
	$(NBG_PATH) $(PY) -m instructor.export_grades --assignment $(call shq,$(ASSIGNMENT)) \
	  $(if $(CANVAS_COLUMN),--canvas-column "$(CANVAS_COLUMN)",)

# similarity-report.md/.json: answer code compared pairwise and against solutions/ (review only;
# THRESHOLD=0.8 by default, instructor/similarity.py).
similarity: $(STAMP)
	$(PY) -m instructor.similarity --assignment $(call shq,$(ASSIGNMENT)) $(if $(THRESHOLD),--threshold $(THRESHOLD),)

# A repository for students (DEST=dir): one fresh commit, without solutions/, the hidden checks and
# the tests that need them (tools/student_repo.py). STUDENT_REPO=owner/name: Colab links point there.
student-repo: $(STAMP)
	$(if $(DEST),,$(error DEST=path/of/the/new/repository is required))
	$(PY) -m tools.student_repo "$(DEST)" $(if $(STUDENT_REPO),--repo "$(STUDENT_REPO)",)

clean:
	rm -rf .pytest_cache .ruff_cache .hypothesis runs test-artifacts _site
