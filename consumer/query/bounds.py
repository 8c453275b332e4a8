"""What one function call of a DuckDB statement may build: the bound that makes a ``timeout`` hold.

DuckDB looks at an interrupt between two vectors of (up to 2,048) rows, and folds constant expressions while it
plans; neither can stop one function call that builds a value of gigabytes (``repeat('x', 3000000000)`` ran for
tens of seconds past its timeout, and ``memory_limit`` does not count such a string). So the engine shadows the
functions whose result size is set by a number with macros that refuse, before anything is built, a value larger
than :data:`MAX_GENERATED_BYTES` (a :class:`~consumer.errors.QueryError` naming the function and the size):

- ``repeat(s, n)``: the size of ``s`` (its text form for a list) times ``n``;
- ``lpad(s, n, fill)``, ``rpad(s, n, fill)``: ``n`` characters of up to 4 bytes;
- ``list_resize(l, n[, v])``, ``array_resize(l, n[, v])``, ``range(n)``, ``generate_series(n)`` (the scalar
  forms that return a list): ``n`` elements of 8 bytes;
- ``format(f, ...)``, ``printf(f, ...)`` (up to 8 arguments): no number in the format string (a width or a
  precision) above the cap.

One vector then builds at most 2,048 such values (about 128 MiB with the default cap), which is what bounds the
time a statement runs past its timeout (the margin in ``docs/query.md``). The table functions ``range`` and
``generate_series`` in ``FROM`` stream their rows and are not affected.
"""

from __future__ import annotations

import duckdb

__all__ = ["GUARDED_FUNCTIONS", "MAX_GENERATED_BYTES", "TIMEOUT_MARGIN_SECONDS", "bound_generators"]

MAX_GENERATED_BYTES = 64 * 2**10
"""Largest value one call of a guarded function may build (bytes, or an estimate for lists and padding)."""

TIMEOUT_MARGIN_SECONDS = 2.0
"""How long a statement may run past its ``timeout`` (measured: at most 1.2 s, see ``docs/query.md``)."""

_MAX_FORMAT_ARGS = 8


def _guard(name: str, size: str, value: str) -> str:
    """``value`` when ``size`` is within the cap, else DuckDB's ``error()`` naming ``name`` and the size."""
    cap = MAX_GENERATED_BYTES
    return (f"CASE WHEN ({size}) > {cap} THEN error('{name}(): the result would be ' || ({size}) || ' bytes, "
            f"more than the cap of {cap} bytes per value (consumer.query.bounds.MAX_GENERATED_BYTES)') "
            f"ELSE {value} END")


def _format_macro(name: str) -> str:
    """``name(f, ...)`` for 0 to :data:`_MAX_FORMAT_ARGS` arguments, with the largest number of ``f`` checked."""
    widest = "coalesce(list_max(list_transform(regexp_extract_all(f, '[0-9]+'), lambda x: x::HUGEINT)), 0)"
    overloads = []
    for k in range(_MAX_FORMAT_ARGS + 1):
        args = [f"a{i}" for i in range(k)]
        checked = _guard(name, widest, "f")
        overloads.append(f"({', '.join(['f', *args])}) AS system.main.{name}({', '.join([checked, *args])})")
    return ", ".join(overloads)


def _macros() -> dict[str, str]:
    text = "strlen(s::VARCHAR)::HUGEINT"
    n_elements = "n::HUGEINT * 8"
    out = {
        "repeat": f"(s, n) AS system.main.repeat(s, {_guard('repeat', f'{text} * n', 'n')})",
        "lpad": f"(s, n, fill) AS system.main.lpad(s, {_guard('lpad', 'n::HUGEINT * 4', 'n')}, fill)",
        "rpad": f"(s, n, fill) AS system.main.rpad(s, {_guard('rpad', 'n::HUGEINT * 4', 'n')}, fill)",
        "range": f"(n) AS system.main.range({_guard('range', n_elements, 'n')})",
        "generate_series": f"(n) AS system.main.generate_series({_guard('generate_series', n_elements, 'n')})",
        "format": _format_macro("format"),
        "printf": _format_macro("printf"),
    }
    for name in ("list_resize", "array_resize"):
        checked = _guard(name, n_elements, "n")
        out[name] = f"(l, n) AS system.main.{name}(l, {checked}), (l, n, v) AS system.main.{name}(l, {checked}, v)"
    return out


GUARDED_FUNCTIONS = frozenset(_macros())
"""The functions the engine shadows (see the module docstring)."""


def bound_generators(conn: duckdb.DuckDBPyConnection) -> None:
    """Shadow :data:`GUARDED_FUNCTIONS` on ``conn`` with their checked macros (before ``lock_configuration``), in
    one call (one statement a macro: 11 ms against 6 ms)."""
    conn.execute(";\n".join(f"CREATE OR REPLACE TEMP MACRO {name}{body}" for name, body in _macros().items()))
