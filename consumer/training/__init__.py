"""Feeding torch training loops: the one batch order (``plan``: epoch plans for ranks, class balance and token
budgets from ``budget``), the dataset's cursor over it (``sampler``), the versioned state both write (``state``),
the resumable DataLoader (``loader``, handing ``requests`` to torch) and its worker pool (``workers``, over the
shared-memory ``ring``).
"""
