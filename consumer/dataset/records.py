"""The build of a dataset whose documents are records inside container files (``documents="lines"``, ``"jsonl"``,
``"parquet"``, ``"tar"``): list the containers as files, index each (from its persistent entry when the container is
unchanged, else by its scanner), and assemble the documents, classes and sample index as a files build does.

Document ids follow class order, then container order, then record order: with classes from folders and F-forms
that is the containers' corpus order; with ``class_field`` the documents of each class keep their container and
record order (the same rule as files, which are ordered by class, then path).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from ..catalog.catalog import CATALOG_NAME, Catalog
from ..catalog.content import source_computer
from ..catalog.duplicates import catalog_sha256s, dedupe_plan
from ..catalog.headers import headers_from
from ..errors import ConsumerError, ConsumerWarning, InputError
from ..formats.raw_index import raw_index_path, read_raw_index
from ..scale.engines import Engine
from ..sources.base import ByteSource
from ..sources.local import LocalFiles
from ..sources.objects import ObjectFiles
from ..sources.paths import PathList
from ..sources.records import SCANNERS, RecordFiles, RecordOptions
from ..sources.records.compressed import compression_of, decompressed_chunks
from ..sources.records.container import SCAN_CHUNK, Container, StaleRawIndex
from ..sources.records.jsonl import scan_jsonl
from ..sources.records.jsonl_arrow import release_memory
from ..sources.records.names import RecordPaths
from ..sources.records.remote import object_container
from ..sources.records.scanned import INT32_MAX, DecodeSink, Scanned
from ..sources.records.stash import StashBatch, load_stash
from ..spec import Spec
from ..storage import Storage
from ..tokens.documents import build_documents
from ..tokens.vocab import Vocab
from ..util.buffers import Scratch
from ..util.preload import Preload
from ..util.sets import distinct
from .cache import building
from .containers import list_containers
from .entry import sample_index
from .records_entry import Assembled, container_key, entry_key, load_records, save_records

__all__ = ["build_records", "index_containers", "index_on"]


def _container(source: ByteSource, i: int, kind: str, scratch: Scratch | None = None) -> Container:
    if isinstance(source, ObjectFiles):
        return object_container(source, i, kind)
    if not isinstance(source, LocalFiles):
        raise InputError(f"fps: containers must be local files or URLs, got {source.kind} ({source.paths[i]!r})")
    path = source.paths[i]
    probe = np.zeros(1, dtype=np.uint8)
    one, zero = np.array([i], dtype=np.int64), np.zeros(1, dtype=np.int64)
    size = int(source.sizes[i])

    def check() -> None:
        source.read_ranges(one, zero, zero, probe, zero)

    if compression_of(path) is None:
        return Container(path=path, size=size, chunks=lambda: source.iter_chunks(i, SCAN_CHUNK, scratch),
                         check=check, local=path, scratch=scratch or Scratch(),
                         lines=raw_index_of(path, size) if kind in ("jsonl", "lines") else None)
    if kind == "parquet":
        raise InputError(f"fps: {path!r} is a compressed file; Parquet compresses its pages itself (give the "
                         ".parquet file)")

    def chunks() -> Iterator[bytes]:  # the decompressed stream, of the version listed before and after
        check()
        yield from decompressed_chunks(path, path, size, SCAN_CHUNK)
        check()

    return Container(path=path, size=size, chunks=chunks, check=check, local=path, compressed=True)


def raw_index_of(path: str, size: int) -> np.ndarray | None:
    """The ``(offset, length)`` entries of the raw index ``<stem>.idx`` beside ``path`` when there is one that fits
    a file of ``size`` bytes (entries in order, not overlapping, the last ending inside the file); None when there is
    none, and a ConsumerWarning (then None: the file is scanned) when it cannot be read or does not fit."""
    idx = raw_index_path(path)
    if not idx.is_file():
        return None
    try:
        entries = read_raw_index(idx)
    except ConsumerError as e:
        warnings.warn(f"{str(idx)!r}: cannot use this raw index ({e}); scanning {path!r} for its lines instead",
                      ConsumerWarning, stacklevel=2)
        return None
    ends = entries[:, 0] + entries[:, 1] if entries.size else np.zeros(0, np.int64)
    fits = bool(entries.size == 0 or (int(entries.min()) >= 0 and int(ends[-1]) <= size
                                      and bool(np.all(entries[1:, 0] > ends[:-1]))))
    if not fits:
        warnings.warn(f"{str(idx)!r} does not match {path!r} ({size} bytes; its {len(entries)} entries are out of "
                      "order or run past the end): scanning the file for its lines instead", ConsumerWarning,
                      stacklevel=2)
        return None
    return entries


def _fallback(run: Any, container: Container) -> Any:
    """``run(container)``; when the container's raw index turns out stale while reading, a ConsumerWarning and
    ``run`` again on the container without it (the newline scan)."""
    try:
        return run(container)
    except StaleRawIndex as e:
        warnings.warn(f"{e}; scanning the file for its lines instead", ConsumerWarning, stacklevel=2)
        return run(dataclasses.replace(container, lines=None))


SQL_MODULES = ("consumer.query.duck",)  # what a first SQL statement imports: DuckDB, the engine (util/preload.py)
PRELOAD_BYTES = 64 << 20  # a local scan of this many bytes takes longer than importing them (0.1 s against 0.08 s)


def _scan_threads() -> int:
    """Threads indexing the containers of a local build: one per core the process may run on, at most 8 (each
    holds a few chunks' buffers, tens of MB)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, 8))


def index_containers(source: ByteSource, options: RecordOptions, root: str | None, threads: int | None = None,
                     keys: list[str] | None = None) -> tuple[list[Scanned], list[Any], int]:
    """Every container's scan and decode cache (a file path under ``root``, or bytes in memory), and how many came
    from their persistent entry (unchanged containers are not read again; ``keys``: the entries' keys when the
    caller found them already, else each is found here). The new entries are published together
    when the scans end (one durability barrier: :class:`~consumer.sources.records.stash.StashBatch`).

    Local containers are scanned on ``threads`` threads (default :func:`_scan_threads`): reading and numpy's
    passes over a chunk run outside the GIL. With fewer JSONL containers than threads, each container decodes its
    chunks on its share of them (one big file uses every core). The results are in container order whatever the
    threads' timing; the first container (in order) that fails raises its error, and the containers not started yet
    are not started. Objects are scanned one after another (their reader runs its own concurrent range
    requests)."""
    n = len(source)
    total = 1 if not isinstance(source, LocalFiles) else _scan_threads() if threads is None else max(1, threads)
    workers, inner = max(1, min(total, n)), max(1, total // max(1, n))
    scan: Any = SCANNERS[options.documents]
    if scan is scan_jsonl and inner > 1:
        scan = partial(scan_jsonl, threads=inner)

    buffers = threading.local()  # a Scratch per scanning thread, for this call
    # each buffer made once, the size of the largest piece (a chunk, or the largest container when smaller)
    largest = min(SCAN_CHUNK, int(source.sizes.max())) + 2 if n else 0

    def one(i: int, batch: StashBatch | None) -> tuple[tuple[Scanned, Any], bool]:
        kept = getattr(buffers, "scratch", None)  # the buffers this thread scanned its last container with
        if kept is None:
            kept = buffers.scratch = Scratch(at_least=largest)
        container = _container(source, i, options.documents, kept)
        if batch is None or root is None:
            def in_memory(c: Container) -> tuple[Scanned, Any]:
                sink = DecodeSink()
                return scan(c, options, sink), sink.memory()
            return _fallback(in_memory, container), False
        key = keys[i] if keys is not None else container_key(source, i, options)
        got = load_stash(root, key)
        if got is not None:
            return got, True
        return _fallback(lambda c: batch.scan(key, partial(scan, c, options)), container), False

    # the SQL engine imported on a thread during a long local scan of this process (not an engine's task)
    warm = SQL_MODULES if threads is None and total > 1 and int(source.sizes.sum()) >= PRELOAD_BYTES else ()
    with Preload(warm), contextlib.nullcontext() if root is None else StashBatch(root) as batch:
        if workers == 1:
            results = [one(i, batch) for i in range(n)]
        else:
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="consumer-records")
            try:
                results = list(pool.map(one, range(n), [batch] * n))
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    if options.documents == "jsonl":
        release_memory()  # what Arrow's reader kept for the scans' blocks
    return [g[0] for g, _ in results], [g[1] for g, _ in results], sum(r for _, r in results)


def index_on(engine: Engine, source: ByteSource, options: RecordOptions, root: str | None,
             keys: list[str] | None = None) -> tuple[list[Scanned], list[Any], int]:
    """:func:`index_containers` on an engine's workers: contiguous runs of containers per task (about four tasks per
    worker thread), results gathered in container order, so the index is the local build's. The workers write the
    persistent entries into ``root`` (a directory they share), or send the decode caches back in memory."""
    n = len(source)
    step = max(1, -(-n // (4 * engine.slots)))
    tasks = [(source.subset(np.arange(a, min(a + step, n), dtype=np.int64)), options, root, 1,  # one thread a task
              None if keys is None else keys[a:a + step]) for a in range(0, n, step)]
    scans: list[Scanned] = []
    decoded: list[Any] = []
    reused = 0
    for part_scans, part_decoded, part_reused in engine.map(index_containers, tasks, label="records-index"):
        scans.extend(part_scans)
        decoded.extend(part_decoded)
        reused += part_reused
    return scans, decoded, reused


def _cat(parts: list[np.ndarray | None], dtype: Any = np.int32) -> np.ndarray:
    """The parts one after another, in their common type (int32 when every part is: :func:`narrow`); one part is
    taken as it is (no copy)."""
    got = [p for p in parts if p is not None]
    if not got:
        return np.zeros(0, dtype=dtype)
    return got[0] if len(got) == 1 else np.concatenate(got)


def _field_classes(scans: list[Scanned]) -> tuple[list[str], np.ndarray]:
    """The class values of every container (``class_field``), sorted, and each document's class index into them
    (int32): the containers' codes mapped through their distinct values, no string per document."""
    names = sorted({v for s in scans for v in (s.class_names or [])})
    where = {v: k for k, v in enumerate(names)}
    parts = [np.array([where[v] for v in s.class_names or []], dtype=np.int32)[s.class_codes]
             for s in scans if s.class_codes is not None and s.class_codes.size]
    return names, np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)


def _dedupe(records: RecordFiles, names: list[str], doc_class: np.ndarray, storage: Storage, verbose: bool,
            ) -> tuple[RecordFiles, dict]:
    """``dedupe="content"`` over documents: the sha256 of each document's bytes (the catalog's content pass,
    reading through ``records``), then the first document of each group of equal content in document order (class,
    container, record) kept. The kept documents, and the report of :meth:`DedupePlan.report` with the documents'
    paths (plus ``keep``: the ids kept)."""
    catalog = Catalog(os.path.join(storage.cache_dir, CATALOG_NAME) if storage.cache_dir else None)
    paths = list(records.paths)
    sha = catalog_sha256s(catalog, paths, records.sizes, records.stamps, verbose=verbose,
                          compute=source_computer(records))
    keys = [f"{k:015d}" for k in range(len(paths))]  # document order (a path order would put #10 before #9)
    plan = dedupe_plan(keys, [names[c] for c in doc_class.tolist()], sha, records.sizes)
    report = plan.report()
    for d in report.get("dropped", []):
        d["path"], d["kept"] = paths[int(d["path"])], paths[int(d["kept"])]
    return records.subset(plan.keep), {**report, "keep": plan.keep}


def build_records(fps: Any, spec: Spec, storage: Storage, verbose: bool, engine: Engine | None,
                  ) -> tuple[Assembled, str | None]:
    """The records of the containers ``fps`` names, assembled (see the module docstring): documents, classes, the
    sample index, and the build information (``records``: counts;
    ``cache``: ``"hit"`` when every container's own index was reused; ``index``: ``"hit"`` when the dataset's
    entry was mapped, ``"miss"`` when it was assembled and written, ``"off"`` when it is not cached;
    ``libmagic_calls``). Also the key of the dataset's entry in the index cache when it is there
    (:mod:`consumer.dataset.records_entry`: a reopen of unchanged containers maps it and does nothing per
    document). ``engine``: the containers are indexed on its workers (:func:`index_on`)."""
    options: RecordOptions = spec.records
    form, folder_classes, cls_list, source, ignored = list_containers(fps, storage, options)
    root = storage.cache_dir
    keys = [container_key(source, i, options) for i in range(len(source))] if root else []
    key = entry_key(keys, [folder_classes[c] for c in cls_list], spec) if root else None
    if not root or not key:
        made = _assemble(source, folder_classes, cls_list, form, ignored, spec, storage, verbose, engine, None)
        made.info["index"] = "off"
        return made, None
    found = _mapped(root, key, source, spec)
    if found is not None:
        return found, key
    with building(root, key):  # of processes missing the entry at once, one assembles it and the others map it
        found = _mapped(root, key, source, spec)
        if found is not None:
            return found, key
        made = _assemble(source, folder_classes, cls_list, form, ignored, spec, storage, verbose, engine, keys)
        saved = save_records(root, key, made, keys, spec)
    made.info["index"] = "miss" if saved else "off"
    return made, key if saved else None


def _mapped(root: str, key: str, source: Any, spec: Spec) -> Assembled | None:
    """The dataset entry ``key`` over ``source``, mapped (see :func:`~.records_entry.load_records`), or None."""
    found = load_records(root, key, source, spec.records, spec.n_bytes)
    if found is not None:
        found.info.update(cache="hit", libmagic_calls=0, index="hit")
        found.info["records"] = {**found.info["records"], "reused": len(source)}
    return found


def _assemble(source: Any, folder_classes: list[str], cls_list: list[int], form: str, ignored: int, spec: Spec,
              storage: Storage, verbose: bool, engine: Engine | None,
              keys: list[str] | None) -> Assembled:  # long: one pipeline
    """Index every container (reusing their persistent indexes, keyed by ``keys``) and assemble the dataset from
    their scans."""
    options: RecordOptions = spec.records
    paths = source.paths
    scans, decoded, reused = index_containers(source, options, storage.cache_dir, keys=keys) if engine is None \
        else index_on(engine, source, options, storage.cache_dir, keys)
    counts = [len(s) for s in scans]
    records_info = {"containers": len(scans), "reused": reused, "documents": sum(counts), "ignored_files": ignored,
                    **{k: sum(int(s.counts.get(k, 0)) for s in scans)
                       for k in sorted({k for s in scans for k in s.counts})}}
    doc_container = np.repeat(np.arange(len(scans), dtype=np.int32 if len(scans) <= INT32_MAX else np.int64), counts)
    record = _cat([s.record for s in scans])
    if options.class_field:
        names, doc_class = _field_classes(scans)
    else:
        of_container = np.asarray(cls_list, dtype=np.int64)  # one class per container: found per container
        kept = distinct(of_container[np.asarray(counts, dtype=np.int64) > 0])
        names = [folder_classes[k] for k in kept.tolist()]
        doc_class = np.repeat(np.searchsorted(kept, of_container).astype(np.int32), counts)
    doc_class = doc_class.astype(np.int32 if len(names) <= INT32_MAX else np.int64, copy=False)  # 4 B a document
    # class, then container, then record; already so with classes from folders (no permutation, no copies)
    order: Any = slice(None) if bool(np.all(doc_class[1:] >= doc_class[:-1])) else np.argsort(doc_class, kind="stable")
    members = [s.names for s in scans] if options.documents == "tar" else None
    args = (list(paths), doc_container, record, members)
    # made when first needed (in class order too: no path is made to count or fetch documents)
    doc_paths: PathList = RecordPaths(args) if isinstance(order, slice) else RecordPaths((*args, order))
    lines = options.documents == "jsonl" and all(s.json_offset is not None for s in scans)
    json_off = _cat([s.json_offset for s in scans])[order] if lines else None
    json_len = _cat([s.json_length for s in scans])[order] if lines else None
    records = RecordFiles(source, doc_paths, doc_container[order], _cat([s.offset for s in scans])[order],
                          _cat([s.length for s in scans])[order], _cat([s.inplace for s in scans], bool)[order],
                          decoded, json_off, json_len, record[order],
                          np.array([s.from_lines for s in scans], dtype=bool), options)
    doc_class = doc_class[order]
    dedupe = None
    if spec.dedupe == "content":
        records, dedupe = _dedupe(records, names, doc_class, storage, verbose)
        doc_class = doc_class[dedupe.pop("keep")]
        kept = distinct(doc_class)
        names, doc_class = [names[k] for k in kept.tolist()], np.searchsorted(kept, doc_class).astype(doc_class.dtype)
        doc_paths = records.paths
    del scans  # the per-container arrays: concatenated above, not kept twice at the peak
    if not len(records):
        raise InputError(f"fps: the containers hold no documents (documents={options.documents!r}); "
                         f"e.g. {paths[0]!r}")
    magic_calls = 0
    if isinstance(spec.metadata, str):
        want = ("description",) if spec.metadata == "file" else ("mime",)
        described = list(records.describe(list(doc_paths), kinds=want))
        magic_calls = len(described)
        headers = headers_from(spec.metadata, doc_paths, [d for d, _ in described], [m for _, m in described])
    else:
        headers = headers_from(spec.metadata, doc_paths, [], []) if callable(spec.metadata) else []
    documents = build_documents(doc_paths, doc_class, records.sizes, headers, Vocab(spec.n_bytes),
                                with_header=spec.with_header, mtimes=records.stamps, source=records)
    info = {"cache": "hit" if reused == len(counts) else "miss" if storage.cache_dir else "off",
            "libmagic_calls": magic_calls, "records": records_info, **({"dedupe": dedupe} if dedupe else {})}
    bounds = np.searchsorted(doc_class, np.arange(len(names) + 1, dtype=doc_class.dtype))  # sorted by class
    index = sample_index(spec, documents, int(np.count_nonzero(np.diff(bounds))))  # the classes holding documents
    return Assembled(names, form, records, documents, index, info)
