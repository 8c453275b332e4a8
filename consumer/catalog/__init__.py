"""The durable catalog: one SQLite row per file ever seen (``catalog``, ``file``, ``rows``), the file-type
headers made from libmagic's results (``headers``), the content pass (``content``) and duplicates
(``duplicates``).
"""
