"""Small helpers every layer uses: argument checks (``validate``), random streams (``seeds``), progress bars
(``progress``), atomic files (``fileio``) and flattened ranges (``ranges``). They import nothing of the
engine but ``errors``.
"""
