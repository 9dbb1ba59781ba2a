"""nbgrader configuration for the graded assignment ``module14`` (Q1–Q5).

Layout (relative to this file, which is the course root):
  solutions/module14/   instructor source: ### BEGIN/END SOLUTION and ### BEGIN/END HIDDEN TESTS
  exercises/module14/   the student release (`make assignment`), committed
  submitted/<student>/module14/, autograded/, feedback/   instructor state, git-ignored
  gradebook.db          sqlite gradebook, git-ignored

Use the Makefile targets (`make assignment | autograde | feedback | grades`); `make autograde`
runs student code in a sandboxed kernel (instructor/sandbox_kernel.py), and a plain
`nbgrader autograde` refuses to run without it (see the README's instructor section).
"""

import os
import sys

c = get_config()  # noqa: F821 (injected by traitlets when nbgrader loads this file)

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from instructor.nbgrader_hooks import HideHiddenTests, SandboxedExecute  # noqa: E402

c.CourseDirectory.root = ROOT
c.CourseDirectory.course_id = "learning-from-feedback"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(ROOT, "gradebook.db")

# Seconds per cell. A correct answer runs in well under a second; a loop is interrupted here,
# costs that student the cell (and the tests that depend on it), and grading moves on.
c.Execute.timeout = 30
c.Execute.interrupt_on_timeout = True

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# A deleted test cell is not put back: it earns nothing, and the autograde report lists it.
c.OverwriteCells.add_missing_cells = False

# Student code runs only through `make autograde` (sandboxed kernel); see instructor/autograde.py.
c.Autograde.autograde_preprocessors = [
    SandboxedExecute,
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Feedback: hidden-test source and the tracebacks that would quote it are removed.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    HideHiddenTests,
]
c.HideHiddenTests.source_directory = os.path.join(ROOT, "solutions")
