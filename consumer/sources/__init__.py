"""Where bytes come from: the user's input forms turned into a corpus (``corpus``), paths kept as one packed
blob (``paths``), local files, objects behind URLs (``urls``: file systems and listings; ``range_reader``,
``requests``, ``request_plan``, ``block_cache``, ``cloud``: concurrent verified range reads), packed-store token
data read by ranges (``remote_tokens``) and libmagic (``magic``, ``object_magic``: descriptions from a path or
from byte ranges).
"""
