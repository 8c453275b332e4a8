"""Eight processes build, re-index after edits, run content SQL and pack on one cache directory at once.

Half the processes ask for every file, half for two of the three classes (two index entries over one
catalog). No error reaches any process, every process sees the rows a process alone without a cache sees
(and packs the same store, also when all the processes of a dataset pack to one prefix at once), every
libmagic column and every content pass of a file version is computed once in all (not once per process),
one process builds each index cache entry while the others wait for it and open it, and the cache
directory passes its integrity checks afterwards (``PRAGMA integrity_check``, every
row's check, every index entry's digests, nothing left behind or moved aside). The checks are
``tests/helpers/many_processes.py``'s; ``python -m benchmarks probe many_processes --runs 20`` runs the same thing
20 times in a row (see docs/reliability.md).
"""

from __future__ import annotations

from ..helpers.many_processes import problems, run


def test_eight_processes_on_one_cache(tmp_path):
    result = run(tmp_path, workers=8, files=120, every=10)
    assert result["edited"] == 12
    assert problems(result, tmp_path / "cache") == []
