"""One dataset's SQL session: its catalog (opened when first needed) and its read-only ``files`` view.

:class:`SQLSession` is what ``ds.sql()``, ``ds.where()`` and ``ds.catalog`` use. On the first query it
brings the catalog rows of the dataset's files up to date for both libmagic columns (description and
MIME type: a build computed only the one its headers needed), then opens a
:class:`~consumer.query.engine.DatasetSQL` whose TEMP table holds the per-dataset facts (class, header,
tokens, samples). A packed dataset never touches its source files: its rows come from the store's
file table and headers, in an in-memory catalog.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from ..catalog.catalog import CATALOG_NAME, Catalog, display_path, path_key
from ..catalog.duplicates import DuplicateGroup, catalog_sha256s, find_duplicates
from ..errors import QueryError, SelectionError, short_repr
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex
from .engine import DatasetSQL, Rows, content_completer

__all__ = ["SQLSession"]


def _view_rows(docs: DocumentTable, index: SampleIndex, classes: list[str], class_to_id: dict[str, int]):
    """A factory of the per-file rows of the SQL view (no reference back to the dataset)."""
    per_doc_samples = np.bincount(index.seg_doc, minlength=len(docs))

    def rows() -> Iterator[tuple]:
        for i, (c, t, n) in enumerate(zip(docs.doc_class.tolist(), docs.doc_len.tolist(), per_doc_samples.tolist())):
            path = docs.paths[i]
            name = classes[c]
            yield (i, path_key(path), display_path(path), name, class_to_id[name], docs.header_text(i), t, n)

    return rows


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

    @property
    def catalog(self) -> Catalog:
        """The file catalog (SQLite under the cache directory, or in memory)."""
        if self._catalog is None:
            self._catalog = Catalog(os.path.join(self.cache_root, CATALOG_NAME) if self.cache_root else None).retain()
        return self._catalog

    def query(self, statement: str, params=(), *, timeout: float | None = None, max_rows: int | None = None) -> Rows:
        """Run one read-only statement over the ``files`` view (``timeout`` seconds, ``max_rows`` rows at most)."""
        if self._sql is None:
            docs = self.documents
            source = docs.source
            if not source.durable:  # a packed store: rows from its file table and headers
                if self._catalog is not None:
                    self._catalog.release()
                self._catalog = Catalog(None).retain()
                headers = [docs.header_text(i) for i in range(len(docs))]
                self._catalog.insert(docs.paths, docs.doc_size, docs.doc_mtime,
                                     headers if self.metadata == "file" else None,
                                     headers if self.metadata == "mime" else None)
                ensure = None  # a store's content columns stay NULL: its source files are never read
            else:
                self.catalog.sync(docs.paths, docs.doc_size, docs.doc_mtime, want=("description", "mime"),
                                  verbose=self.verbose, describe=source.describe)
                # the content pass reads whole files: where the source offers them (else NULL content columns)
                ensure = None if not source.whole_files else content_completer(
                    self.catalog, docs.paths, docs.doc_size, docs.doc_mtime, verbose=self.verbose)
            catalog = self.catalog
            self._sql = DatasetSQL(catalog.path, None if catalog.path else catalog.connection,
                                   _view_rows(docs, self.index, self.classes, self.class_to_id),
                                   identity=(docs.doc_size, docs.doc_mtime), ensure_content=ensure)
        return self._sql.query(statement, params, timeout=timeout, max_rows=max_rows)

    def duplicates(self) -> list[DuplicateGroup]:
        """Groups of files with equal content (sha256 from the catalog's content pass, run once per file)."""
        docs = self.documents
        docs.source.refuse_whole_files("duplicates() (the content pass)")
        sha = catalog_sha256s(self.catalog, docs.paths, docs.doc_size, docs.doc_mtime, verbose=self.verbose)
        return find_duplicates(docs.paths, [self.classes[c] for c in docs.doc_class.tolist()], sha, docs.doc_size)

    def file_ids_where(self, condition: str, params=()) -> np.ndarray:
        """The sorted ``file_id`` values of the files matching an SQL condition on the ``files`` view."""
        if not isinstance(condition, str) or not condition.strip():
            raise QueryError(f"condition must be a non-empty SQL expression, got {short_repr(condition)}")
        rows = self.query(f"SELECT file_id FROM files WHERE ({condition}) ORDER BY file_id", params)
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
            if self._catalog is not None:
                self._catalog.release()
        except Exception:  # noqa: BLE001  (never raise from __del__, e.g. at interpreter exit)
            pass

    def close(self) -> None:
        """Close the SQL and catalog connections (reopened lazily when needed again)."""
        if self._sql is not None:
            self._sql.close()
            self._sql = None
        if self._catalog is not None:
            self._catalog.release()  # closed when no other dataset (a subset, its parent) still uses it
            self._catalog = None
