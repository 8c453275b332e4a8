"""One dataset's SQL session: its catalog (opened when first needed) and its read-only ``files`` view.

:class:`SQLSession` is what ``ds.sql()``, ``ds.where()``, ``ds.to_arrow()`` and ``ds.catalog`` use. Statements
run on the DuckDB engine (:class:`~consumer.query.duck.DuckSQL`) over the dataset's own arrays as Arrow columns
(:func:`~consumer.query.table.dataset_columns`); the libmagic columns (one pass for ``description`` and
``mime``, cached in the catalog) and the content columns are computed by the session's loaders the first time
a statement needs them, and a statement that names neither never opens the catalog. A packed dataset never
touches its source files: its ``description``/``mime`` come from the store's headers.

``dialect="sqlite"`` runs a statement on the 0.2 engine instead (:class:`~consumer.query.sqlite.DatasetSQL`:
a TEMP table filled per file, then SQLite), for statements written in SQLite's dialect.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..catalog.catalog import CATALOG_NAME, Catalog, display_path, path_key
from ..catalog.content import CONTENT_COLUMNS, source_computer
from ..catalog.duplicates import DuplicateGroup, catalog_sha256s, find_duplicates
from ..errors import QueryError, SelectionError, short_repr
from ..sources.base import ByteSource
from ..sources.paths import PathList
from ..sources.store import TokenData
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex
from .arrays import dictionary
from .bytefuncs import ByteFunctions
from .documents import record_relations
from .export import conform, file_ids_of, files_statement
from .rows import Params, Rows
from .sqlite import DatasetSQL
from .table import MAGIC_COLUMNS, content_columns, dataset_columns, derived_columns, magic_columns, path_array

if TYPE_CHECKING:
    from .duck import DuckSQL

__all__ = ["SQLSession"]


def _view_rows(docs: DocumentTable, index: SampleIndex, classes: list[str], class_to_id: dict[str, int]
               ) -> Callable[[], Iterator[tuple[object, ...]]]:
    """A factory of the per-file rows of the SQL view (no reference back to the dataset)."""
    per_doc_samples = np.bincount(index.seg_doc, minlength=len(docs))

    def rows() -> Iterator[tuple[object, ...]]:
        for i, (c, t, n) in enumerate(zip(docs.doc_class.tolist(), docs.doc_len.tolist(), per_doc_samples.tolist())):
            path = docs.paths[i]
            name = classes[c]
            yield (i, path_key(path), display_path(path), name, class_to_id[name], docs.header_text(i), t, n)

    return rows


def _take(paths: Sequence[str], ids: np.ndarray) -> list[str]:
    """The paths at ``ids`` (a PathList gathers them in one step)."""
    return paths.take(ids) if isinstance(paths, PathList) else [paths[i] for i in ids.tolist()]


def _alive(ref: weakref.ref[SQLSession]) -> SQLSession:
    """The session behind a weak reference (alive while its engine runs a statement)."""
    session = ref()
    if session is None:
        raise QueryError("statement: this dataset's SQL session was closed")
    return session


class SQLSession:
    """The catalog and the ``files`` view of one dataset (see the module docstring)."""

    def __init__(self, documents: DocumentTable, index: SampleIndex, classes: list[str], class_to_id: dict[str, int],
                 metadata: str | None, cache_root: str | None, catalog: Catalog | None = None,
                 verbose: bool = False):
        self.documents = documents
        self.index = index
        self.classes = classes
        self.class_to_id = class_to_id
        self.metadata = metadata  # the header mode's name ("file", "mime", None or "callable")
        self.cache_root = cache_root
        self._catalog = None if catalog is None else catalog.retain()  # shared with a parent: counted, not owned
        self.verbose = verbose  # progress bars while libmagic or the content pass run
        self._sql: DatasetSQL | None = None
        self._duck_sql: DuckSQL | None = None  # made when first queried (duckdb is imported then)
        self._magic_values: tuple[list[str | None], list[str | None]] | None = None  # per file computed so far
        self._content_values: list[tuple[object, ...] | None] | None = None  # per file computed so far (None: not yet)

    @property
    def catalog(self) -> Catalog:
        """The file catalog (SQLite under the cache directory, or in memory)."""
        if self._catalog is None:
            self._catalog = Catalog(os.path.join(self.cache_root, CATALOG_NAME) if self.cache_root else None).retain()
        return self._catalog

    def query(self, statement: str, params: Params = (), *, timeout: float | None = None, max_rows: int | None = None,
              dialect: str = "duckdb") -> Rows:
        """Run one read-only statement over the ``files`` view (``timeout`` seconds, ``max_rows`` rows at most).

        ``dialect``: ``"duckdb"`` (the engine: :mod:`consumer.query.duck`) or ``"sqlite"`` (the SQLite view of
        0.2, for statements written in SQLite's dialect: slower, and it computes both libmagic columns first).
        """
        if dialect == "duckdb":
            return self._duck().query(statement, params, timeout=timeout, max_rows=max_rows)
        if dialect == "sqlite":
            return self._sqlite().query(statement, params, timeout=timeout, max_rows=max_rows)
        raise QueryError(f"dialect must be 'duckdb' or 'sqlite', got {short_repr(dialect)}")

    def query_arrow(self, statement: str, params: Params = (), *, timeout: float | None = None) -> pa.Table:
        """One read-only statement on the DuckDB engine, its result as a ``pyarrow.Table``."""
        return self._duck().query_arrow(statement, params, timeout=timeout)

    def files_arrow(self, *, content: bool = False, timeout: float | None = None) -> pa.Table:
        """The ``files`` view as a ``pyarrow.Table`` of :data:`~consumer.query.export.FILES_SCHEMA` (``content``:
        compute the content columns first, else they are shown as stored)."""
        return conform(self.query_arrow(files_statement(content), timeout=timeout))

    def file_ids_of(self, files: Any) -> np.ndarray:
        """The ``file_id`` values of a file list (a table, dataframe, Parquet file or paths; see
        :func:`consumer.query.export.file_ids_of`); SelectionError when it is empty."""
        ids = file_ids_of(files, self.documents.paths)
        if not ids.size:
            raise SelectionError("where(files): the file list is empty")
        return ids

    def _duck(self) -> DuckSQL:
        """The DuckDB engine over this dataset's columns (made on first use)."""
        if self._duck_sql is None:
            from .duck import DuckSQL, LazyGroup, derived_groups  # noqa: PLC0415  (duckdb loads with the first statement)

            docs, index = self.documents, self.index
            class_ids = np.array([self.class_to_id[c] for c in self.classes], dtype=np.int64)
            # views of the dataset's arrays (no copy); the derived columns are made when a statement names them
            columns = dataset_columns(docs.doc_class, self.classes, class_ids, docs.doc_size, docs.doc_mtime,
                                      docs.doc_header, docs.headers)
            derived = derived_columns(len(docs), docs.doc_class, class_ids, tokens=lambda: docs.doc_len,
                                      samples=lambda: np.bincount(index.seg_doc, minlength=len(docs)))
            paths = docs.paths
            me = weakref.ref(self)  # the engine is ours: a strong reference back would make a cycle, and the
            # catalog would then close only when the cyclic GC runs, not when the dataset goes away
            lazy = [LazyGroup(("path", "extension"), lambda: {"path": path_array(paths)}, star=True)]
            lazy += derived_groups(derived)

            def magic(partial: bool) -> list[LazyGroup]:  # one group per column: libmagic only for those named
                return [LazyGroup((c,), lambda ids=None, c=c: _alive(me)._magic_columns(ids, (c,)), star=True,
                                  partial=partial) for c in MAGIC_COLUMNS]

            def files(source: ByteSource) -> ByteFunctions:  # catalog rows per file; the content pass and the
                lazy.extend([*magic(True),  # byte predicates read the files' bytes
                             LazyGroup(CONTENT_COLUMNS, lambda ids=None: _alive(me)._content_columns(ids),
                                       partial=True)])
                return ByteFunctions(source)

            def store(_: TokenData) -> None:  # a store's headers, all at once; NULL content columns
                lazy.extend(magic(False))

            byte_functions = docs.source.choose(files=files, store=store)
            relations = record_relations(docs, self.classes, class_ids)  # records: files are their containers
            if relations is not None:
                columns.update(relations.columns)
                if relations.json is not None:
                    lazy.append(LazyGroup(("json",), relations.json))
            self._duck_sql = DuckSQL(columns, lazy, relations=relations, byte_functions=byte_functions,
                                     rows=len(docs))
        return self._duck_sql

    def _magic_columns(self, ids: np.ndarray | None = None,
                       want: tuple[str, ...] = MAGIC_COLUMNS) -> dict[str, pa.Array]:
        """The libmagic columns ``want`` (``description``, ``mime``; cached in the catalog, computed only when a
        statement names them) of the files ``ids`` (None: all); the arrays cover every file, NULL where not computed
        yet. A packed store's come from its headers."""
        return self.documents.source.choose(files=lambda source: self._described(source, ids, want),
                                            store=lambda _: self._store_headers(want))

    def _store_headers(self, want: tuple[str, ...]) -> dict[str, pa.Array]:
        """The ``want`` columns of a packed store's files: the headers recorded at pack time."""
        docs = self.documents
        text = dictionary(docs.doc_header, docs.headers).cast(pa.large_string())
        nulls = pa.nulls(len(docs), type=pa.large_string())
        return {c: text if self.metadata == {"description": "file", "mime": "mime"}[c] else nulls for c in want}

    def _described(self, source: ByteSource, ids: np.ndarray | None, want: tuple[str, ...]) -> dict[str, pa.Array]:
        """The ``want`` columns of files and objects: libmagic, through the catalog."""
        docs = self.documents
        n = len(docs)
        if self._magic_values is None:
            self._magic_values = ([None] * n, [None] * n)
        ids = np.arange(n) if ids is None else ids
        desc, mime = self.catalog.sync(_take(docs.paths, ids), docs.doc_size[ids], docs.doc_mtime[ids],
                                       want=want, verbose=self.verbose, describe=source.describe)
        all_desc, all_mime = self._magic_values
        for i, d, m in zip(ids.tolist(), desc, mime):
            if d is not None:
                all_desc[i] = d
            if m is not None:
                all_mime[i] = m
        columns = magic_columns(all_desc, all_mime)
        return {c: columns[c] for c in want}

    def _content_columns(self, ids: np.ndarray | None = None) -> dict[str, pa.Array]:
        """The content columns of the files ``ids`` (None: all; the catalog's content pass, run only on files
        lacking them); the arrays cover every file, NULL where not computed yet."""
        docs = self.documents
        catalog = self.catalog
        n = len(docs)
        if self._content_values is None:
            self._content_values = [None] * n
        ids = np.arange(n) if ids is None else ids
        paths, sizes, mtimes = _take(docs.paths, ids), docs.doc_size[ids], docs.doc_mtime[ids]
        catalog.ensure_content(paths, sizes, mtimes, verbose=self.verbose,
                               compute=source_computer(docs.source.bytes_for("the content columns")))
        values = self._content_values
        for i, row in zip(ids.tolist(), catalog.content_rows(paths, sizes, mtimes)):
            values[i] = row
        return content_columns(values)

    def _sqlite(self) -> DatasetSQL:
        """The SQLite view of 0.2 (``dialect="sqlite"``)."""
        if self._sql is None:
            docs = self.documents
            ensure = docs.source.choose(files=self._synced, store=self._store_catalog)
            catalog = self.catalog
            self._sql = DatasetSQL(catalog.path, None if catalog.path else catalog.connection,
                                   _view_rows(docs, self.index, self.classes, self.class_to_id),
                                   identity=(docs.doc_size, docs.doc_mtime), ensure_content=ensure)
        return self._sql

    def _store_catalog(self, _: TokenData) -> Callable[[], object] | None:
        """A packed store's catalog: in memory, rows from its file table and headers; its content columns stay
        NULL (its source files are never read)."""
        docs = self.documents
        if self._catalog is not None:
            self._catalog.release()
        self._catalog = Catalog(None).retain()
        headers = [docs.header_text(i) for i in range(len(docs))]
        self._catalog.insert(docs.paths, docs.doc_size, docs.doc_mtime,
                             headers if self.metadata == "file" else None,
                             headers if self.metadata == "mime" else None)
        return None

    def _synced(self, source: ByteSource) -> Callable[[], object]:
        """The durable catalog of files and objects, libmagic's columns synced; the content pass, run on the
        first statement that names a content column, reads through ``source``."""
        docs, catalog, verbose = self.documents, self.catalog, self.verbose
        catalog.sync(docs.paths, docs.doc_size, docs.doc_mtime, want=("description", "mime"), verbose=verbose,
                     describe=source.describe)
        paths, sizes, mtimes, compute = docs.paths, docs.doc_size, docs.doc_mtime, source_computer(source)
        return lambda: catalog.ensure_content(paths, sizes, mtimes, verbose=verbose, compute=compute)

    def duplicates(self) -> list[DuplicateGroup]:
        """Groups of files with equal content (sha256 from the catalog's content pass, run once per file)."""
        docs = self.documents
        source = docs.source.bytes_for("duplicates() (the content pass)")
        sha = catalog_sha256s(self.catalog, docs.paths, docs.doc_size, docs.doc_mtime, verbose=self.verbose,
                              compute=source_computer(source))
        # corpus order is file_id order (for documents inside containers "a.jsonl#9" comes before "a.jsonl#10",
        # which a path order would reverse): group by ids written as sortable keys, then name the members
        paths = docs.paths
        keys = [f"{k:015d}" for k in range(len(paths))]
        groups = find_duplicates(keys, [self.classes[c] for c in docs.doc_class.tolist()], sha, docs.doc_size)
        return [replace(g, members=tuple(m._replace(path=paths[m.file_id]) for m in g.members)) for g in groups]

    def file_ids_where(self, condition: str, params: Params = ()) -> np.ndarray:
        """The sorted ``file_id`` values of the files matching an SQL condition on the ``files`` view."""
        if not isinstance(condition, str) or not condition.strip():
            raise QueryError(f"condition must be a non-empty SQL expression, got {short_repr(condition)}")
        rows = self.query(f"SELECT doc_id FROM documents WHERE ({condition}) ORDER BY doc_id", params)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        if not ids.size:
            raise SelectionError(f"where({condition!r}) matched no file")
        if ids.min() < 0 or ids.max() >= len(self.documents) or np.any(np.diff(ids) <= 0):
            raise QueryError(f"where({condition!r}) did not select file_id values of this dataset")
        return ids

    @property
    def open_catalog(self) -> Catalog | None:
        """The catalog if it is open (a subset dataset shares it rather than opening its own)."""
        return self._catalog

    def __del__(self) -> None:
        # sqlite3 connections sit in reference cycles (their statement cache), so only the cyclic GC would
        # free them: close ours as soon as the dataset that owns this session is gone
        try:
            if self._sql is not None:
                self._sql.close()
            if self._duck_sql is not None:
                self._duck_sql.close()
            if self._catalog is not None:
                self._catalog.release()
        except Exception:  # noqa: BLE001  (never raise from __del__, e.g. at interpreter exit)
            pass

    def close(self) -> None:
        """Close the SQL and catalog connections (reopened lazily when needed again)."""
        if self._sql is not None:
            self._sql.close()
            self._sql = None
        if self._duck_sql is not None:
            self._duck_sql.close()
            self._duck_sql = None
        if self._catalog is not None:
            self._catalog.release()  # closed when no other dataset (a subset, its parent) still uses it
            self._catalog = None
