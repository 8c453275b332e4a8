"""The registered probes: one module per measurement (see :mod:`benchmarks.registry` for the contract).

Run one with ``python -m benchmarks probe NAME [ARGS]``; list them with ``python -m benchmarks probe --list``.
Modules whose names start with ``_`` are helpers shared by probes, not probes.
"""
