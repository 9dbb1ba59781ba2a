"""Widgets the lecture notebooks share: a prediction committed before the reveal, and explorers.

Two small tools, kept here so that every notebook uses the same ones:

- ``predict``: a multiple-choice question whose answer stays hidden until the student has
  chosen an option and pressed *Reveal* (predict before you look).
- ``figure_png`` and ``readout``: an explorer shows its figure as the bytes of a PNG in an
  ``ipywidgets.Image`` and its numbers in an ``ipywidgets.HTML``. Both are widget *state*, sent
  with the widget itself. Printing and ``plt.show()`` inside an ``Output`` widget instead send
  separate messages that a busy front end can miss on the first render (charts then appear
  only after a slider moves).

Simplification: no styling beyond what ipywidgets ships; the widgets degrade to their text
in a notebook viewer without a kernel.
"""

from __future__ import annotations

import html
import io

import ipywidgets as widgets
import matplotlib.pyplot as plt

__all__ = ["figure_png", "predict", "readout"]


def figure_png(fig, dpi: int = 100) -> bytes:
    """The figure as PNG bytes on a white background (never transparent), then closed."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, facecolor="white", bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def readout(lines) -> str:
    """HTML for an explorer's text lines (monospace, one per line, escaped)."""
    if isinstance(lines, str):
        lines = [lines]
    body = "\n".join(html.escape(str(line)) for line in lines)
    return f'<pre class="course-readout" style="margin:0">{body}</pre>'


def predict(question: str, options, answer, explanation: str) -> widgets.VBox:
    """A question to answer *before* the next cell reveals the result.

    ``options`` are the choices shown (strings); ``answer`` must be one of them. Nothing is
    selected at first; *Reveal* shows whether the choice was right and ``explanation``.
    """
    options = [str(o) for o in options]
    if len(options) < 2:
        raise ValueError(f"options must hold at least two choices; got {options!r}")
    if str(answer) not in options:
        raise ValueError(f"answer must be one of options {options}; got {answer!r}")
    choice = widgets.RadioButtons(options=options, value=None, layout={"width": "max-content"})
    button = widgets.Button(description="Reveal", button_style="info")
    verdict = widgets.HTML("")

    def reveal(_=None):
        if choice.value is None:
            verdict.value = "<i>Commit to a prediction first, then press Reveal.</i>"
            return
        mark = "✔ right" if choice.value == str(answer) else f"✘ the answer is {html.escape(str(answer))}"
        verdict.value = f"<b>{mark}.</b> {html.escape(explanation)}"

    button.on_click(reveal)
    return widgets.VBox([widgets.HTML(f"<b>Predict:</b> {html.escape(question)}"), choice, button, verdict])
