"""A cluster build of a local directory whose per-file work, joins included, runs on the workers, which write parts
(:mod:`consumer.scale.parts`) into the cache directory: the client joins part references, never paths or per-file
values, and maps what the workers wrote.

It applies when ``engine=`` is given for a local directory, with a cache directory the client can write (the
workers must reach it at the same path: a shared file system), files as documents, no ``dedupe``, and a header
mode by name (``"file"``, ``"mime"``, None); anything else takes the build of :mod:`consumer.dataset.build`.

1. the client lists the root only (:func:`~consumer.sources.listing.plan_scan`);
2. each worker walks a slice of a class folder (:func:`~consumer.scale.part_tasks.walk_part_task`): a
   ``listing`` part named by its content;
3. one worker joins them (:func:`join_task`): the local scan's merge (aliases, bad files,
   :func:`~consumer.sources.listing.merge_listing`), the class codes and the file table's sha256, as a ``files``
   part named by its inputs (an unchanged folder walked again finds it made);
4. the client keys the index cache entry (:func:`~consumer.dataset.entry.index_key`) from that part's facts; a hit
   ends here (the entry and the ``files`` part are mapped);
5. on a miss, the workers run libmagic over runs of the file table
   (:func:`~consumer.scale.part_tasks.describe_part_task`: ``headers`` parts, catalog rows committed by the
   catalog's own sync), then one worker assembles the documents and the sample index and writes the entry
   (:func:`assemble_task`, :func:`~consumer.dataset.entry.save_built`);
6. the client maps the entry and the ``files`` part (paths, sizes, stamps, device and inode for the reader).

The entry, the catalog rows and the samples are the local build's (same functions, same order); the client's work
is a few calls per part.
"""

from __future__ import annotations

import os
import secrets
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import ConsumerWarning, FormatError
from ..scale.engines import COSTS, Engine, plan_tasks
from ..scale.part_tasks import bad_files_json, bad_files_of, describe_part_task, texts_of, walk_part_task
from ..scale.parts import PARTS_DIR, PartRef, find_part, input_name, open_part, write_part
from ..scale.scan import walk_slices
from ..sources.corpus import Corpus
from ..sources.listing import local_directory, merge_listing, plan_scan
from ..sources.local import LocalFiles
from ..sources.paths import PathList
from ..sources.walk import Walk, WalkPart
from ..spec import Spec
from ..storage import Storage
from ..tokens.documents import DocumentTable, tokenise_headers
from ..tokens.vocab import Vocab
from ..util.progress import progress_bar
from ..util.validate import check_class_to_id
from .cache import building, file_table_sha256, load_entry
from .entry import index_key, sample_index, save_built

__all__ = ["OnParts", "build_on_parts", "join_task", "assemble_task"]

_WANT = {"file": ("description",), "mime": ("mime",)}


@dataclass
class OnParts:
    """What a build on parts hands back for :mod:`consumer.dataset.build` to make its ``Built``: the index cache
    ``entry`` (mapped; its ``paths`` not loaded), the ``corpus`` and ``paths`` over the mapped ``files`` part, the
    reader's ``source``, where the entry is, ``info`` for ``build_info`` and when the build started."""

    entry: tuple[dict, dict]
    corpus: Corpus
    paths: PathList
    source: LocalFiles
    cache_root: str
    key: str
    info: dict
    t0: float


def _writable(cache_root: str) -> bool:
    try:
        os.makedirs(os.path.join(cache_root, PARTS_DIR), exist_ok=True)
    except OSError:
        return False
    return os.access(os.path.join(cache_root, PARTS_DIR), os.W_OK)


def _one(engine: Engine, fn: Any, args: tuple, label: str) -> Any:
    """``fn(*args)`` run as one task on ``engine``."""
    return list(engine.map(fn, [args], label=label))[0]


def build_on_parts(fps: Any, spec: Spec, storage: Storage, verbose: bool, engine: Engine,
                   on_bad_file: str) -> OnParts | None:
    """The build of the module docstring, or None where it does not apply (the caller builds as usual)."""
    root = local_directory(fps) if storage.local_only else None
    cache_root = storage.cache_dir
    if root is None or not cache_root or spec.dedupe or callable(spec.metadata) or spec.records.records or \
            not _writable(cache_root):
        return None
    t0 = time.perf_counter()
    plan = plan_scan(root, on_bad_file)
    k = walk_slices(len(plan.folders), engine.slots)
    walked = engine.map(walk_part_task, [(cache_root, f, on_bad_file, j, k) for f in plan.folders for j in range(k)],
                        label="walk")
    listed = [[next(walked) for _ in range(k)] for _ in plan.folders]
    files = _one(engine, join_task, (cache_root, root, plan.names, plan.state.skip,
                                     bad_files_json(plan.state.bad), listed), "join")
    bad = bad_files_of(files.facts["bad"])
    if bad.total:
        warnings.warn(f"fps: {bad.summary()} in {root!r}; see build_info['skipped']", ConsumerWarning, stacklevel=4)
    classes = files.facts["classes"]
    spec = spec.replace(class_to_id=check_class_to_id(spec.class_to_id, classes))  # as the local build keys it
    key = index_key(spec, classes, files.facts["files_sha256"])
    cols = open_part(cache_root, files)
    paths = PathList(cols["paths"], cols["path_at"])
    calls, cache = 0, "hit"
    entry = load_entry(cache_root, key, skip=("paths",))
    if entry is None:
        with building(cache_root, key):  # of many processes missing it at once, one builds it
            entry = load_entry(cache_root, key, skip=("paths",))
            if entry is None:
                calls, cache = _assemble(engine, cache_root, key, spec, files, verbose), "miss"
                entry = load_entry(cache_root, key, skip=("paths",))
                if entry is None:
                    raise FormatError(f"cache_dir: the index cache entry {key[:16]}... a worker wrote under "
                                      f"{cache_root!r} does not read back verified")
    info = {"cache": cache, "libmagic_calls": calls, "skipped": dict(bad.counts),
            "skipped_examples": [list(e) for e in bad.examples], "aliases": files.facts["aliases"], "dedupe": None,
            "parts": {"listing": sum(len(f) for f in listed), "files": files.name}}
    return OnParts(entry, Corpus.of(classes, paths, cols["doc_class"], "dir"), paths,
                   LocalFiles(paths, cols["sizes"], cols["stamps"], cols["ident"]), cache_root, key, info, t0)


def _assemble(engine: Engine, cache_root: str, key: str, spec: Spec, files: PartRef, verbose: bool) -> int:
    """libmagic over runs of the file table on the workers (when the header mode needs it), then the entry made by
    one worker; the libmagic calls this build made."""
    want = _WANT.get(spec.metadata, ()) if isinstance(spec.metadata, str) else ()
    refs: list[PartRef] = []
    calls = 0
    if want:
        bounds = plan_tasks(files.rows, engine.slots, COSTS["libmagic"])
        token = secrets.token_hex(8)
        tasks = [(cache_root, files, a, b, spec.metadata, want, token) for a, b in bounds]
        bar = progress_bar(files.rows, verbose, f"libmagic ({engine.name})")
        try:
            for (a, b), (ref, made) in zip(bounds, engine.map(describe_part_task, tasks, label="libmagic")):
                refs.append(ref)
                calls += made
                bar.update(b - a)
        finally:
            bar.close()
    _one(engine, assemble_task, (cache_root, key, spec, files, refs), "assemble")
    return calls


def _walked(cache_root: str, ref: PartRef) -> WalkPart:
    cols = open_part(cache_root, ref)
    return WalkPart(PathList(cols["paths"], cols["path_at"]), cols["sizes"], cols["stamps"], cols["ident"],
                    bad_files_of(ref.facts["bad"]))


def join_task(cache_root: str, root: str, names: list[str], skip: bool, root_bad: dict,
              listed: list[list[PartRef]]) -> PartRef:
    """The ``listing`` parts of each class folder (``listed``, in walk order) merged by the local scan's rules
    (:func:`merge_listing`: aliases dropped, the same file in two classes refused or left out, bad files counted
    with the root's ``root_bad``), as a ``files`` part named by its inputs: columns ``paths``, ``path_at``,
    ``doc_class`` (int64, index into the classes that have files), ``sizes``, ``stamps``, ``ident``; facts
    ``classes``, ``files_sha256`` (:func:`file_table_sha256`, the index cache key's), ``bad``, ``aliases``."""
    name = input_name("files", {"version": __version__, "root": root, "names": names, "skip": skip, "bad": root_bad,
                                "parts": [[r.name for r in folder] for folder in listed]})
    found = find_part(cache_root, name)
    if found is not None:
        return found
    state = Walk(skip, root)
    state.bad = bad_files_of(root_bad)
    listing = merge_listing(state, names, [[_walked(cache_root, r) for r in folder] for folder in listed])
    classes = listing.corpus.class_names
    cls = np.repeat(np.arange(len(classes), dtype=np.int64), [len(c.paths) for c in listing.corpus.classes])
    columns = {"paths": listing.paths.packed(), "path_at": listing.paths.offsets(), "doc_class": cls,
               "sizes": listing.sizes, "stamps": listing.stamps, "ident": listing.ident}
    facts = {"classes": classes, "files_sha256": file_table_sha256(listing.paths, cls, listing.sizes, listing.stamps),
             "bad": bad_files_json(listing.bad), "aliases": listing.aliases}
    return write_part(cache_root, name, columns, facts, len(listing.sizes))


def _headers(cache_root: str, refs: list[PartRef], with_header: bool, n: int) -> tuple[list[str], np.ndarray]:
    """The distinct headers (sorted) and each document's index into them, from the ``headers`` parts in order
    (what :func:`~consumer.tokens.documents.build_documents` makes of one header per document)."""
    if not with_header:
        return [""], np.zeros(n, dtype=np.int32)
    parts = [(texts_of(cols, "header"), cols["header"]) for cols in (open_part(cache_root, r) for r in refs)]
    texts = sorted(set().union(*(table for table, _ in parts)))
    lookup = {t: i for i, t in enumerate(texts)}
    doc_header = np.concatenate([np.zeros(0, dtype=np.int32)] + [
        np.array([lookup[t] for t in table], dtype=np.int32)[np.asarray(codes)] for table, codes in parts])
    if doc_header.size != n:
        raise FormatError(f"headers: the parts cover {doc_header.size} documents, the file table has {n}")
    return texts, doc_header


def assemble_task(cache_root: str, key: str, spec: Spec, files: PartRef, headers: list[PartRef]) -> bool:
    """The documents (headers from the ``headers`` parts), the sample index and the index cache entry ``key`` of the
    file table ``files``, made as the local build makes them and written by this worker; whether it was saved."""
    cols = open_part(cache_root, files)
    classes = files.facts["classes"]
    paths = PathList(cols["paths"], cols["path_at"])
    vocab = Vocab(spec.n_bytes)
    texts, doc_header = _headers(cache_root, headers, spec.with_header, len(paths))
    header_ptr, header_tok = tokenise_headers(texts, vocab, spec.with_header)
    documents = DocumentTable(vocab=vocab, paths=paths, doc_class=np.asarray(cols["doc_class"], dtype=np.int64),
                              doc_size=np.asarray(cols["sizes"], dtype=np.int64), doc_header=doc_header,
                              headers=texts, header_ptr=header_ptr, header_tok=header_tok,
                              with_header=spec.with_header, doc_mtime=np.asarray(cols["stamps"], dtype=np.int64))
    index = sample_index(spec, documents, len(classes))
    spec = spec.replace(resolved_seqlen=index.seqlen, class_to_id=check_class_to_id(spec.class_to_id, classes))
    return save_built(cache_root, key, spec, documents, index, classes, "dir") is not None
