"""Tokens, documents and samples as flat numpy arrays: the vocabulary (``vocab``), the document table
(``documents``), the sample index and its samplings (``index``, ``sampling``, ``megatron_index``) and splits
by file (``split``). Nothing here opens a file.
"""
