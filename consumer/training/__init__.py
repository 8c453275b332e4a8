"""Feeding torch training loops: the one batch order (``plan``: epoch plans for ranks, class balance and token
budgets from ``budget``), the dataset's cursor over it (``sampler``), the versioned state both write (``state``),
the resumable DataLoader (``loader``) and its shared-memory worker pool (``workers``).
"""
