"""The ``consumer`` command line: the parser (``main``) and one function per command (``commands``).
"""

from .main import main, stdlib_corpus

__all__ = ["main", "stdlib_corpus"]
