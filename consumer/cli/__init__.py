"""The ``consumer`` command line: the parser (``main``), one function per command (``commands``, with the demo in
``demo`` and the store commands in ``store``), opening a dataset (``opening``) and printing (``output``).
"""

from .main import main, stdlib_corpus

__all__ = ["main", "stdlib_corpus"]
