"""``m.sql(statement)``: SQL over the union of a mixture's parts, each row with its ``part``.

The views are those of a ``Consumer`` (docs/query.md), one more column in front:

- ``files``: ``part`` (the part's name), then every column of the parts' own ``files`` views, part after part
  (in the order of the parts, each part's rows by ``file_id``);
- ``documents``: ``part``, then every column of the parts' own ``documents`` views, likewise.

``file_id`` and ``doc_id`` stay each part's own (a file is ``(part, file_id)``), as in the mixture's fetches.

The engine is :class:`~consumer.query.duck.DuckSQL` (the one home of ``duckdb``: its sealed connection, statement
checks, deadline and error words), over two Arrow tables made from the parts' own answers: each part runs
``SELECT <columns> FROM files ORDER BY file_id`` (and the same over ``documents``) on its own engine, and the
columns are concatenated with ``part``. A column group is asked of the parts only when a statement first needs it,
then kept: the plain columns (ids, class, sizes, tokens, samples, header, record, offset) with the first
statement; ``path``/``extension`` when named or under a ``*``; ``description``/``mime`` (libmagic, or a store's
headers) when named or under a ``*``; the content columns (``sha256, entropy, printable, zeros, histogram``) and a
JSON record's ``json`` only when named (a ``*`` shows them as NULL until then). The byte predicates (``head``,
``contains``, ...) read one dataset's bytes, so they are not defined here: run them on a part
(``m.parts["code"].sql(...)``) or filter with :meth:`~consumer.mixtures.mixture.Mixture.where`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..consumer import Consumer
from ..errors import QueryError, short_repr
from ..query.duck import DuckSQL
from ..query.rows import Params

__all__ = ["MixtureSQL", "VIEW_COLUMNS", "check_dialect"]

VIEW_COLUMNS: dict[str, tuple[str, ...]] = {
    "files": ("part", "file_id", "path", "class", "class_id", "size", "mtime_ns", "extension", "description", "mime",
              "header", "sha256", "tokens", "samples", "entropy", "printable", "zeros", "histogram"),
    "documents": ("part", "doc_id", "file_id", "path", "record", "offset", "length", "class", "class_id", "tokens",
                  "samples", "extension", "description", "mime", "header", "sha256", "entropy", "printable", "zeros",
                  "histogram", "size", "mtime_ns", "json"),
}
"""The mixture's views and their columns, in order (``part`` first, then a part's own view's columns)."""

_KEYS = {"files": "file_id", "documents": "doc_id"}
_INTS = {"file_id", "doc_id", "class_id", "size", "mtime_ns", "tokens", "samples", "record", "offset", "length"}
_FLOATS = {"entropy", "printable", "zeros"}
_TYPES = {**{c: "BIGINT" for c in _INTS}, **{c: "DOUBLE" for c in _FLOATS}, "histogram": "BLOB"}


@dataclass
class _Group:
    """Columns asked of the parts together; ``star``: a ``*`` needs them too."""

    columns: tuple[str, ...]
    star: bool
    loaded: bool = False


def _groups() -> list[_Group]:
    return [_Group(("file_id", "doc_id", "class", "class_id", "size", "mtime_ns", "tokens", "samples", "header",
                    "record", "offset", "length"), star=True),
            _Group(("path", "extension"), star=True),
            _Group(("description", "mime"), star=True),
            _Group(("sha256", "entropy", "printable", "zeros", "histogram"), star=False),
            _Group(("json",), star=False)]


def _target(column: str) -> pa.DataType:
    """The one Arrow type of ``column`` in the union (text as ``large_string``, dictionaries decoded)."""
    if column in _INTS:
        return pa.int64()
    if column in _FLOATS:
        return pa.float64()
    if column == "histogram":
        return pa.large_binary()
    return pa.large_string()


def _plain(array: Any) -> pa.Array:
    """One column of a part's answer as a plain array (a dictionary decoded: the parts' dictionaries differ)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array


class MixtureSQL(DuckSQL):
    """The read-only DuckDB engine of a mixture's ``files`` and ``documents`` views (see the module docstring)."""

    def __init__(self, parts: dict[str, Consumer]):
        super().__init__({}, rows=0)
        self._parts = dict(parts)
        self._views: dict[str, dict[str, pa.ChunkedArray]] = {"files": {}, "documents": {}}
        self._rows_of: dict[str, list[int]] = {}
        self._groups = _groups()

    # ------------------------------------------------------------------ the tables
    def _load(self, group: _Group) -> None:
        """Ask every part for the group's columns of both views and keep them, concatenated."""
        for view, names in VIEW_COLUMNS.items():
            wanted = [c for c in group.columns if c in names and c != "part"]
            if not wanted:
                continue
            key = _KEYS[view]
            per_part: dict[str, list[pa.Array]] = {c: [] for c in wanted}
            counts = []
            for name, part in self._parts.items():
                listed = ", ".join(f'"{c}"' for c in wanted)
                try:
                    answer = part.to_arrow(f"SELECT {listed} FROM {view} ORDER BY {key}")
                except QueryError as e:
                    raise QueryError(f"part {name!r}: {e}") from e
                counts.append(answer.num_rows)
                for i, c in enumerate(wanted):
                    per_part[c].append(_plain(answer.column(i)))
            known = self._rows_of.setdefault(view, counts)
            if known != counts:  # a part's rows changed between two groups: never mix columns of two versions
                raise QueryError(f"the parts' {view} views changed size ({known} -> {counts} rows)")
            for c, chunks in per_part.items():
                t = _target(c)
                self._views[view][c] = pa.chunked_array([a.cast(t) for a in chunks], type=t)
        group.loaded = True

    def _part_column(self, view: str) -> pa.Array:
        counts = np.asarray(self._rows_of[view], dtype=np.int64)
        codes = np.repeat(np.arange(counts.size, dtype=np.int32), counts)
        return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(list(self._parts), pa.string()))

    def _publish(self, conn: Any) -> None:
        if not self._groups[0].loaded:
            self._load(self._groups[0])
        for view, names in VIEW_COLUMNS.items():
            table_name = f"consumer_mixture_{view}"
            columns = {"part": self._part_column(view), **self._views[view]}
            conn.register(table_name, pa.table(columns))
            items = ", ".join(f'"{c}"' if c in columns else f'NULL::{_TYPES.get(c, "VARCHAR")} AS "{c}"'
                              for c in names)
            conn.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT {items} FROM {table_name}")

    def _rows(self) -> int:
        return sum(self._rows_of.get("files", []))

    # ------------------------------------------------------------------ what a statement needs
    def _complete(self, conn: Any, statement: str, params: Params | None, use: Any, tree: Any) -> None:
        """Ask the parts for the column groups the statement uses (after binding it: a broken statement asks
        nothing)."""
        pending = [g for g in self._groups if not g.loaded and use.needs(set(g.columns), star_includes=g.star)]
        if not pending:
            return
        try:
            conn.execute(f"EXPLAIN {statement}", params).fetchall() if params else \
                conn.execute(f"EXPLAIN {statement}").fetchall()
        except Exception as e:  # noqa: BLE001  (duckdb's errors, given the engine's words)
            raise self._error(conn, statement, e) from None
        for group in pending:
            self._load(group)
        self._publish(conn)


def check_dialect(dialect: object) -> None:
    """A mixture's SQL runs on DuckDB only."""
    if dialect != "duckdb":
        raise QueryError(f"a mixture's sql runs on DuckDB only: dialect must be 'duckdb', got {short_repr(dialect)}")
