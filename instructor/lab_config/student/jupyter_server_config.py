# After each save, git's index learns that a lecture notebook's committed form did not change
# (tools/strip_outputs.py, refresh_index), so a lab session leaves `git status` clean.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the course's checkout, for tools/
from tools.strip_outputs import refresh_index  # noqa: E402

c.ContentsManager.post_save_hook = refresh_index  # noqa: F821 (c: the config object Jupyter provides)
