"""SQL over a dataset's files: the engine (``engine``), its functions (``functions``), one dataset's session
(``session``) and dataframe conversions (``frames``).
"""
