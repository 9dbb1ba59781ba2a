"""course_lib: one home per formula for the Learning from Feedback course (Module 14).

Its folders are the library's floors, each importing only from the floors below it (a folder's
``__init__`` states its rule and ``MAY_IMPORT``; ``tests/test_import_graph.py`` checks every
import against them, and that there is no import cycle):

- ``formulas``  the lectures' formulas on plain tensors (losses, advantages, KL, budgets);
- ``tinygpt``   the tiny GPT's world: task, model, sampling, rewards, environments, run plumbing;
- ``lesson``    the notebooks' helpers (widgets, glossary, sources, Colab, the course map);
- ``trainers``  the one training loop, its registry and configs, one file per trainer;
- ``run``       runs end to end: the pipeline, recipes, passport, seeds, cached starts, experiments;
- ``trl``       the bridge to Hugging Face TRL (optional extra).

``_validate`` (argument checks) is the floor every folder may import; ``__main__`` (the command line,
``python -m course_lib``) is the roof. Modules are named after the lecture's ideas. The module map,
one line per module from its own docstring, is generated into ``docs/library.md``
(``python -m tools.module_map``).
"""

__version__ = "0.1.0"
