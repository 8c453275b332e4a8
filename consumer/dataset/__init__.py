"""Making a dataset: the build pipeline (``build``), the index cache (``cache``), one build shared by
torch.distributed ranks (``shared``, ``ranks``), its description as a dict / JSON (``export``) and its
display (``display``).
"""
