"""Benchmarks of ``consumer`` against the loaders users would pick instead: ``python -m benchmarks run --quick``.

One module per job: :mod:`~benchmarks.corpora` (seeded corpora), :mod:`~benchmarks.measure` (timing
primitives), :mod:`~benchmarks.naive` (hand-written readers), :mod:`~benchmarks.systems` (what is measured
in this process), :mod:`~benchmarks.peers` (peer loaders in their own processes), :mod:`~benchmarks.suite`
(the run), :mod:`~benchmarks.report` and :mod:`~benchmarks.plots` (the output), :mod:`~benchmarks.cli`.
Importing this package imports nothing heavy: peer processes load it with only numpy available.
"""
