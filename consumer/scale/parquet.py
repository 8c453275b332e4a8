"""The catalog at cluster scale: partitioned Parquet, one file per task plus a manifest, written by the workers.

A catalog of 10^8 files need not pass through one SQLite file: :func:`write_parquet_catalog` runs the
catalog's passes (stat and open, libmagic, optionally the content pass) on an engine, and each task writes
its rows straight to ``part-NNNNN.parquet`` (under a temporary name, renamed once: a rerun task leaves one
whole part). The client writes ``_manifest.json`` last (atomically), listing every part with its rows and
bytes; a folder without a manifest is an unfinished write and is never read.

Columns: those of the SQLite catalog's ``files`` table (``path``, ``size``, ``mtime_ns``, ``extension``,
``description``, ``mime``, ``sha256``, ``entropy``, ``printable``, ``zeros``, ``histogram``), with the same
values for the same file (the same functions compute them), plus ``class`` (the corpus's class of the
file) and ``file_id`` (its position in corpus order). Columns not computed are NULL.

:func:`open_parquet_catalog` checks the manifest against the parts and returns a :class:`ParquetCatalog`:
its ``parts`` are what ``dask.dataframe.read_parquet`` reads on a cluster, and its :meth:`~ParquetCatalog.sql`
text (``read_parquet([...])``) is a table DuckDB queries, e.g.
``duckdb.sql(f"SELECT class, count(*) FROM {cat.sql()} GROUP BY class")``.
pyarrow is imported only when Parquet is written or read.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..catalog.content import compute_content
from ..catalog.rows import display_path, extension_of
from ..errors import FileChangedError, FormatError, InputError, MissingDependencyError, short_repr
from ..sources.corpus import normalise, stat_files
from ..sources.magic import describe_files
from ..util.fileio import atomic_write_bytes
from .engines import COSTS, Cost, Engine, plan_tasks, resolve_engine

__all__ = ["MANIFEST_NAME", "PARQUET_COLUMNS", "ParquetCatalog", "write_parquet_catalog", "open_parquet_catalog",
           "write_part", "write_manifest", "parquet_part_task"]

MANIFEST_NAME = "_manifest.json"
FORMAT_NAME = "consumer-catalog-parquet"
FORMAT_VERSION = 1
PARQUET_COLUMNS = ("file_id", "path", "class", "size", "mtime_ns", "extension", "description", "mime", "sha256",
                   "entropy", "printable", "zeros", "histogram")
_METADATA = {"file": ("description",), "mime": ("mime",), "both": ("description", "mime"), None: ()}


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow  # noqa: PLC0415  (only when Parquet is written or read)
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError as e:
        raise MissingDependencyError(f'the Parquet catalog needs pyarrow (pip install "consumer[dask]"): {e}') from e
    return pyarrow, pq


def _schema(pa: Any) -> Any:
    return pa.schema([("file_id", pa.int64()), ("path", pa.string()), ("class", pa.string()), ("size", pa.int64()),
                      ("mtime_ns", pa.int64()), ("extension", pa.string()), ("description", pa.string()),
                      ("mime", pa.string()), ("sha256", pa.string()), ("entropy", pa.float64()),
                      ("printable", pa.float64()), ("zeros", pa.float64()), ("histogram", pa.binary())])


def write_part(columns: dict[str, Any], path: str) -> int:
    """Write one part (``columns``: a subset of :data:`PARQUET_COLUMNS` -> equal-length sequences; the others
    NULL) to ``path``: temporary name, fsync, rename. Returns its size in bytes."""
    pa, pq = _pyarrow()
    unknown = sorted(set(columns) - set(PARQUET_COLUMNS))
    if unknown:
        raise InputError(f"columns: unknown catalog column(s) {unknown}; the Parquet catalog has {PARQUET_COLUMNS}")
    n = len(next(iter(columns.values()))) if columns else 0
    schema = _schema(pa)
    arrays = [pa.array(columns[f.name], type=f.type) if f.name in columns else pa.nulls(n, type=f.type)
              for f in schema]
    tmp = f"{path}.{secrets.token_hex(6)}.tmp"
    try:
        pq.write_table(pa.Table.from_arrays(arrays, schema=schema), tmp, compression="zstd")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return os.stat(path).st_size


def parquet_part_task(first_id: int, paths: list[str], classes: list[str], path: str, kinds: tuple[str, ...],
                      content: bool) -> tuple[int, int]:
    """On a worker: the catalog rows of ``paths`` (stat + open, libmagic ``kinds``, the content pass if asked),
    written as one part at ``path``. Returns ``(rows, bytes)``. Errors name the file, as in a local build."""
    sizes, mtimes = stat_files(paths, classes)
    columns: dict[str, Any] = {
        "file_id": np.arange(first_id, first_id + len(paths), dtype=np.int64), "path": [display_path(p) for p in paths],
        "class": classes, "size": sizes, "mtime_ns": mtimes, "extension": [extension_of(p) for p in paths]}
    if kinds:
        described = list(describe_files(paths, kinds=kinds, workers=1))
        for k, kind in enumerate(("description", "mime")):
            if kind in kinds:
                columns[kind] = [d[k] for d in described]
    if content:
        stats = list(compute_content(paths, workers=1))
        for st, p, s, t in zip(stats, paths, sizes.tolist(), mtimes.tolist()):
            if (st.size, st.mtime_ns) != (s, t):
                raise FileChangedError(f"paths: {p!r} changed while it was catalogued (size {s} -> {st.size}, "
                                       f"mtime_ns {t} -> {st.mtime_ns}); run again")
        columns.update(sha256=[s.sha256 for s in stats], entropy=[s.entropy for s in stats],
                       printable=[s.printable for s in stats], zeros=[s.zeros for s in stats],
                       histogram=[s.histogram_blob() for s in stats])
    return len(paths), write_part(columns, path)


def write_manifest(directory: str | os.PathLike, parts: Sequence[tuple[str, int, int]], **extra: Any) -> dict:
    """Write ``_manifest.json`` (atomically, last): ``parts`` as ``(file name, rows, bytes)`` in order."""
    manifest = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "consumer_version": __version__,
                "columns": list(PARQUET_COLUMNS), "rows": int(sum(r for _, r, _ in parts)),
                "parts": [{"name": n, "rows": int(r), "bytes": int(b)} for n, r, b in parts], **extra}
    atomic_write_bytes(Path(directory) / MANIFEST_NAME, json.dumps(manifest, indent=1).encode())
    return manifest


def _fresh_directory(directory: str | os.PathLike) -> Path:
    out = Path(os.path.abspath(os.fspath(directory)))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"directory: the Parquet catalog is written into a new or empty folder; {str(out)!r} "
                         "exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_parquet_catalog(fps: Any, directory: str | os.PathLike, *, engine: Any = None,
                          metadata: str | None = "both", content: bool = False) -> dict:
    """The catalog of the files of ``fps`` (any form ``Consumer`` takes, local paths) as partitioned Parquet in
    ``directory`` (new or empty): one part per task, written by the workers of ``engine`` (None: here, in
    order), then the manifest. ``metadata``: the libmagic columns computed (``"file"``, ``"mime"``, ``"both"``
    or None), ``content``: the content columns too. Returns the manifest."""
    if metadata not in _METADATA:
        raise InputError(f"metadata must be one of {list(_METADATA)}, got {short_repr(metadata)}")
    kinds = _METADATA[metadata]
    on: Engine | None = resolve_engine(engine)
    corpus = normalise(fps)
    paths, cls = corpus.flat()
    names = [corpus.class_names[c] for c in cls]
    out = _fresh_directory(directory)
    per_file = COSTS["stat"].per_file + (COSTS["libmagic"].per_file if kinds else 0) + \
        (COSTS["content"].per_file if content else 0)
    bounds = plan_tasks(len(paths), on.slots if on else 1, Cost(per_file, COSTS["content"].per_byte if content else 0))
    tasks = [(a, list(paths[a:b]), names[a:b], str(out / f"part-{k:05d}.parquet"), kinds, content)
             for k, (a, b) in enumerate(bounds)]
    results = on.map(parquet_part_task, tasks, label="parquet") if on else (parquet_part_task(*t) for t in tasks)
    try:
        parts = [(f"part-{k:05d}.parquet", rows, size) for k, (rows, size) in enumerate(results)]
    except BaseException:  # remove the parts written so far (a task still running then may add its own part;
        # without a manifest the folder is never read as a catalog)
        for leftover in out.glob("part-*.parquet*"):
            leftover.unlink(missing_ok=True)
        raise
    for leftover in out.glob("part-*.parquet.*.tmp"):  # a task killed while writing, rerun since
        leftover.unlink(missing_ok=True)
    return write_manifest(out, parts, classes=corpus.class_names, metadata=list(kinds), content=bool(content))


@dataclass(frozen=True)
class ParquetCatalog:
    """A partitioned Parquet catalog, checked against its manifest: ``parts`` (absolute paths, in order),
    ``rows`` (total), ``manifest``."""

    directory: str
    parts: tuple[str, ...]
    rows: int
    manifest: dict

    def sql(self) -> str:
        """A DuckDB table expression over every part: ``read_parquet(['...', ...])``."""
        quoted = ", ".join("'" + p.replace("'", "''") + "'" for p in self.parts)
        return f"read_parquet([{quoted}])"

    def dataset(self) -> Any:
        """The parts as one ``pyarrow.dataset.Dataset`` (DuckDB scans it too: ``duckdb.sql("... FROM ds")``)."""
        _pyarrow()
        import pyarrow.dataset as pads  # noqa: PLC0415

        return pads.dataset(list(self.parts), format="parquet")


def open_parquet_catalog(directory: str | os.PathLike) -> ParquetCatalog:
    """The catalog in ``directory``: its manifest read and every part checked (present, the recorded size);
    FormatError naming the folder otherwise (e.g. an unfinished write: no manifest)."""
    root = Path(os.path.abspath(os.fspath(directory)))
    try:
        manifest = json.loads((root / MANIFEST_NAME).read_text())
    except FileNotFoundError:
        raise FormatError(f"directory: {str(root)!r} has no {MANIFEST_NAME} (not a Parquet catalog, or its "
                          "write did not finish)") from None
    except (OSError, ValueError) as e:
        raise FormatError(f"directory: cannot read {str(root / MANIFEST_NAME)!r}: {e}") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME or \
            manifest.get("version") != FORMAT_VERSION or not isinstance(manifest.get("parts"), list):
        raise FormatError(f"directory: {str(root / MANIFEST_NAME)!r} is not a version-{FORMAT_VERSION} "
                          f"{FORMAT_NAME} manifest")
    parts = []
    for part in manifest["parts"]:
        path = root / str(part.get("name"))
        size = path.stat().st_size if path.is_file() else None
        if size != part.get("bytes"):
            raise FormatError(f"directory: part {str(path)!r} is {'missing' if size is None else f'{size} bytes'}, "
                              f"the manifest records {part.get('bytes')} bytes")
        parts.append(str(path))
    return ParquetCatalog(str(root), tuple(parts), int(manifest["rows"]), manifest)
