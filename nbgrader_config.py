"""nbgrader configuration for the graded assignments ``module14`` (Q1–Q5), ``systems14`` (Q6–Q8) and ``lab14``.

Layout (relative to this file, which is the course root), for each assignment (module14 here):
  solutions/module14/   instructor source: ### BEGIN/END SOLUTION; test cells hold the visible tests
  instructor/checks/module14.py   what grading checks (visible and hidden) in each test cell
  exercises/module14/   the student release (`make assignment ASSIGNMENT=...`), committed
  downloaded/<assignment>/archive/   the LMS's zip (`make collect`), git-ignored
  submitted/<student>/module14/, autograded/, feedback/, grades/   instructor state, git-ignored
  gradebook.db, roster.csv, deadlines.toml   gradebook, class list, due dates: git-ignored

Use the Makefile targets (`make assignment | roster | collect | autograde | formgrader | feedback | grades`);
`make autograde` runs student code in a sandboxed kernel (instructor/sandbox_kernel.py), and a plain
`nbgrader autograde` refuses to run without it. Verdicts are decided outside the kernel
(instructor/grading.py); see docs/instructors.md and instructor/README.md.
"""

import os
import sys

c = get_config()  # noqa: F821 (injected by traitlets when nbgrader loads this file)

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from instructor.collect import CanvasCollector, TimedExtractor  # noqa: E402
from instructor.deadlines import LatePenalty  # noqa: E402
from instructor.nbgrader_hooks import (  # noqa: E402
    CheckCellMetadata,
    DecideVerdicts,
    FeedbackFilter,
    InjectProbes,
    SandboxedExecute,
)

c.CourseDirectory.root = ROOT
c.CourseDirectory.course_id = "learning-from-feedback"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
# A writer waits for another (parallel grading jobs, two instructors) instead of failing.
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(ROOT, "gradebook.db") + "?timeout=120"

# This course hands out and collects notebooks without nbgrader's exchange. The formgrader still
# checks the exchange folder when it opens; a private, git-ignored one keeps that check quiet (the
# default /usr/local/share/nbgrader/exchange logs "Unwritable directory" as CRITICAL).
c.Exchange.root = os.path.join(ROOT, ".exchange")
os.makedirs(c.Exchange.root, exist_ok=True)

# Seconds per cell. A correct answer runs in well under a second; a loop is interrupted here,
# costs that student the cell (and the tests that depend on it), and grading moves on. A kernel
# that ignores the interrupt, dies, or runs past the notebook's budget is stopped; the cells left
# are "not run" (0 points, with that reason in the report and the feedback).
c.Execute.timeout = 30
c.SandboxedExecute.notebook_timeout = 300

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# `make autograde` rebuilds every submission around the source's cells before nbgrader sees it
# (instructor/submission.py): a deleted test cell is put back, a duplicate dropped, metadata restored.
c.OverwriteCells.add_missing_cells = False

# Student code runs only through `make autograde` (sandboxed kernel); verdicts are decided in this
# process from plain data (instructor/grading.py), then SaveAutoGrades writes them to the gradebook.
c.Autograde.autograde_preprocessors = [
    InjectProbes,
    SandboxedExecute,
    DecideVerdicts,
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    CheckCellMetadata,
]
# nbgrader's sanitising steps, with the same metadata check as above (instructor/nbgrader_hooks.py)
c.Autograde.sanitize_preprocessors = [
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells",
    CheckCellMetadata,
]

c.InjectProbes.source_directory = os.path.join(ROOT, "solutions")

# Late work (instructor/deadlines.py): due dates, extensions and the penalty per day from
# deadlines.toml; `make autograde` writes them into the gradebook and nbgrader's AssignLatePenalties
# step (above) asks this plug-in for each notebook's penalty.
c.AssignLatePenalties.plugin_class = LatePenalty
c.LatePenalty.course_root = ROOT

# `make collect`: nbgrader's zip_collect on a Canvas download in downloaded/<assignment>/archive/
# (instructor/collect.py): the zip's times kept, Canvas file names read, the newest resubmission kept.
c.ZipCollectApp.extractor_plugin = TimedExtractor
c.ZipCollectApp.collector_plugin = CanvasCollector
c.CanvasCollector.course_root = ROOT

# Feedback: test cells show the visible test and the verdict (why a test scored 0); outputs of the
# student's cells that ran after hidden inputs reached the kernel are not shown.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    FeedbackFilter,
]
