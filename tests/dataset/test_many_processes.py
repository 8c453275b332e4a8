"""Eight processes build, re-index after edits, run content SQL and pack on one cache directory at once.

No error reaches any process, every process sees the rows a process alone without a cache sees, every
libmagic column and every content pass of a file version is computed once in all (not once per process),
one process builds each index cache entry while the others wait for it and open it, and the cache directory
passes its integrity checks afterwards. ``python -m benchmarks.bench_many_processes --runs 20`` runs the same
thing 20 times in a row (see docs/reliability.md).
"""

from __future__ import annotations

from ..many_processes import integrity, run

WORKERS = 8
FILES = 120
EVERY = 10  # every 10th file is rewritten between the phases


def test_eight_processes_on_one_cache(tmp_path):
    result = run(tmp_path, workers=WORKERS, files=FILES, every=EVERY)
    errors = [r["error"] for ph in (1, 2) for r in result["phases"][ph] if "error" in r]
    assert not errors, errors[0]
    assert result["exitcodes"] == [0] * WORKERS
    edited = result["edited"]
    for phase, files in ((1, FILES), (2, edited)):
        res = result["phases"][phase]
        rows, store = result["truth"][phase]
        for r in res:  # every process sees exactly the rows of a process alone
            assert r["rows"] == rows and r["store"] == store and r["checksum"] == "ok"
        # computed once in all: description and MIME type of each new file version, its content pass once
        assert sum(r["libmagic"] for r in res) == 2 * files, [r["libmagic"] for r in res]
        assert sum(r["content"] for r in res) == files, [r["content"] for r in res]
        outcomes = sorted(r["cache"] for r in res)
        assert outcomes == ["hit"] * (WORKERS - 1) + ["miss"], outcomes  # one builds, the others open its entry
    assert integrity(tmp_path / "cache") == []
