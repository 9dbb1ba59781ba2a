"""The notebooks' helpers: widgets, the glossary, the primary sources, Colab, the course map.

Layer rule: imports ``formulas`` and ``tinygpt`` only; no trainer and no run. What a lecture
notebook needs besides the library's results.
"""

MAY_IMPORT = ("formulas", "tinygpt")
