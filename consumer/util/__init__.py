"""Small helpers every layer uses: argument checks (``validate``), random streams (``seeds``), progress bars
(``progress``) and atomic files (``fileio``). They import nothing of the engine but ``errors``.
"""
