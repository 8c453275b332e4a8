"""Benchmarks of ``consumer`` against the loaders users would pick instead: ``python -m benchmarks run --quick``.

Two ways in, one set of measurements:

- **probes** (:mod:`~benchmarks.registry`, modules in :mod:`~benchmarks.probes`): one measurement each, run alone
  with ``python -m benchmarks probe NAME [ARGS]`` (``probe --list`` lists them), writing one JSON schema;
- **the suite** (:mod:`~benchmarks.suite` and :mod:`~benchmarks.suite_probes`, sections run by
  :mod:`~benchmarks.sections`): every section of ``docs/benchmarks.md`` in one run; a section measured by a probe
  calls that probe's code. Each section's table and targets sit together: :mod:`~benchmarks.views` for the suite's
  own sections, the probe module for the others; :mod:`~benchmarks.report` puts them in order.

Helpers: :mod:`~benchmarks.corpora` (seeded corpora), :mod:`~benchmarks.measure` (timing primitives, device reads,
cache eviction of the benchmark's own files), :mod:`~benchmarks.naive` (hand-written readers),
:mod:`~benchmarks.systems` (what is measured in this process), :mod:`~benchmarks.children` (fresh build
processes), :mod:`~benchmarks.peers` (peer loaders in their own processes and venvs), :mod:`~benchmarks.plots`,
:mod:`~benchmarks.markdown`, :mod:`~benchmarks.cli`.
Importing this package imports nothing heavy: peer processes load it with only numpy available.
"""
