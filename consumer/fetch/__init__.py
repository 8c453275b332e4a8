"""``ds[key]`` -> tensors: selections to sample ids (``select``), sample ids to token rows (``reader``), query
columns and masking (``columns``), one dataset's fetches (``fetcher``) and torch tensors (``collate``, the one
place torch is imported on this path).
"""
